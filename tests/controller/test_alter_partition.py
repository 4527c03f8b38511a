"""AlterPartition: every check in Kafka's order, epochs bumped, reassignment completion."""

from __future__ import annotations

import uuid

import pytest
from controller_harness import Harness
from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kio.schema.errors import ErrorCode


@pytest.fixture
def cluster(h: Harness) -> tuple[Harness, dict[int, int]]:
    epochs = h.start_brokers(1, 2, 3)
    h.create("t", assignments={0: [1, 2, 3]})
    return h, epochs


def _code(resp) -> ErrorCode:
    assert resp.error_code == ErrorCode.none, resp
    return resp.topics[0].partitions[0].error_code


def test_shrink_and_expand_bump_partition_epoch_only(cluster) -> None:
    h, e = cluster
    r = h.alter_isr(1, e[1], "t", 0, [1, 2])
    part = r.topics[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.isr == (1, 2) and part.partition_epoch == 1
    assert part.leader_id == 1 and part.leader_epoch == 0
    r = h.alter_isr(1, e[1], "t", 0, [1, 2, 3], isr_epochs={3: e[3]})
    assert r.topics[0].partitions[0].isr == (1, 2, 3) and r.topics[0].partitions[0].partition_epoch == 2
    d = [x for x in h.evs("decision") if x["api"] == "AlterPartition"][-1]
    assert d["partition_epoch"] == 2 and d["isr"] == [1, 2, 3] and d["error"] == "NONE" and d["topic"] == "t"
    assert d["topic_id"] == str(h.image().topic("t").topic_id)  # a recreated "t" is another partition
    # decisions carry the log position they are in effect from: after the first alter's
    first = [x for x in h.evs("decision") if x["api"] == "AlterPartition"][-2]
    assert isinstance(d["offset"], int) and d["offset"] > first["offset"] > e[3]


def test_stale_sender_epoch_is_top_level(cluster) -> None:
    h, e = cluster
    r = h.alter_isr(1, e[1] - 1, "t", 0, [1])
    assert r.error_code == ErrorCode.stale_broker_epoch


def test_unknown_topic_and_partition(cluster) -> None:
    h, e = cluster
    pd = PartitionData(
        partition_index=0, leader_epoch=0, new_isr_with_epochs=(BrokerState(broker_id=1),), partition_epoch=0
    )
    r = h.run(
        AlterPartitionRequest(
            broker_id=1, broker_epoch=e[1], topics=(TopicData(topic_id=uuid.UUID(int=5), partitions=(pd,)),)
        )
    )
    assert _code(r) == ErrorCode.unknown_topic_id
    tid = h.image().topic("t").topic_id
    pd = PartitionData(
        partition_index=9, leader_epoch=0, new_isr_with_epochs=(BrokerState(broker_id=1),), partition_epoch=0
    )
    r = h.run(
        AlterPartitionRequest(broker_id=1, broker_epoch=e[1], topics=(TopicData(topic_id=tid, partitions=(pd,)),))
    )
    assert _code(r) == ErrorCode.unknown_topic_or_partition


def test_validation_order(cluster) -> None:
    h, e = cluster
    # epochs ahead of the controller's: NOT_CONTROLLER, even when other things are wrong too
    assert _code(h.alter_isr(2, e[2], "t", 0, [9], leader_epoch=1)) == ErrorCode.not_controller
    assert _code(h.alter_isr(2, e[2], "t", 0, [9], partition_epoch=1)) == ErrorCode.not_controller
    h.alter_isr(1, e[1], "t", 0, [1, 2])  # partition epoch 1
    # older leader epoch beats "sender not leader"
    h.heartbeat(1, e[1], want_shut_down=True)  # leadership moves to 2, leader epoch 1
    p = h.image().topic("t").partitions[0]
    assert p.leader == 2 and p.leader_epoch == 1
    assert _code(h.alter_isr(1, e[1], "t", 0, [9], leader_epoch=0)) == ErrorCode.fenced_leader_epoch
    # right epochs, wrong sender
    assert _code(h.alter_isr(3, e[3], "t", 0, [9])) == ErrorCode.invalid_request
    # right sender, older partition epoch
    pe = p.partition_epoch
    assert _code(h.alter_isr(2, e[2], "t", 0, [9], partition_epoch=pe - 1)) == ErrorCode.invalid_update_version
    # ISR not within replicas, duplicates, or missing the leader
    assert _code(h.alter_isr(2, e[2], "t", 0, [2, 9])) == ErrorCode.invalid_request
    assert _code(h.alter_isr(2, e[2], "t", 0, [2, 2])) == ErrorCode.invalid_request
    assert _code(h.alter_isr(2, e[2], "t", 0, [3])) == ErrorCode.invalid_request
    # ineligible: in controlled shutdown (1), wrong broker epoch (3)
    assert _code(h.alter_isr(2, e[2], "t", 0, [2, 1])) == ErrorCode.ineligible_replica
    assert _code(h.alter_isr(2, e[2], "t", 0, [2, 3], isr_epochs={3: e[3] + 1})) == ErrorCode.ineligible_replica
    assert _code(h.alter_isr(2, e[2], "t", 0, [2, 3], isr_epochs={3: e[3]})) == ErrorCode.none


def test_fenced_replica_ineligible(cluster) -> None:
    h, e = cluster
    h.alter_isr(1, e[1], "t", 0, [1, 2])
    h.tick(5_000)
    h.heartbeat(1, e[1])
    h.heartbeat(2, e[2])
    h.tick(5_000)
    assert h.image().brokers[3].fenced
    assert _code(h.alter_isr(1, e[1], "t", 0, [1, 2, 3])) == ErrorCode.ineligible_replica


def test_reassignment_completes_on_alter_partition(cluster) -> None:
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

    h, e = cluster
    e4 = h.start_brokers(4)[4]
    req = AlterPartitionReassignmentsRequest(
        timeout=0,
        topics=(
            ReassignableTopic(name="t", partitions=(ReassignablePartition(partition_index=0, replicas=(2, 3, 4)),)),
        ),
    )
    r = h.run(req)
    assert r.responses[0].partitions[0].error_code == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.replicas == (2, 3, 4, 1) and p.adding == (4,) and p.removing == (1,) and p.isr == (1, 2, 3)
    listed = h.run(ListPartitionReassignmentsRequest(timeout=0, topics=None))
    assert listed.topics[0].name == "t" and listed.topics[0].partitions[0].adding_replicas == (4,)
    # the leader (1) adds 4 to the ISR: the reassignment completes and 1 loses leadership
    r = h.alter_isr(1, e[1], "t", 0, [1, 2, 3, 4], isr_epochs={4: e4})
    assert _code(r) == ErrorCode.fenced_leader_epoch
    p = h.image().topic("t").partitions[0]
    assert p.replicas == (2, 3, 4) and p.isr == (2, 3, 4) and p.leader == 2 and not p.reassigning
    assert h.run(ListPartitionReassignmentsRequest(timeout=0, topics=None)).topics == ()
