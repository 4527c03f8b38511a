"""AlterPartitionReassignments: immediate shrink, cancellation, validation; survives failover."""

from __future__ import annotations

from controller_harness import Harness
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest


def _reassign(h: Harness, topic: str, pid: int, replicas: tuple[int, ...] | None) -> ErrorCode:
    req = AlterPartitionReassignmentsRequest(
        timeout=0,
        topics=(
            ReassignableTopic(name=topic, partitions=(ReassignablePartition(partition_index=pid, replicas=replicas),)),
        ),
    )
    return h.run(req).responses[0].partitions[0].error_code


def test_subset_meeting_the_isr_completes_at_once(h: Harness) -> None:
    h.start_brokers(1, 2, 3)
    h.create("t", assignments={0: [1, 2, 3]})
    assert _reassign(h, "t", 0, (3, 2)) == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.replicas == (3, 2) and p.isr == (3, 2) and p.leader == 3 and not p.reassigning
    assert p.leader_epoch == 1


def test_cancel_restores_original_replicas(h3: Harness) -> None:
    h = h3
    h.start_brokers(1, 2, 3, 4)
    h.create("t", assignments={0: [1, 2]})
    assert _reassign(h, "t", 0, None) == ErrorCode.no_reassignment_in_progress
    assert _reassign(h, "t", 0, (3, 4)) == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.replicas == (3, 4, 1, 2) and p.adding == (3, 4) and p.removing == (1, 2) and p.leader == 1
    # reassignment state is hard state: a new controller lists it too
    h.elect(2)
    listed = h.run(ListPartitionReassignmentsRequest(timeout=0, topics=None)).topics
    assert listed[0].partitions[0].removing_replicas == (1, 2)
    assert _reassign(h, "t", 0, None) == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.replicas == (1, 2) and p.isr == (1, 2) and not p.reassigning and p.leader == 1


def test_validation(h: Harness) -> None:
    h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    assert _reassign(h, "t", 0, ()) == ErrorCode.invalid_replica_assignment
    assert _reassign(h, "t", 0, (1, 1)) == ErrorCode.invalid_replica_assignment
    assert _reassign(h, "t", 0, (1, 7)) == ErrorCode.invalid_replica_assignment
    assert _reassign(h, "t", 3, (1,)) == ErrorCode.unknown_topic_or_partition
    assert _reassign(h, "nope", 0, (1,)) == ErrorCode.unknown_topic_or_partition
    assert h.image().topic("t").partitions[0].replicas == (1, 2)


def test_deleting_a_topic_ends_its_reassignment(h: Harness) -> None:
    h.start_brokers(1, 2, 3)
    h.create("t", assignments={0: [1]})
    assert _reassign(h, "t", 0, (2, 3)) == ErrorCode.none
    assert h.delete("t").error_code == ErrorCode.none
    assert h.run(ListPartitionReassignmentsRequest(timeout=0, topics=None)).topics == ()
