"""Broker life shapes beyond crashes, for the cluster simulator.

Now and then a broker's heartbeats are lost on the way for a while (a third of the session
timeout up to twice it) while it runs and serves — its own clock, and so its self-fence, keeps
running — or a heartbeat of one of its earlier incarnations (or epochs) reaches the active
controller late. Drawn from a generator of their own, so the rest of a seed's schedule stays as
it was; lease expiry then runs both when something expired and when nothing did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

Event = tuple[int, tuple[Any, ...]]  # (when, the fault's payload)


@dataclass
class BrokerLives:
    """The pauses and late heartbeats drawn for one seed, and what happened to them."""

    rng: random.Random
    session_timeout_ms: int
    paused: dict[int, int] = field(default_factory=dict)  # broker → until when its heartbeats are lost
    pauses: list[tuple[int, int, int]] = field(default_factory=list)  # (broker, from, until)
    stale_sent: int = 0
    # (broker, incarnation, broker epoch) → the last heartbeat that life sent at that epoch
    last_heartbeat: dict[tuple[int, int, int], Any] = field(default_factory=dict)

    def schedule(self, brokers: list[int], fault_ms: int) -> list[Event]:
        """The pauses and late heartbeats of the fault period."""
        events: list[Event] = []
        t = 2_500 + self.rng.randrange(2_000)
        while t < fault_ms - 1_000:
            broker = self.rng.choice(brokers)
            if self.rng.random() < 0.5:
                length = self.rng.randint(self.session_timeout_ms // 3, 2 * self.session_timeout_ms)
                events.append((t, ("pause", broker, length)))
            else:
                events.append((t, ("stale-heartbeat", broker)))
            t += self.rng.randint(1_000, 4_000)
        return events

    def late_after_restart(self, incarnation: int) -> int | None:
        """After a restart, in how many ms the old life's last heartbeat arrives (None: it does not)."""
        if incarnation > 1 and self.rng.random() < 0.5:
            return self.rng.randint(300, 3_000)
        return None

    def sent(self, broker: int, incarnation: int, request: Any) -> None:
        """A heartbeat leaves the broker (remembered, to arrive late once the broker lives on)."""
        if hasattr(request, "current_metadata_offset"):
            self.last_heartbeat[(broker, incarnation, request.broker_epoch)] = request

    def lost(self, broker: int, now: int) -> bool:
        """Whether a heartbeat the broker sends now is lost on the way."""
        return now < self.paused.get(broker, 0)

    def pause(self, broker: int, now: int, length: int) -> None:
        """The broker's heartbeats are lost from now for `length` ms (unless already)."""
        if not self.lost(broker, now):
            self.paused[broker] = now + length
            self.pauses.append((broker, now, now + length))

    def stale(self, broker: int, registered_epoch: int | None) -> tuple[int, Any] | None:
        """An old heartbeat of the broker, sent before its registration at `registered_epoch`, to
        deliver now as (incarnation, request); None when there is none."""
        old = [(inc, req) for (b, inc, _), req in self.last_heartbeat.items()
               if b == broker and registered_epoch is not None and req.broker_epoch < registered_epoch]
        if not old:
            return None
        self.stale_sent += 1
        return self.rng.choice(old)

    def heal(self) -> None:
        """Every fault ends at the heal, a heartbeat pause too."""
        self.paused.clear()

    def outcomes(self, fence_events: list[tuple[int, dict[str, Any]]]) -> tuple[int, int]:
        """How many pauses ended with the broker fenced for its session, and how many without."""
        fenced = sum(any(f["broker"] == b and f["action"] == "fence" and f["reason"] == "session timeout"
                         and start <= t <= until for t, f in fence_events) for b, start, until in self.pauses)
        return fenced, len(self.pauses) - fenced
