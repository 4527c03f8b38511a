"""The simulator's checks can fail: cores with a deliberately planted bug must be caught."""

from __future__ import annotations

import pytest

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
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


class ForgetsCatchingUp(RaftCore):
    """DescribeQuorum's lastCaughtUpTimestamp of a voter stays at the first time it caught up."""

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        state = self.state
        first = {r: p.last_caught_up_ms for r, p in state.voters.items()} if isinstance(state, Leader) else {}
        super()._on_fetch_request(env, req, now)
        if isinstance(state, Leader):
            for r, t in first.items():
                if t >= 0:
                    state.voters[r].last_caught_up_ms = t


class KeepsOldSnapshots(RaftCore):
    def _delete_snapshots_before(self, sid: OffsetAndEpoch) -> None:
        return None


class ServesEmptySnapshotChunks(RaftCore):
    """A FetchSnapshot asking for no bytes is answered (with no data) instead of refused."""

    def _on_fetch_snapshot_request(self, env: m.Envelope, req: m.FetchSnapshotRequest, now: int) -> None:
        if req.max_bytes <= 0 and req.snapshot_id in self.snapshots.ids() and req.position >= 0:
            self._reply(env, m.FetchSnapshotResponse(m.Errors.NONE, self.epoch, self.leader_id, req.snapshot_id))
            return
        super()._on_fetch_snapshot_request(env, req, now)


def first_violation(
    core_class: type[RaftCore],
    faults: tuple[str, ...],
    seeds: int = 40,
    snapshot_every: int = 25,
    flush_delay_ms: int = 0,
    rogue: bool = False,
) -> str:
    for seed in range(seeds):
        params = SimParams(
            seed=seed,
            voters=3,
            observers=1,
            faults=faults,
            snapshot_every=snapshot_every,
            flush_delay_ms=flush_delay_ms,
            rogue=rogue,
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
    # At the moment it claims them: its next Fetch offset is past what it flushed (before the
    # leader's high-water mark counts that claim).
    assert first_violation(FollowerSkipsFlush, ()) == "DurableClaims"


def test_leader_counting_its_unflushed_tail_is_caught() -> None:
    """With the deferred leader flush, the leader's tail is not durable until its flush completes: a
    leader counting it toward the HW commits what a crash of it (plus one follower) would lose."""
    # DescribeQuorum shows it first: the leader describes its unflushed tail as its own log end.
    name = first_violation(LeaderCountsUnflushedTail, ("crash",), flush_delay_ms=20)
    assert name in {"MajorityReachedHighWatermark", "DescribeQuorumReplicaState", "DurableClaims"}


def test_deferred_leader_flush_keeps_every_invariant() -> None:
    for seed in range(6):
        run(SimParams(seed=seed, voters=3, observers=1, faults=("crash", "partition", "delay"), flush_delay_ms=20))


def test_lost_quorum_state_is_caught() -> None:
    # DurableClaims: a vote or candidacy sent in an epoch its quorum-state does not hold.
    assert first_violation(ForgetsQuorumState, ("crash",)) in {"MonotonicEpoch", "SingleLeader", "DurableClaims"}


def test_ignoring_divergence_is_caught() -> None:
    # Without snapshots: a later snapshot would otherwise repair the follower's log by accident.
    name = first_violation(IgnoresDivergence, ("crash", "partition"), snapshot_every=0)
    assert name in {"ConsistentCommittedData", "Liveness", "MajorityReachedHighWatermark"}


def test_describe_quorum_with_a_stale_caught_up_time_is_caught() -> None:
    assert first_violation(ForgetsCatchingUp, ()) == "DescribeQuorumReplicaState"


def test_snapshots_kept_below_the_log_start_are_caught() -> None:
    assert first_violation(KeepsOldSnapshots, ("partition", "wipe")) == "NoSnapshotBelowLogStart"


def test_a_malformed_request_answered_is_caught() -> None:
    assert first_violation(ServesEmptySnapshotChunks, (), rogue=True) == "BadRequestRefused"
