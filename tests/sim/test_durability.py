"""Durability judged by the Raft simulator (node.sim.durability): the real core's claims are backed
by its simulated disk and its restarts are true to it over many seeds, and cores that claim what
they did not flush, forget a flush (reported, or their own), lag their high-water mark, answer a
vote before writing it, or restart from anything but their disk are caught."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.ports import Batch
from kraftlab.node.raft.quorum_state import QuorumState
from kraftlab.node.raft.states import EpochState, Leader
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.durability import majority_end
from kraftlab.node.sim.invariants import InvariantViolation


def params(seed: int) -> SimParams:
    """Crashes and partitions, a deferred leader flush on most seeds, both retentions."""
    return SimParams(
        seed=seed,
        voters=3 + 2 * (seed % 2),
        observers=1 if seed % 3 == 0 else 0,
        faults=("crash", "partition"),
        flush_delay_ms=5 + (seed % 3) * 5,
        retention_bytes=None if seed % 2 else 0,
    )


def first_violation(core_class: type[RaftCore], seeds: range) -> InvariantViolation | None:
    return first_violation_of(core_class, map(params, seeds))


def test_majority_end_is_what_a_majority_reaches() -> None:
    assert majority_end([5, 9, 7]) == 7
    assert majority_end([3, 9, 9, 1, 2]) == 3
    assert majority_end([4]) == 4


def test_the_real_core_keeps_its_claims_and_restarts_from_its_disk() -> None:
    simulations = [Simulation(params(seed)) for seed in range(8)]
    for simulation in simulations:
        simulation.run()
    assert sum(s.durability.recovery.restarts for s in simulations) > 0  # restarts were judged


class FollowerDefersItsFlush(RaftCore):
    """A follower that flushes later, like a leader with a deferred flush, but fetches at once
    (acknowledging records a crash would lose)."""

    def _append_local(self, batches: Sequence[Batch], leader: bool) -> None:
        super()._append_local(batches, leader or self.deferred_flush)


class ForgetsReportedFlushes(RaftCore):
    """A leader that ignores the flushes the driver reports (it counts only its own)."""

    def flushed(self, now: int) -> Output:
        return self.tick(now)


class FollowerFlushesUncounted(RaftCore):
    """A node that does not count the flushes it makes as a follower: a new leader describes (and
    counts toward the HW) a durable end behind what it flushed."""

    def _append_local(self, batches: Sequence[Batch], leader: bool) -> None:
        durable = self._durable
        super()._append_local(batches, leader)
        if not leader:
            self._durable = durable


class LagsItsHighWatermark(RaftCore):
    """A leader that lets every other chance to move its high-water mark pass."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chances = 0

    def _maybe_advance_hw(self, state: Leader) -> bool:
        self._chances += 1
        return False if self._chances % 2 else super()._maybe_advance_hw(state)


class LazyVoteWrites(QuorumState):
    """Writes a vote for another voter (a state with that vote and no leader) to the quorum-state
    file only at the next transition."""

    __slots__ = ()

    def transition_to(self, state: EpochState, out: Output, journal: bool) -> None:
        if state.voted_id not in (None, self.local_id) and state.leader_id is None:
            self.state = state
            return
        super().transition_to(state, out, journal)


class AnswersVotesBeforeWritingThem(RaftCore):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quorum_state.__class__ = LazyVoteWrites


class RestartsCommitted(RaftCore):
    """A restarted node that takes its whole durable log for committed."""

    def start(self, now: int) -> Output:
        out = super().start(now)
        self._hw = max(self._hw, self.log.end_offset())
        return out


class RestartsAtItsSnapshot(RaftCore):
    """A restarted node that drops the log past its latest snapshot (durable records lost)."""

    def start(self, now: int) -> Output:
        latest = self.snapshots.latest()
        if latest is not None and self.log.start_offset() <= latest.offset < self.log.end_offset():
            self.log.truncate_to(latest.offset)
        return super().start(now)


@pytest.mark.parametrize(
    ("core", "rule", "said"),
    [
        (FollowerDefersItsFlush, "DurableClaims", "sent a Fetch"),
        (ForgetsReportedFlushes, "DurableClaims", "describes its own log end"),
        (FollowerFlushesUncounted, "DurableClaims", "describes its own log end"),
        (LagsItsHighWatermark, "DurableClaims", "keeps its high-water mark"),
        (AnswersVotesBeforeWritingThem, "DurableClaims", "vote granted"),
        (RestartsCommitted, "RecoversDurableState", "restarted with high-water mark"),
        (RestartsAtItsSnapshot, "RecoversDurableState", "its disk held"),
    ],
    ids=[
        "follower-acks-unflushed",
        "forgets-flushes",
        "follower-flushes-uncounted",
        "lagging-hw",
        "vote-before-write",
        "restart-committed",
        "restart-drops-log",
    ],
)
def test_a_core_breaking_durability_is_caught(core: type[RaftCore], rule: str, said: str) -> None:
    found = first_violation(core, range(12))
    assert found is not None and found.name == rule and said in found.detail, found


def test_a_share_of_crash_seeds_crash_at_the_moments_durability_is_decided() -> None:
    seen: dict[str, int] = {}
    enabled = 0
    for seed in range(12):
        simulation = Simulation(params(seed))
        simulation.run()
        enabled += simulation.moments.on
        for moment, n in simulation.moments.injected.items():
            seen[moment] = seen.get(moment, 0) + n
    assert 0 < enabled < 12
    assert {"vote", "snapshot"} <= set(seen), seen
