"""Brokers' log directories in the cluster simulator, and their failures (KIP-858).

Each broker gets one to three log directories (drawn per seed, from a generator of their own so
the rest of the seed's schedule stays as it was). Now and then a broker with at least two healthy
directories loses one: its heartbeats name it in OfflineLogDirs from then on, and while it is
broken a restarted broker cannot open it, so it does not register it. Later the directory is
repaired — the same disk back (the same directory id) or a new disk formatted anew (a new id) —
and the broker restarts to register it again.

It also judges what the active controller makes of a heartbeat naming OfflineLogDirs (Kafka's
handleDirectoriesOffline runs within the heartbeat).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from kraftlab.node.controller import QuorumController
from kraftlab.node.metadata.image import MetadataImage

Event = tuple[int, tuple[Any, ...]]  # (when, the fault's payload)


def schedule_failures(rng: random.Random, brokers: list[int], fault_ms: int) -> list[Event]:
    """Now and then a broker's log directory fails, and is repaired later (the broker restarts to
    register it again)."""
    events: list[Event] = []
    t = 2_000 + rng.randrange(3_000)
    while t < fault_ms - 1_000:
        broker = rng.choice(brokers)
        events.append((t, ("fail-dir", broker)))
        events.append((min(t + rng.randint(1_000, 6_000), fault_ms), ("repair-dir", broker)))
        t += rng.randint(1_500, 5_000)
    return events


def before_offline_dirs(ctrl: QuorumController | None, request: Any) -> MetadataImage | None:
    """The active controller's image before a heartbeat naming OfflineLogDirs (and asking neither
    to be fenced nor to shut down) that it may accept; None otherwise."""
    if ctrl is None or not ctrl.active or not getattr(request, "offline_log_dirs", ()) \
            or request.want_fence or request.want_shut_down:
        return None
    return ctrl.future_image.copy()


def offline_dirs_problems(ctrl: QuorumController | None, node_id: int, request: Any,
                          before: MetadataImage | None) -> list[str]:
    """A heartbeat the active controller accepted (it names the registered broker epoch) that
    names OfflineLogDirs leaves the broker registered without them: a controller that ignores the
    report keeps electing replicas on a disk the broker cannot use. And it moves only the replicas
    on those directories: the broker's replicas elsewhere keep their ISR places and leaderships."""
    offline = set(getattr(request, "offline_log_dirs", ()) or ())
    if not offline or ctrl is None or not ctrl.active:
        return []
    bid = request.broker_id
    reg = ctrl.future_image.brokers.get(bid)
    if reg is None or reg.epoch != request.broker_epoch:
        return []
    if offline & set(reg.log_dirs):
        return [f"controller {node_id} accepted broker {bid}'s heartbeat naming offline log directories "
                f"{sorted(map(str, offline))} and still registers {sorted(map(str, offline & set(reg.log_dirs)))} "
                f"online"]
    if before is None:
        return []
    for topic, pid, p in before.partitions():
        q = ctrl.future_image.topics.get(topic.topic_id)
        now_p = q.partitions.get(pid) if q is not None else None
        if now_p is None or p.directory(bid) in offline or not before.replica_online(p, bid):
            continue
        if (bid in p.isr and bid not in now_p.isr) or (p.leader == bid and now_p.leader != bid):
            return [f"controller {node_id}: broker {bid}'s heartbeat naming offline log directories moved its "
                    f"replica of {topic.name}-{pid}, on a healthy directory (isr {p.isr} -> {now_p.isr}, leader "
                    f"{p.leader} -> {now_p.leader})"]
    return []


@dataclass
class LogDirs:
    """The directories each broker has, and which of them are broken."""

    rng: random.Random
    dirs: dict[int, list[uuid.UUID]] = field(default_factory=dict)
    broken: dict[int, set[uuid.UUID]] = field(default_factory=dict)
    failures: int = 0
    repairs: int = 0
    reformatted: int = 0

    @classmethod
    def drawn(cls, rng: random.Random, brokers: list[int]) -> LogDirs:
        self = cls(rng)
        for b in brokers:
            self.dirs[b] = [self._new_id() for _ in range(rng.choice([1, 2, 2, 3]))]
            self.broken[b] = set()
        return self

    def _new_id(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def registered(self, broker: int) -> tuple[uuid.UUID, ...]:
        """The directories a starting broker registers: every one it can open."""
        return tuple(d for d in self.dirs[broker] if d not in self.broken[broker])

    def fail(self, broker: int) -> uuid.UUID | None:
        """Break one of the broker's healthy directories, keeping at least one healthy (a broker
        with none left stops; that is a crash, drawn elsewhere); None when it has too few."""
        healthy = list(self.registered(broker))
        if len(healthy) < 2:
            return None
        d = self.rng.choice(healthy)
        self.broken[broker].add(d)
        self.failures += 1
        return d

    def repair(self, broker: int) -> bool:
        """Repair the broker's broken directories: the same disk back, or a new one formatted anew
        (a new directory id); True when there was something to repair."""
        if not self.broken[broker]:
            return False
        for d in sorted(self.broken[broker]):
            if self.rng.random() < 0.5:
                i = self.dirs[broker].index(d)
                self.dirs[broker][i] = self._new_id()
                self.reformatted += 1
        self.broken[broker].clear()
        self.repairs += 1
        return True
