"""The Raft simulator's wire mode reads every message by Kafka's schema (`node.sim.raft_reading`)
and every fetched control batch by Kafka's control records (`node.sim.control_reading`): a clean
run passes, and codecs wrong in a way the node's own round trip cannot see are caught on the way
(tests/sim/test_properties.py runs wire mode on a quarter of its seeds)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kraftlab.node.raft import control, election, wire
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Record
from kraftlab.node.sim.cluster import SimParams, run
from kraftlab.node.sim.control_reading import ControlViolation
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.kraft import KraftSim
from kraftlab.node.sim.raft_reading import ReadingViolation
from kraftlab.node.storage import batches

PARAMS = SimParams(seed=4, voters=3, observers=1, faults=("partition", "crash"), wire=True)


def test_a_clean_run_reads_as_kafka_reads_it() -> None:
    result = run(PARAMS)
    assert result.max_epoch >= 1 and result.committed_offset > 0


def _swap_epochs(message: Any) -> Any:
    if isinstance(message, m.VoteRequest):
        return dataclasses.replace(message, epoch=message.last_epoch, last_epoch=message.epoch)
    return message


def test_a_field_order_mistake_made_both_ways_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    to_wire, from_wire = wire.request_to_wire, wire.request_from_wire
    monkeypatch.setattr(wire, "request_to_wire", lambda msg, *a, **k: to_wire(_swap_epochs(msg), *a, **k))
    monkeypatch.setattr(wire, "request_from_wire", lambda entity: _swap_epochs(from_wire(entity)))
    with pytest.raises(ReadingViolation, match="Kafka's schema reads VoteRequest"):
        run(PARAMS)


def test_a_field_the_node_reads_wrong_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that takes a Fetch answer's log start offset for its high-water mark."""
    from_wire = wire.response_from_wire

    def misread(entity: Any) -> m.Response:
        answer = from_wire(entity)
        if isinstance(answer, m.FetchResponse):
            return dataclasses.replace(answer, high_watermark=answer.log_start_offset)
        return answer

    monkeypatch.setattr(wire, "response_from_wire", misread)
    with pytest.raises(ReadingViolation, match="the node's codec"):
        run(PARAMS)


def test_a_wrong_control_bit_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches, "CONTROL_FLAG", 0x10)
    with pytest.raises(ReadingViolation, match="FetchResponse"):
        run(PARAMS)


def test_a_wrong_control_type_number_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """LeaderChange written as Kafka's SNAPSHOT_HEADER (3), read back as a leader change by the node."""
    swap = {2: 3, 3: 2}
    key, kind = control.control_key, control.control_type
    monkeypatch.setattr(control, "control_key", lambda k: key(control.ControlRecordType(swap.get(int(k), int(k)))))
    monkeypatch.setattr(control, "control_type", lambda k: swap.get(kind(k), kind(k)))
    # (the log's reading sees it before the wire does: node.sim.control_log's ControlBatchLegal)
    with pytest.raises((ControlViolation, InvariantViolation), match="SNAPSHOT_HEADER"):
        run(PARAMS)


def test_the_cluster_simulators_raft_traffic_reads_as_kafka_reads_it() -> None:
    """The controllers' and brokers' Raft messages, real metadata records in their batches."""
    sim = KraftSim(seed=1, raft_wire=True)
    sim.run(fault_ms=6_000, settle_ms=6_000)


def test_a_metadata_record_with_a_key_is_caught_in_the_cluster_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller writing its records with a key (KRaft reads data records only without one)."""
    append = RaftNode.append
    monkeypatch.setattr(RaftNode, "append", lambda self, records, now: append(
        self, [Record(b"k", r.value) for r in records], now
    ))
    with pytest.raises(ControlViolation, match="data batch"):
        KraftSim(seed=1, raft_wire=True).run(fault_ms=6_000, settle_ms=6_000)


def test_a_leader_change_without_its_electors_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that leaves itself out of the granting voters it writes (KIP-595: it voted for itself)."""
    write = election.leader_change_record
    monkeypatch.setattr(election, "leader_change_record", lambda leader, voters, granting: write(
        leader, voters, [g for g in granting if g != leader]
    ))
    with pytest.raises(ControlViolation, match="LeaderChange"):
        run(PARAMS)


def _half_set(entity: Any) -> Any:
    """A Fetch answer whose absent snapshot id keeps the epoch 0 (only the end offset says none)."""
    if type(entity).__name__ != "FetchResponse":
        return entity
    topic = entity.responses[0]
    part = topic.partitions[0]
    if part.snapshot_id.end_offset >= 0:
        return entity
    part = dataclasses.replace(part, snapshot_id=dataclasses.replace(part.snapshot_id, epoch=0))
    topic = dataclasses.replace(topic, partitions=(part,))
    return dataclasses.replace(entity, responses=(topic,))


def test_a_half_set_snapshot_id_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's follower takes a SnapshotId with either field at 0 or above as set (and refuses the
    answer); this reading would take it for none: AbsentIsKafkasDefault sees it."""
    to_wire = wire.response_to_wire
    monkeypatch.setattr(wire, "response_to_wire", lambda msg, *a, **k: _half_set(to_wire(msg, *a, **k)))
    with pytest.raises(ReadingViolation, match="snapshot_id is end offset -1, epoch 0"):
        run(PARAMS)


def test_a_leader_id_below_kafkas_none_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A codec writing 'no leader' as -2 (a reader of `leader_id < 0` would not notice)."""
    monkeypatch.setattr(wire, "_bid", lambda node: wire.BrokerId(-2 if node is None else node))
    with pytest.raises(ReadingViolation, match="leader_id -2"):
        run(PARAMS)
