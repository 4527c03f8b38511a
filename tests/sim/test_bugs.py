"""The simulator's checks can fail: cores with a deliberately planted bug must be caught."""

from __future__ import annotations

import pytest

from node.raft.core import RaftCore
from node.raft.states import Leader
from node.sim.cluster import LivenessViolation, SimParams, run
from node.sim.invariants import InvariantViolation


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


class ForgetsQuorumState(RaftCore):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        real_write = self.quorum.write
        self.quorum.write = lambda state: real_write(state) if state.leader_epoch == 0 else None  # type: ignore[method-assign]


class IgnoresDivergence(RaftCore):
    def _truncate_diverging(self, diverging):  # type: ignore[no-untyped-def]
        return None


def first_violation(
    core_class: type[RaftCore], faults: tuple[str, ...], seeds: int = 40, snapshot_every: int = 25
) -> str:
    for seed in range(seeds):
        params = SimParams(seed=seed, voters=3, observers=1, faults=faults, snapshot_every=snapshot_every)
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


def test_lost_quorum_state_is_caught() -> None:
    assert first_violation(ForgetsQuorumState, ("crash",)) in {"MonotonicEpoch", "SingleLeader"}


def test_ignoring_divergence_is_caught() -> None:
    # Without snapshots: a later snapshot would otherwise repair the follower's log by accident.
    name = first_violation(IgnoresDivergence, ("crash", "partition"), snapshot_every=0)
    assert name in {"ConsistentCommittedData", "Liveness", "MajorityReachedHighWatermark"}
