"""kraft.version, the voter set and the control batches of every log, read as Kafka reads them
(`node.sim.control_log`): clean runs of the static and the dynamic quorum keep both rules while the
reading follows voter changes, and cores that read or write control records otherwise are caught."""

from __future__ import annotations

from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.control import LEADER_CHANGE, control_type, decode_leader_change, leader_change_record
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.membership.log_voters import ControlRecordState
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, kraft_version_record, voters_record
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.raft.states import Leader
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation

RAFT_RUNS = [SimParams(seed=s, voters=3, observers=1, faults=("crash", "partition")) for s in range(4)]


def _membership(seed: int) -> MembershipParams:
    return MembershipParams(SimParams(seed=seed, voters=5, faults=("crash", "partition")), initial=2)


def test_the_reading_follows_every_node_of_a_dynamic_quorum() -> None:
    sim = MembershipSimulation(_membership(1))
    sim.run()
    assert sim.report.changes_committed > 0
    read = {nid: sim.control_log._readings[nid].state for nid, n in sim.nodes.items() if n.core is not None}
    assert read and all(state.kraft_version == 1 and state.voters for state in read.values())
    for nid, state in read.items():
        core = sim.nodes[nid].core
        assert core is not None and state.voters is not None
        assert tuple(v.node_id for v in state.voters) == core.voter_set.ids


def test_a_static_quorum_reads_its_configured_voters() -> None:
    sim = Simulation(RAFT_RUNS[0])
    sim.run()
    states = {r.state for r in sim.control_log._readings.values()}
    assert len(states) == 1 and states.pop().voters is None


class LeaderChangeNamesItsElectors(RaftCore):
    """A leader whose LeaderChange names only the voters that elected it as the voters."""

    def _write_batch(self, state: Leader, batch: Batch, now: int) -> None:
        first = batch.records[0] if batch.control and batch.records else None
        if first is not None and control_type(first.key) == LEADER_CHANGE:
            leader, _, granting = decode_leader_change(first)
            batch = Batch(batch.base_offset, batch.epoch, (leader_change_record(leader, granting, granting),
                          *batch.records[1:]), True, batch.append_time_ms)
        super()._write_batch(state, batch, now)


class StaticLeaderWritesItsKraftVersion(RaftCore):
    """A static quorum's leader that writes a KRaftVersionRecord (kraft.version 0) at its epoch start."""

    def _write_batch(self, state: Leader, batch: Batch, now: int) -> None:
        if batch.control and control_type(batch.records[0].key) == LEADER_CHANGE:
            records = (*batch.records, kraft_version_record(KRAFT_VERSION_0))
            batch = Batch(batch.base_offset, batch.epoch, records, True, batch.append_time_ms)
        super()._write_batch(state, batch, now)


@pytest.mark.parametrize("core_class", [LeaderChangeNamesItsElectors, StaticLeaderWritesItsKraftVersion])
def test_a_control_batch_kafka_does_not_write_is_caught(core_class: type[RaftCore]) -> None:
    violation = first_violation_of(core_class, RAFT_RUNS)
    assert violation is not None and violation.name == "ControlBatchLegal", violation


class _FirstRecordOnly(ControlRecordState):
    __slots__ = ()

    def apply_batch(self, batch: Batch) -> None:
        if batch.control and batch.records:
            self.apply_record(batch.base_offset, batch.records[0])


class ReadsTheFirstControlRecordOnly(RaftCore):
    """A replica reading only the first record of each control batch: the KRaftVersion and Voters
    records after an epoch's LeaderChange are lost on it (a replica formatted without voters never
    learns them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.control.__class__ = _FirstRecordOnly


def test_a_node_reading_its_voters_otherwise_than_kafka_is_caught() -> None:
    caught = None
    for seed in range(3):
        try:
            MembershipSimulation(_membership(seed), core_class=ReadsTheFirstControlRecordOnly).run()
        except InvariantViolation as exc:
            caught = exc
            break
    assert caught is not None and caught.name == "VotersAsKafkaReadsThem", caught


class RemovesTwoVotersAtOnce(RaftCore):
    """A leader whose removal of a voter (from three or more) takes another voter out with it."""

    def _start_change(self, kind: str, env: m.Envelope, voters: VoterSet, subject: int, now: int) -> None:
        others = [i for i in voters.ids if i != self.node_id]
        if kind == "remove" and len(voters) >= 3 and others:
            voters = voters.without(others[-1])
        super()._start_change(kind, env, voters, subject, now)


def test_a_voter_change_of_two_voters_is_caught() -> None:
    """(Seed 2: the first such removal keeps majorities intersecting, so only the one-voter rule sees it.)"""
    with pytest.raises(InvariantViolation, match=r"ControlBatchLegal.*one voter at a time"):
        MembershipSimulation(_membership(2), core_class=RemovesTwoVotersAtOnce).run()


class SnapshotsTheLatestVoters(RaftCore):
    """A node whose snapshots carry the voter set at its log's end, not the one in force at the
    snapshot's last offset (a VotersRecord appended after it is not the snapshot's)."""

    def _membership_records(self, end_offset: int) -> list[Record]:
        records = super()._membership_records(end_offset)
        return records and [records[0], voters_record(self.control.latest_voters)]


def test_a_snapshot_carrying_another_voter_set_is_caught() -> None:
    """(Seed 1: the first snapshot taken while a voter change is appended past its end.)"""
    with pytest.raises(InvariantViolation, match="SnapshotVotersInForce"):
        MembershipSimulation(_membership(1), core_class=SnapshotsTheLatestVoters).run()
