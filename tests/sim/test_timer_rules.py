"""The timer rules the simulator judges when they fall due (node.sim.timer_rules): they hold for
the real core over seeds with faults, and cores that forget a timer, fire one early or late, or
draw it from the wrong range are caught."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.ports import Record
from kraftlab.node.raft.states import EpochState, Follower, Leader, Unattached
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.timer_rules import SPREAD_DRAWS, TimerRules


def first_violation(
    core_class: type[RaftCore], seeds: range, config: RaftConfig | None = None, **params: Any
) -> InvariantViolation | None:
    runs = (SimParams(seed=seed, **{"voters": 3, "faults": ("flapping", "partition"), "fault_ms": 8_000,
                                    "settle_ms": 6_000, **params}) for seed in seeds)
    return first_violation_of(core_class, runs, config)


def test_the_real_core_keeps_every_timer() -> None:
    assert first_violation(RaftCore, range(4)) is None
    assert first_violation(RaftCore, range(2), voters=5, observers=1, faults=("crash", "drop", "delay")) is None
    assert first_violation(RaftCore, range(2), refusals=True, flush_delay_ms=5, faults=("crash", "oneway")) is None


# ---------------------------------------------------------------- wrong cores


class ForgetsTheFetchTimer(RaftCore):
    """A follower declares only its requests' timeouts: it notices a silent leader only when its
    Fetch times out (here later than the fetch timeout)."""

    def _next_deadline(self, now: int) -> int | None:
        if isinstance(self.state, Follower):
            return min((d for _, d in self._inflight.values()), default=None)
        return super()._next_deadline(now)


class FetchTimeoutHalved(RaftCore):
    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        super()._become_follower(epoch, leader_id, now)
        state = self.state
        assert isinstance(state, Follower)
        state.deadline = now + self.config.fetch_timeout_ms // 2


class ElectionTimeoutLate(RaftCore):
    def _election_timeout(self) -> int:
        return super()._election_timeout() + self.config.election_timeout_ms // 4


class ElectionTimeoutEarly(RaftCore):
    def _election_timeout(self) -> int:
        return super()._election_timeout() - self.config.election_timeout_ms // 4


class ElectionTimeoutNarrow(RaftCore):
    """Draws from [T, T + T/8): inside Kafka's window, never across it."""

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return self.rng.randrange(t, t + t // 8)


class NoLinger(RaftCore):
    """Writes every append at once, as if `controller.quorum.append.linger.ms` were 0."""

    def append(self, records: Sequence[Record], now: int) -> tuple[int, Output]:
        base, out = super().append(records, now)
        state = self.state
        if isinstance(state, Leader) and state.pending:
            self._begin()
            self._drain(state, now)
            out.merge(self._end(now))
        return base, out


class ForgetsTheLinger(RaftCore):
    """A leader leaves its lingering batch out of its declared timer (written at its next wake)."""

    def _next_deadline(self, now: int) -> int | None:
        state = self.state
        if isinstance(state, Leader) and state.pending:
            times = [d for _, d in self._inflight.values()] + [p.deadline for p in state.parked.values()]
            times.append(state.check_quorum_at)
            return min(times)
        return super()._next_deadline(now)


class DeclaresThePast(RaftCore):
    def _next_deadline(self, now: int) -> int | None:
        deadline = super()._next_deadline(now)
        return None if deadline is None else min(deadline, now - 1)


@pytest.mark.parametrize(
    ("core_class", "rule", "config"),
    [
        (ForgetsTheFetchTimer, "FetchTimeout", RaftConfig(request_timeout_ms=3_000)),
        (FetchTimeoutHalved, "FetchTimeout", None),
        (ElectionTimeoutLate, "ElectionTimeout", None),
        (ElectionTimeoutEarly, "ElectionTimeout", None),
        (NoLinger, "AppendLinger", None),
        (ForgetsTheLinger, "AppendLinger", None),
        (DeclaresThePast, "TimerDeclared", None),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_wrong_timer_is_caught(core_class: type[RaftCore], rule: str, config: RaftConfig | None) -> None:
    found = first_violation(core_class, range(6), config)
    assert found is not None and found.name == rule, found


def test_election_timeouts_drawn_from_a_corner_of_the_window_are_caught() -> None:
    found = first_violation(ElectionTimeoutNarrow, range(12), voters=5, fault_ms=20_000)
    assert found is not None and found.name == "ElectionTimeoutSpread", found


def test_the_spread_judges_uniform_draws_rarely_and_skewed_ones_always() -> None:
    """The first draws of a uniform election timeout pass (a fixed seed); all in a corner fail."""
    fails: list[str] = []
    rules = TimerRules(RaftConfig(), lambda name, detail: fails.append(name), lambda at: None)
    rng = random.Random(7)
    for _ in range(max(SPREAD_DRAWS)):
        rules._spread(rng.randrange(0, 1000), 1000)
    assert fails == []
    for corner in (range(0, 250), range(750, 1000)):
        rules = TimerRules(RaftConfig(), lambda name, detail: fails.append(name), lambda at: None)
        for _ in range(SPREAD_DRAWS[0]):
            rules._spread(rng.choice(corner), 1000)
        assert fails == ["ElectionTimeoutSpread"]
        fails.clear()


class NoElectionBackoff(RaftCore):
    """Starts the round after a failed one at once, every time."""

    def _backoff(self) -> int:
        return 0


def test_a_failed_round_never_backed_off_is_caught() -> None:
    found = first_violation(NoElectionBackoff, range(12))
    assert found is not None and found.name == "ElectionBackoff", found


class LateCheckQuorumLeader(Leader):
    """Declares its check-quorum deadline half a fetch timeout late (its poll still resigns when
    it is woken after the true deadline)."""

    __slots__ = ()

    def next_timer(self, now: int, linger_ms: int) -> int | None:
        check_quorum_at = self.check_quorum_at
        self.check_quorum_at += 1_000
        try:
            return super().next_timer(now, linger_ms)
        finally:
            self.check_quorum_at = check_quorum_at


class LateCheckQuorum(RaftCore):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._polls[LateCheckQuorumLeader] = self._poll_leader

    def _set_state(self, state: EpochState, now: int) -> None:
        if type(state) is Leader:
            state.__class__ = LateCheckQuorumLeader
        super()._set_state(state, now)


def test_a_check_quorum_timer_declared_late_is_judged_when_it_falls_due() -> None:
    """The leader resigns at its next wake (a client append, a parked fetch's end): the step-judged
    rule saw it already resigned; the event at the expiry sees it still leading."""
    found = first_violation(LateCheckQuorum, range(10))
    assert found is not None and found.name == "CheckQuorumResigns", found


class ForgetsTheParkedFetches(RaftCore):
    """A leader leaves its parked fetches' max wait out of its declared timer: it answers them at
    its next wake — soon enough while a client appends, not in a quiet window."""

    def _next_deadline(self, now: int) -> int | None:
        state = self.state
        if isinstance(state, Leader) and state.parked:
            times = [d for _, d in self._inflight.values()] + [state.check_quorum_at]
            if state.pending:
                times.append(state.pending_since + self.config.append_linger_ms)
            return min(times)
        return super()._next_deadline(now)


def test_a_quiet_window_shows_a_timer_only_client_traffic_covered() -> None:
    assert first_violation(ForgetsTheParkedFetches, range(10), faults=("partition",)) is None
    found = first_violation(ForgetsTheParkedFetches, range(10), faults=("quiet",))
    assert found is not None and found.name == "Unanswered", found


def test_the_real_core_keeps_every_timer_through_quiet_windows() -> None:
    assert first_violation(RaftCore, range(4), faults=("quiet", "crash"), voters=5, observers=1) is None


class RequestTimeoutHalved(RaftCore):
    """Gives up on an unanswered request after half `controller.quorum.request.timeout.ms`."""

    def _send(self, dst: int, message: m.Request, now: int) -> None:
        super()._send(dst, message, now)
        ref, deadline = self._inflight[dst]
        self._inflight[dst] = (ref, deadline - self.config.request_timeout_ms // 2)


class RetriesAtOnce(RaftCore):
    """Retries a failed request (connection refused) without the retry backoff."""

    def _on_request_failed(self, env: m.Envelope, failed: m.RequestFailed, now: int) -> None:
        super()._on_request_failed(env, failed, now)
        entry = self._inflight.get(env.src)
        if entry is not None and entry[0] == 0:
            self._inflight[env.src] = (0, now)


class RetriesTooLate(RaftCore):
    """Backs off a failed request for three times `quorum.election.backoff.max.ms`."""

    def _on_request_failed(self, env: m.Envelope, failed: m.RequestFailed, now: int) -> None:
        super()._on_request_failed(env, failed, now)
        entry = self._inflight.get(env.src)
        if entry is not None and entry[0] == 0:
            self._inflight[env.src] = (0, now + 3 * self.config.election_backoff_max_ms)


@pytest.mark.parametrize(
    ("core_class", "rules"),
    [
        (RequestTimeoutHalved, ("RequestTimeout",)),
        (RetriesAtOnce, ("RetryBackoff",)),
        (RetriesTooLate, ("FetchRetry", "BeginQuorumEpochRetry", "EndQuorumEpochRetry")),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_wrong_request_timer_is_caught(core_class: type[RaftCore], rules: tuple[str, ...]) -> None:
    found = first_violation(core_class, range(10), faults=("crash", "drop", "partition"), refusals=True)
    assert found is not None and found.name in rules, found


class FetchTimeoutAMillisecondEarly(RaftCore):
    """A follower whose fetch timeout counts as passed a millisecond before it ends."""

    def _poll_follower(self, state: Follower, now: int) -> None:
        if now + 1 == state.deadline:
            state.deadline = now
        super()._poll_follower(state, now)


def test_wakeups_a_millisecond_off_show_a_timer_off_by_one() -> None:
    """The driver's spurious wake-up a millisecond before a deadline is where the core acts early
    (without it, only a message landing in that millisecond shows it)."""

    def caught(faults: tuple[str, ...]) -> list[int]:
        found = [(s, first_violation(FetchTimeoutAMillisecondEarly, range(s, s + 1), faults=faults)) for s in range(12)]
        assert all(v.name == "FetchTimeout" for _, v in found if v is not None), found
        return [s for s, v in found if v is not None]

    assert len(caught(("drop", "wakeups"))) > 1 + len(caught(("drop",)))


def test_the_real_core_keeps_every_timer_when_woken_a_millisecond_off() -> None:
    assert first_violation(RaftCore, range(4), faults=("wakeups", "crash", "drop"), voters=5, observers=1) is None


class TellsTheEpochOnce(RaftCore):
    """A leader that sends BeginQuorumEpoch once per voter and never again, and a resigned leader
    likewise EndQuorumEpoch, whatever became of the request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._told: set[tuple[int, int, type]] = set()

    def _send(self, dst: int, message: m.Request, now: int) -> None:
        if isinstance(message, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
            key = (message.epoch, dst, type(message))
            if key in self._told:
                self._inflight[dst] = (0, now + self.config.request_timeout_ms)  # as if outstanding
                return
            self._told.add(key)
        super()._send(dst, message, now)


def test_a_leader_that_stops_telling_its_epoch_is_caught() -> None:
    found = first_violation(TellsTheEpochOnce, range(10), faults=("drop", "partition"))
    assert found is not None and found.name in ("BeginQuorumEpochRetry", "EndQuorumEpochRetry"), found


class ObserverSeeksSlowly(RaftCore):
    """An observer without a leader asks a voter only every ten retry backoffs."""

    def _bootstrap_fetch(self, state: Unattached, now: int) -> None:
        super()._bootstrap_fetch(state, now)
        state.deadline = now + 10 * self.config.retry_backoff_ms


def test_an_observer_slow_to_look_for_the_leader_is_caught() -> None:
    found = first_violation(ObserverSeeksSlowly, range(10), observers=2, faults=("crash", "partition"))
    assert found is not None and found.name == "BootstrapRetry", found


class WaitsAtTheFirstStart(RaftCore):
    """A fresh quorum's voters wait a whole election timeout before their first pre-vote."""

    def _fresh_deadline(self, now: int) -> int:
        return now + self._election_timeout()


def test_a_fresh_quorum_slow_to_begin_is_caught() -> None:
    found = first_violation(WaitsAtTheFirstStart, range(2), faults=())
    assert found is not None and found.name == "ElectionTimeout", found
