"""Active/standby: failover with lease renewal, revert of uncommitted state, held requests,
identical images at equal offsets, snapshots, preferred leader election."""

from __future__ import annotations

from controller_harness import Harness
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode

from kraftlab.node.controller.fake_quorum import LEADER_CHANGE_KEY
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import decode
from kraftlab.node.raft.ports import Record


def test_standbys_replay_identically(h3: Harness) -> None:
    h = h3
    e = h.start_brokers(1, 2, 3)
    h.create("a", partitions=3, rf=2)
    h.alter_isr(
        *next((p.leader, e[p.leader]) for p in [h.image().topic("a").partitions[0]]),
        "a",
        0,
        [h.image().topic("a").partitions[0].leader],
    )
    digests = {c.committed_image.digest() for c in h.ctrls.values()}
    offsets = {c.committed_offset for c in h.ctrls.values()}
    assert len(digests) == 1 and len(offsets) == 1
    assert h.ctrls[1].future_image == h.ctrls[2].committed_image


def test_failover_new_controller_renews_leases_instead_of_fencing(h3: Harness) -> None:
    h = h3
    e = h.start_brokers(1, 2)
    h.now += 8_000  # leases granted by controller 1 are almost over
    h.elect(2)
    assert not h.ctrls[1].active and h.ctrls[2].active
    h.tick(0)  # activation work: fresh leases at "now"
    h.tick(8_999)
    img = h.ctrls[2].future_image
    assert not img.brokers[1].fenced and not img.brokers[2].fenced
    h.heartbeat(1, e[1])
    h.tick(2)
    assert h.ctrls[2].future_image.brokers[2].fenced
    assert not h.ctrls[2].future_image.brokers[1].fenced
    # the old controller now refuses
    token = h.send(h.registration(3), to=1)
    assert h.replies[token].error_code == ErrorCode.not_controller


def test_uncommitted_state_reverted_and_held_requests_fail_on_leadership_loss(h3: Harness) -> None:
    h = h3
    h.start_brokers(1)
    committed_digest = h.ctrls[1].committed_image.digest()
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    req = CreateTopicsRequest(
        topics=(CreatableTopic(name="lost", num_partitions=1, replication_factor=1, assignments=(), configs=()),)
    )
    token = h.send(req)
    assert h.ctrls[1].future_image.topic("lost") is not None
    assert token not in h.replies
    h.elect(2)  # the uncommitted CreateTopics batch is truncated
    resp = h.replies[token]
    assert resp.topics[0].error_code == ErrorCode.not_controller
    assert not h.ctrls[1].active
    assert h.ctrls[1].future_image.topic("lost") is None
    assert h.ctrls[1].committed_image.digest() == committed_digest
    assert any(d["api"] == "CreateTopics" and d["error"] == "NOT_CONTROLLER" for d in h.evs("decision"))
    # the new controller never saw it; retrying there creates it once
    assert h.create("lost").error_code == ErrorCode.none
    assert h.create("lost").error_code == ErrorCode.topic_already_exists


def test_not_leader_on_append_renounces(h3: Harness) -> None:
    h = h3
    h.start_brokers(1)
    h.q.frozen = True
    assert h.create("x").error_code == ErrorCode.not_controller
    assert not h.ctrls[1].active
    assert h.ctrls[1].future_image.topic("x") is None


def test_uncommitted_writes_kept_by_new_leader_commit_on_standbys(h3: Harness) -> None:
    h = h3
    h.start_brokers(1)
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    req = CreateTopicsRequest(
        topics=(CreatableTopic(name="kept", num_partitions=1, replication_factor=1, assignments=(), configs=()),)
    )
    token = h.send(req)
    h.elect(2, keep_uncommitted=True)  # the new leader had replicated it: it commits in epoch 2
    assert h.replies[token].topics[0].error_code == ErrorCode.not_controller  # outcome unknown to the client
    assert all(c.committed_image.topic("kept") is not None for c in h.ctrls.values())
    assert h.create("kept").error_code == ErrorCode.topic_already_exists


