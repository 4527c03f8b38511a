"""The simulator's checks can fail: cores with a deliberately planted bug must be caught."""

from __future__ import annotations

import pytest

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.cluster import LivenessViolation, SimParams, run
from kraftlab.node.sim.invariants import InvariantViolation


class HighWatermarkWithoutMajority(RaftCore):
    def _maybe_advance_hw(self, state: Leader) -> bool:
        own = self.log.flushed_end_offset()
        if own <= state.epoch_start_offset or own <= self._hw:
            return False
        self._set_hw(own)
        self._complete_parked(state)
        return True


class FollowerSkipsFlush(RaftCore):
    def _append_local(self, batches, leader):  # type: ignore[no-untyped-def]
        self.log.append(batches)
        if leader:
            self.log.flush()


class LeaderCountsUnflushedTail(RaftCore):
    def _durable_end(self) -> int:
        return self.log.end_offset()  # its own unflushed tail counted as durable


class ForgetsQuorumState(RaftCore):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        real_write = self.quorum.write
        self.quorum.write = lambda state: real_write(state) if state.leader_epoch == 0 else None  # type: ignore[method-assign]


class IgnoresDivergence(RaftCore):
    def _truncate_diverging(self, diverging):  # type: ignore[no-untyped-def]
        return None


def first_violation(
    core_class: type[RaftCore],
    faults: tuple[str, ...],
    seeds: int = 40,
    snapshot_every: int = 25,
    flush_delay_ms: int = 0,
) -> str:
    for seed in range(seeds):
        params = SimParams(
            seed=seed,
            voters=3,
            observers=1,
            faults=faults,
            snapshot_every=snapshot_every,
            flush_delay_ms=flush_delay_ms,
        )
        try:
            run(params, core_class=core_class)
        except InvariantViolation as exc:
            return exc.name
        except LivenessViolation:
            return "Liveness"
    pytest.fail(f"{core_class.__name__} was never caught in {seeds} seeds")


def test_hw_without_majority_is_caught() -> None:
    assert first_violation(HighWatermarkWithoutMajority, ()) == "MajorityReachedHighWatermark"


def test_follower_acknowledging_unflushed_data_is_caught() -> None:
    assert first_violation(FollowerSkipsFlush, ()) == "MajorityReachedHighWatermark"


def test_leader_counting_its_unflushed_tail_is_caught() -> None:
    """With the deferred leader flush, the leader's tail is not durable until its flush completes: a
    leader counting it toward the HW commits what a crash of it (plus one follower) would lose."""
    assert first_violation(LeaderCountsUnflushedTail, ("crash",), flush_delay_ms=20) == "MajorityReachedHighWatermark"


def test_deferred_leader_flush_keeps_every_invariant() -> None:
    for seed in range(6):
        run(SimParams(seed=seed, voters=3, observers=1, faults=("crash", "partition", "delay"), flush_delay_ms=20))


def test_lost_quorum_state_is_caught() -> None:
    assert first_violation(ForgetsQuorumState, ("crash",)) in {"MonotonicEpoch", "SingleLeader"}


def test_ignoring_divergence_is_caught() -> None:
    # Without snapshots: a later snapshot would otherwise repair the follower's log by accident.
    name = first_violation(IgnoresDivergence, ("crash", "partition"), snapshot_every=0)
    assert name in {"ConsistentCommittedData", "Liveness", "MajorityReachedHighWatermark"}
