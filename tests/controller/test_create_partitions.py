"""CreatePartitions on the controller: Kafka's validation errors, placement, records, atomicity,
validate_only, and the answer any version of the request gets (also NOT_CONTROLLER)."""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import Harness
from kio.schema.create_partitions.v0.request import CreatePartitionsRequest as V0
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kio.schema.errors import ErrorCode

from kraftlab.node.metadata.records import PartitionRecord, decode


def grow(name: str, count: int, assignments: list[list[int]] | None = None) -> CreatePartitionsTopic:
    return CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else tuple(CreatePartitionsAssignment(broker_ids=tuple(a))
                                                           for a in assignments))


def run(h: Harness, *topics: CreatePartitionsTopic, validate_only: bool = False) -> dict[str, Any]:
    resp = h.run(CreatePartitionsRequest(topics=topics, timeout=30_000, validate_only=validate_only))
    return {r.name: (r.error_code, r.error_message) for r in resp.results}


def codes(h: Harness, *topics: CreatePartitionsTopic, validate_only: bool = False) -> dict[str, ErrorCode]:
    return {k: v[0] for k, v in run(h, *topics, validate_only=validate_only).items()}


def test_adds_partitions_numbered_after_the_existing_ones(h: Harness) -> None:
    h.start_brokers(1, 2, 3)
    h.create("t", partitions=2, rf=2)
    before = len(h.q.batches)
    assert codes(h, grow("t", 5)) == {"t": ErrorCode.none}
    t = h.image().topic("t")
    assert sorted(t.partitions) == [0, 1, 2, 3, 4]
    for pid in (2, 3, 4):
        p = t.partitions[pid]
        assert len(p.replicas) == 2 and len(set(p.replicas)) == 2  # the topic's replication factor
        assert p.isr == p.replicas and p.leader == p.replicas[0] and p.leader_epoch == 0
    new = [b for b in h.q.batches[before:] if not b.control]
    assert len(new) == 1  # one batch: all or nothing
    recs = [decode(r.value) for r in new[0].records]
    assert all(isinstance(r, PartitionRecord) for r in recs) and [r.partition_id for r in recs] == [2, 3, 4]
    assert h.evs("decision")[-1] == {"api": "CreatePartitions", "topic": "t", "count": 5, "error": "NONE",
                                     "offset": h.active().committed_offset - 1}


def test_kafka_validation_errors(h: Harness) -> None:
    h.start_brokers(1, 2)
    h.create("t", partitions=2, rf=2)
    assert codes(h, grow("nope", 3)) == {"nope": ErrorCode.unknown_topic_or_partition}
    out = run(h, grow("t", 1))
    assert out["t"][0] == ErrorCode.invalid_partitions and "would not be an increase" in out["t"][1]
    assert codes(h, grow("t", 2)) == {"t": ErrorCode.invalid_partitions}
    assert codes(h, grow("t", 4, [[1, 2]])) == {"t": ErrorCode.invalid_replica_assignment}  # one of two
    assert codes(h, grow("t", 3, [[1]])) == {"t": ErrorCode.invalid_replica_assignment}  # factor 1, not 2
    assert codes(h, grow("t", 3, [[1, 1]])) == {"t": ErrorCode.invalid_replica_assignment}
    assert codes(h, grow("t", 3, [[1, 9]])) == {"t": ErrorCode.invalid_replica_assignment}  # unregistered
    assert codes(h, grow("t", 2**31 - 1)) == {"t": ErrorCode.policy_violation}  # refused before anything is built
    assert len(h.image().topic("t").partitions) == 2
    assert codes(h, grow("t", 3, [[2, 1]])) == {"t": ErrorCode.none}
    assert h.image().topic("t").partitions[2].replicas == (2, 1)


def test_replication_factor_larger_than_the_usable_brokers(h: Harness) -> None:
    epochs = h.start_brokers(1, 2)
    h.create("t", partitions=1, rf=2)
    h.heartbeat(2, epochs[2], want_fence=True)
    assert codes(h, grow("t", 2)) == {"t": ErrorCode.invalid_replication_factor}


def test_duplicates_are_refused_and_the_others_decided(h: Harness) -> None:
    h.start_brokers(1)
    h.create("a")
    h.create("b")
    out = codes(h, grow("a", 2), grow("a", 3), grow("b", 2))
    assert out == {"a": ErrorCode.invalid_request, "b": ErrorCode.none}
    assert len(h.image().topic("a").partitions) == 1 and len(h.image().topic("b").partitions) == 2


def test_validate_only_writes_nothing(h: Harness) -> None:
    h.start_brokers(1)
    h.create("t")
    before = h.active().committed_offset
    assert codes(h, grow("t", 4), validate_only=True) == {"t": ErrorCode.none}
    assert codes(h, grow("t", 1), validate_only=True) == {"t": ErrorCode.invalid_partitions}
    assert len(h.image().topic("t").partitions) == 1 and h.active().committed_offset == before


@pytest.mark.parametrize("to", [2])
def test_answered_in_the_requests_version_and_not_controller_on_a_standby(to: int) -> None:
    h = Harness(controllers=2)
    h.start_brokers(1)
    h.create("t")
    resp = h.run(V0(topics=(grow("t", 2),), timeout=1000, validate_only=False))  # type: ignore[arg-type]
    assert type(resp).__version__ == 0 and resp.results[0].error_code == ErrorCode.none
    standby = h.run(V0(topics=(grow("t", 3),), timeout=1000, validate_only=False), to=to)  # type: ignore[arg-type]
    assert [r.error_code for r in standby.results] == [ErrorCode.not_controller]