def test_snapshot_round_trip_and_load(h3: Harness) -> None:
    h = h3
    h.start_brokers(1, 2, 3)
    for i in range(5):
        h.create(f"t{i}", partitions=2, rf=2)
    h.delete("t3")
    snap = h.ctrls[2].snapshot_records()
    assert snap is not None
    snap_id, records = snap
    assert snap_id.offset == h.ctrls[2].committed_offset
    assert h.ctrls[2].snapshot_records() is None  # nothing new since
    rebuilt = MetadataImage.from_records([decode(r.value) for r in records])
    assert rebuilt == h.ctrls[2].committed_image
    assert rebuilt.digest() == h.ctrls[1].committed_image.digest()
    # a fresh controller loading the snapshot then the rest of the log ends identical
    from kraftlab.node.controller.ports import ControllerConfig
    from kraftlab.node.controller.quorum_controller import QuorumController

    fresh = QuorumController(ControllerConfig(node_id=9, cluster_id="x"), h.q.writer(9))
    fresh.handle_load_snapshot(snap_id, records)
    h.create("after", partitions=1, rf=3)
    fresh.handle_commit([b for b in h.q.batches if b.base_offset >= snap_id.offset])
    assert fresh.committed_image.digest() == h.ctrls[1].committed_image.digest()
    assert fresh.committed_offset == h.ctrls[1].committed_offset


def test_snapshot_due_after_enough_bytes() -> None:
    h = Harness(snapshot_max_new_record_bytes=500)
    h.start_brokers(1)
    assert not h.active().snapshot_due()
    for i in range(10):
        h.create(f"t{i}")
    assert h.active().snapshot_due()
    h.active().snapshot_records()
    assert not h.active().snapshot_due()


def test_preferred_leader_election(h: Harness) -> None:
    e = h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    h.heartbeat(1, e[1], want_fence=True)  # fences 1: leadership to 2
    p = h.image().topic("t").partitions[0]
    assert p.leader == 2 and p.isr == (2,)
    req = ElectLeadersRequest(
        election_type=0, topic_partitions=(TopicPartitions(topic="t", partitions=(0,)),), timeout=0
    )
    r = h.run(req)
    assert r.replica_election_results[0].partition_result[0].error_code == ErrorCode.preferred_leader_not_available
    h.heartbeat(1, e[1])  # unfenced
    h.alter_isr(2, e[2], "t", 0, [2, 1])
    r = h.run(req)
    assert r.replica_election_results[0].partition_result[0].error_code == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.leader == 1 and p.leader_epoch == 2
    r = h.run(req)
    assert r.replica_election_results[0].partition_result[0].error_code == ErrorCode.election_not_needed
    r = h.run(ElectLeadersRequest(election_type=0, topic_partitions=None, timeout=0))
    assert r.replica_election_results == ()


class _ResignsWithinAppend:
    """A Raft leader whose append step takes the records into its linger buffer and, in the same
    step, finds its quorum lost and resigns: the records are dropped and the controller hears of
    the leader change before the append returns (what a leader resumed after a long pause does)."""

    def __init__(self, h: Harness, node: int) -> None:
        self.h, self.node = h, node

    def append(self, records: object, now_ms: int) -> int:
        q = self.h.q
        base = q.end_offset  # the offset the dropped records would have had
        self.h.ctrls[self.node].handle_leader_change(self.node, q.epoch, False)
        return base

    def next_offset(self) -> int:
        return self.h.q.end_offset


def test_write_whose_append_step_resigned_fails_and_never_completes(h3: Harness) -> None:
    h = h3
    h.start_brokers(1)
    lost_at = h.q.end_offset
    h.ctrls[1].log = _ResignsWithinAppend(h, 1)
    token = h.send(h.registration(2))
    assert h.replies[token].error_code == ErrorCode.not_controller
    assert h.ctrls[1].held_requests() == 0 and not h.ctrls[1].active
    # another leader's batch commits at the offset the lost records would have had
    h.elect(2)
    assert h.q.batches[-1].base_offset == lost_at
    h.commit()
    assert not any(d["api"] == "BrokerRegistration" and d["broker"] == 2 and d["error"] == "NONE"
                   for d in h.evs("decision"))
    assert 2 not in h.ctrls[1].committed_image.brokers
    assert h.register(2) > lost_at  # the retry at the new controller gets a committed epoch


def test_held_write_fails_when_another_epochs_batch_commits_at_its_offset(h3: Harness) -> None:
    h = h3
    h.start_brokers(1)

    class _DropsRecords:
        def append(self, records: object, now_ms: int) -> int:
            return h.q.end_offset  # accepted, then lost without a word

        def next_offset(self) -> int:
            return h.q.end_offset

    h.ctrls[1].log = _DropsRecords()
    token = h.send(h.registration(2))
    assert token not in h.replies and h.ctrls[1].held_requests() == 1
    h.q.epoch += 1  # a new leader's control batch takes the offset; nobody told controller 1
    h.q.append_batch((Record(LEADER_CHANGE_KEY, b""),), control=True)
    h.commit()
    assert h.replies[token].error_code == ErrorCode.not_controller
    assert any(d["api"] == "BrokerRegistration" and d["broker"] == 2 and d["error"] == "NOT_CONTROLLER"
               for d in h.evs("decision"))
