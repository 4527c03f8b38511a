"""CreateTopics/DeleteTopics, fencing's effect on ISRs and leaders, controlled shutdown, unregistration."""

from __future__ import annotations

import uuid

from controller_harness import Harness
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest

from kraftlab.node.metadata.records import decode


def _records_of_last_batch(h: Harness) -> list[str]:
    batch = [b for b in h.q.batches if not b.control][-1]
    return [type(decode(r.value)).__name__ for r in batch.records]


def test_create_topic_atomic_records_and_placement(h: Harness) -> None:
    h.start_brokers(1, 2, 3)
    r = h.create("t1", partitions=6, rf=3)
    assert r.error_code == ErrorCode.none and r.num_partitions == 6 and r.replication_factor == 3
    assert _records_of_last_batch(h) == ["TopicRecord"] + ["PartitionRecord"] * 6
    t = h.image().topic("t1")
    assert t.topic_id == r.topic_id
    leaders = [p.leader for p in t.partitions.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    for p in t.partitions.values():
        assert len(set(p.replicas)) == 3 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert p.leader_epoch == 0 and p.partition_epoch == 0


def test_create_topic_validation(h: Harness) -> None:
    h.start_brokers(1, 2)
    assert h.create("ok").error_code == ErrorCode.none
    assert h.create("ok").error_code == ErrorCode.topic_already_exists
    assert h.create("bad/name").error_code == ErrorCode.invalid_topic_exception
    assert h.create("..").error_code == ErrorCode.invalid_topic_exception
    assert h.create("x" * 250).error_code == ErrorCode.invalid_topic_exception
    assert h.create("big", rf=3).error_code == ErrorCode.invalid_replication_factor
    assert h.create("zero", partitions=0).error_code == ErrorCode.invalid_partitions
    # an absurd partition count is refused before anything is built (it once exhausted memory)
    assert h.create("huge", partitions=2**31 - 1).error_code == ErrorCode.policy_violation
    assert h.image().topic("huge") is None
    assert h.create("asg", assignments={0: [1, 1]}).error_code == ErrorCode.invalid_replica_assignment
    assert h.create("asg", assignments={0: [1, 9]}).error_code == ErrorCode.invalid_replica_assignment
    assert h.create("asg", assignments={1: [1]}).error_code == ErrorCode.invalid_replica_assignment
    # Kafka's validateManualPartitionAssignment: every partition as many replicas as the first
    assert h.create("asg", assignments={0: [2, 1], 1: [1]}).error_code == ErrorCode.invalid_replica_assignment
    assert h.image().topic("asg") is None
    r = h.create("asg", assignments={0: [2, 1], 1: [1, 2]})
    assert r.error_code == ErrorCode.none
    t = h.image().topic("asg")
    assert t.partitions[0].replicas == (2, 1) and t.partitions[0].leader == 2 and t.partitions[1].replicas == (1, 2)


def test_a_name_colliding_with_an_existing_one_is_refused(h: Harness) -> None:
    """Kafka: '.' and '_' collide (metric names); a new topic colliding with an existing topic that has
    one of them is INVALID_TOPIC_EXCEPTION — judged against the topics before the request."""
    h.start_brokers(1)
    assert h.create("a.b").error_code == ErrorCode.none
    assert h.create("a_b").error_code == ErrorCode.invalid_topic_exception
    assert h.create("a.b").error_code == ErrorCode.topic_already_exists
    assert h.create("ab").error_code == ErrorCode.none
    both = tuple(CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
                 for n in ("c.d", "c_d"))
    resp = h.run(CreateTopicsRequest(topics=both))
    assert [t.error_code for t in resp.topics] == [ErrorCode.none, ErrorCode.none]


def test_the_factor_is_judged_before_the_count(h: Harness) -> None:
    """ReplicationControlManager.createTopic refuses a factor of 0 or below -1 before looking at the count."""
    h.start_brokers(1, 2)
    for partitions, rf in ((0, 0), (-2, -3), (0, -2)):
        assert h.create("t", partitions=partitions, rf=rf).error_code == ErrorCode.invalid_replication_factor
    for partitions in (0, -2):
        assert h.create("t", partitions=partitions, rf=-1).error_code == ErrorCode.invalid_partitions


def test_duplicate_names_in_one_request_and_validate_only(h: Harness) -> None:
    h.start_brokers(1)
    topic = CreatableTopic(name="d", num_partitions=1, replication_factor=1, assignments=(), configs=())
    resp = h.run(CreateTopicsRequest(topics=(topic, topic)))
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_request] * 2
    resp = h.run(CreateTopicsRequest(topics=(topic,), validate_only=True))
    assert resp.topics[0].error_code == ErrorCode.none
    assert h.image().topic("d") is None


def test_fenced_brokers_excluded_from_placement(h: Harness) -> None:
    epochs = h.start_brokers(1, 2, 3)
    h.tick(5_000)
    h.heartbeat(1, epochs[1])
    h.heartbeat(2, epochs[2])
    h.tick(5_000)  # broker 3 silent for 10s
    assert h.image().brokers[3].fenced
    assert h.create("t", rf=3).error_code == ErrorCode.invalid_replication_factor
    assert h.create("t", partitions=4, rf=2).error_code == ErrorCode.none
    assert all(3 not in p.replicas for p in h.image().topic("t").partitions.values())


def test_delete_topic(h: Harness) -> None:
    h.start_brokers(1)
    h.create("t")
    assert h.delete("t").error_code == ErrorCode.none
    assert h.image().topic("t") is None
    assert _records_of_last_batch(h) == ["RemoveTopicRecord"]
    assert h.delete("t").error_code == ErrorCode.unknown_topic_or_partition
    assert h.create("t").error_code == ErrorCode.none


def test_delete_refuses_a_topic_asked_twice_and_entries_naming_both_or_neither(h: Harness) -> None:
    """ControllerApis.deleteTopics: duplicates are INVALID_REQUEST and not deleted (one record per
    topic at most), as are entries with both a name and an id, or neither."""
    h.start_brokers(1)
    h.create("t")
    h.create("u")
    tid = h.image().topic("t").topic_id
    asks = (DeleteTopicState(name="t", topic_id=None), DeleteTopicState(name="t", topic_id=None),
            DeleteTopicState(name=None, topic_id=tid), DeleteTopicState(name=None, topic_id=tid),
            DeleteTopicState(name="u", topic_id=h.image().topic("u").topic_id),
            DeleteTopicState(name=None, topic_id=None))
    resp = h.run(DeleteTopicsRequest(topics=asks, timeout=0))
    assert [r.error_code for r in resp.responses] == [ErrorCode.invalid_request] * 6
    assert h.image().topic("t") is not None and h.image().topic("u") is not None


def test_fencing_removes_from_every_isr_and_elects_from_remaining(h: Harness) -> None:
    epochs = h.start_brokers(1, 2, 3)
    h.create("t", partitions=6, rf=3)
    before = {pid: p for pid, p in h.image().topic("t").partitions.items()}
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.heartbeat(3, epochs[3])
    h.tick(5_000)
    img = h.image()
    assert img.brokers[1].fenced
    for pid, p in img.topic("t").partitions.items():
        assert 1 not in p.isr and p.leader != 1
        assert p.leader in p.isr and p.leader == next(r for r in p.replicas if r in p.isr)
        old = before[pid]
        assert p.partition_epoch == old.partition_epoch + 1
        assert p.leader_epoch == old.leader_epoch + (1 if old.leader == 1 else 0)
    # committed image identical on the (single) controller once committed
    assert h.active().committed_image == img


def test_never_unclean_last_isr_member_returns_when_unfenced(h: Harness) -> None:
    epochs = h.start_brokers(1, 2)
    h.create("solo", assignments={0: [1]})
    h.create("pair", assignments={0: [1, 2]})
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.tick(5_000)
    solo = h.image().topic("solo").partitions[0]
    assert solo.leader == -1 and solo.isr == () and solo.last_known_elr == (1,)
    # broker 2 is unfenced but is not a replica of `solo`: no unclean election anywhere
    h.heartbeat(2, epochs[2])
    assert h.image().topic("solo").partitions[0].leader == -1
    h.heartbeat(1, epochs[1])  # comes back: unfenced, and the last ISR member leads again
    solo = h.image().topic("solo").partitions[0]
    assert solo.leader == 1 and solo.isr == (1,) and solo.last_known_elr == ()
    pair = h.image().topic("pair").partitions[0]
    assert pair.leader == 2 and pair.isr == (2,)


def test_unclean_election_when_enabled() -> None:
    h = Harness(unclean_leader_election=True)
    epochs = h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    h.alter_isr(1, epochs[1], "t", 0, [1])
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.tick(5_000)
    p = h.image().topic("t").partitions[0]
    assert p.leader == 2 and p.isr == (2,)


def test_controlled_shutdown_moves_leaders_then_allows_shutdown(h: Harness) -> None:
    epochs = h.start_brokers(1, 2, 3)
    h.create("t", partitions=3, rf=2)
    assert any(p.leader == 1 for p in h.image().topic("t").partitions.values())
    r = h.heartbeat(1, epochs[1], want_shut_down=True)
    assert r.should_shut_down and not r.is_fenced
    b = h.image().brokers[1]
    assert b.in_controlled_shutdown
    for p in h.image().topic("t").partitions.values():
        assert p.leader != 1 and 1 not in p.isr
    assert {"broker": 1, "action": "shutdown", "reason": "controlled shutdown", "epoch": epochs[1]} in [
        {k: v for k, v in e.items() if k not in ("offset", "at_ms")} for e in h.evs("fence")]
    # a broker in controlled shutdown is not used for new topics
    assert h.create("u", partitions=3, rf=3).error_code == ErrorCode.invalid_replication_factor


def test_controlled_shutdown_of_last_isr_member_leaves_partition_offline_until_it_returns(h: Harness) -> None:
    epochs = h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    h.alter_isr(1, epochs[1], "t", 0, [1])  # broker 2 leaves the ISR: nobody can take over
    r = h.heartbeat(1, epochs[1], want_shut_down=True)
    assert r.should_shut_down
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.isr == () and p.last_known_elr == (1,)  # offline, not unclean
    # broker 2 (out of the ISR) never leads; broker 1 restarts as a new incarnation after its clean
    # stop (its clean-shutdown marker names its epoch) and leads again
    h.heartbeat(2, epochs[2])
    assert h.image().topic("t").partitions[0].leader == -1
    h.tick(9_001)
    h.heartbeat(2, epochs[2])
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4242), previous_broker_epoch=epochs[1]))
    assert resp.error_code == 0
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    p = h.image().topic("t").partitions[0]
    assert p.leader == 1 and p.isr == (1,)


def test_unregister_broker(h: Harness) -> None:
    h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    r = h.run(UnregisterBrokerRequest(broker_id=1))
    assert r.error_code == ErrorCode.none
    img = h.image()
    assert 1 not in img.brokers
    p = img.topic("t").partitions[0]
    assert p.isr == (2,) and p.leader == 2
    # a second unregister is refused, as Kafka refuses it (the registry model relies on that)
    assert h.run(UnregisterBrokerRequest(broker_id=1)).error_code == ErrorCode.broker_id_not_registered
    assert h.evs("decision")[-1]["error"] == "BROKER_ID_NOT_REGISTERED"
