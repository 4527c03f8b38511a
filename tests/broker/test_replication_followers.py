"""Replication between brokers' cores (node.broker.replication): follower fetchers carry the
leader's batches, acks=all completes once the ISR has them, a new leader's diverging epoch
truncates an old leader's unreplicated tail, and the leader asks for ISR shrinks and expansions
(AlterPartition) from followers' real lag. Brokers are wired in memory; time is explicit."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode
from replication_helpers import (
    Net,
    batch,
    fetch,
    image_with,
    manager,
    one_partition,
    produce,
    replies,
    values,
    with_brokers,
)

from kraftlab.node.broker.replication import AlterIsr, ClientReply
from kraftlab.node.metadata.image import PartitionInfo


def test_followers_replicate_and_acks_all_completes(tmp_path: Path) -> None:
    net = Net(tmp_path, min_isr=2)
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})
    net.m[1].handle("p", produce(batch("a", "b"), acks=-1), 0)
    net.m[1].handle("q", produce(batch("c"), acks=-1), 0)
    net.step(10)
    assert one_partition(net.replies["p"]).error_code == ErrorCode.none
    assert one_partition(net.replies["q"]).base_offset == 2
    assert values(net.m[2]) == values(net.m[3]) == values(net.m[1]) == [(0, 3, "a"), (1, 3, "b"), (2, 3, "c")]
    assert net.m[1].partitions[("t", 0)].log.high_watermark == 3
    net.step(600)  # the followers learn the HW when their parked fetch returns (max wait 500 ms)
    hws = [(f["hw"], f["isr"], f["min_insync_replicas"]) for i, e, f in net.events if i == 1 and e == "partition_hw"]
    assert hws[-1] == (3, [1, 2, 3], 2) and [h for h, _, _ in hws] == sorted({h for h, _, _ in hws})
    assert {i: m.partitions[("t", 0)].log.high_watermark for i, m in net.m.items()} == {1: 3, 2: 3, 3: 3}


def test_new_leader_truncates_the_old_leaders_unreplicated_tail(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})
    net.m[1].handle("p", produce(batch("a")), 0)
    net.step(10)
    net.down = {2, 3}  # the followers stop fetching; the leader appends alone
    net.m[1].handle("lost", produce(batch("x", "y")), 20)
    assert values(net.m[1])[-1] == (2, 3, "y") and values(net.m[2]) == [(0, 3, "a")]
    net.down = set()
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=2, leader_epoch=4)})
    net.m[2].handle("b", produce(batch("b")), 30)
    net.step(40)
    expected = [(0, 3, "a"), (1, 4, "b")]
    assert values(net.m[1]) == values(net.m[2]) == values(net.m[3]) == expected
    net.m[1].take_outputs()


def test_isr_shrinks_on_lag_and_expands_on_catch_up(tmp_path: Path) -> None:
    net = Net(tmp_path)
    for m in net.m.values():
        m.isr.max_lag_ms = 1000
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3, partition_epoch=7)})
    net.step(0)
    net.down = {3}
    net.m[1].handle("p", produce(batch("a")), 100)
    net.step(500)
    assert net.alters == []
    net.step(1200)
    (sender, request), = net.alters
    part = request.topics[0].partitions[0]
    assert sender == 1 and [b.broker_id for b in part.new_isr_with_epochs] == [1, 2]
    assert [b.broker_epoch for b in part.new_isr_with_epochs] == [11, 12] and part.partition_epoch == 7
    net.step(1300)
    assert len(net.alters) == 1  # one change in flight per partition
    net.image({0: PartitionInfo((1, 2, 3), (1, 2), leader=1, leader_epoch=3, partition_epoch=8)})
    net.down = set()
    net.step(1400)
    request = net.alters[-1][1]
    part = request.topics[0].partitions[0]
    assert [b.broker_id for b in part.new_isr_with_epochs] == [1, 2, 3] and part.partition_epoch == 8
    assert values(net.m[3]) == [(0, 3, "a")]


def test_follower_fetch_of_an_unknown_partition_is_refused(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("f", fetch(0, topic="nope", replica=2), 0)
    out = [o for o in m.take_outputs() if isinstance(o, ClientReply)]
    assert one_partition(out[0].response).error_code == ErrorCode.unknown_topic_or_partition


def test_hw_waits_for_a_replica_being_added_and_a_lost_answer_is_resent(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(with_brokers(image_with(partitions={
        0: PartitionInfo((1, 2, 3), (1, 2), leader=1, leader_epoch=2, partition_epoch=5)})), 0)  # fmt: skip
    m.handle("a", produce(batch("a")), 0)
    m.handle("f2", fetch(1, replica=2, epoch=2), 0)  # 2 has it: HW 1
    m.handle("f3", fetch(1, replica=3, epoch=2), 0)  # 3 caught up: it may join
    m.tick(10)
    alters = [o for o in m.take_outputs() if isinstance(o, AlterIsr)]
    assert [b.broker_id for b in alters[0].request.topics[0].partitions[0].new_isr_with_epochs] == [1, 2, 3]
    p = m.partitions[("t", 0)]
    assert p.pending_isr == (1, 2, 3) and p.log.high_watermark == 1
    m.handle("b", produce(batch("b")), 20)
    m.handle("f2", fetch(2, replica=2, epoch=2), 20)
    assert p.log.high_watermark == 1  # the replica being added does not have offset 1 yet
    m.isr.on_failure(alters[0].token, 30)  # no answer: perhaps committed; the same change again later
    m.tick(30 + m.isr.retry_backoff_ms)
    again = [o for o in m.take_outputs() if isinstance(o, AlterIsr)]
    assert len(again) == 1 and again[0].request == alters[0].request and p.pending_isr == (1, 2, 3)
    m.handle("f3", fetch(2, replica=3, epoch=2), 200)
    assert p.log.high_watermark == 2


def test_a_partition_followed_from_now_on_does_not_wait_for_the_parked_fetch(tmp_path: Path) -> None:
    net = Net(tmp_path, min_isr=2)
    old = PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)
    net.image({0: old})
    net.step(0)  # nothing to fetch: the followers' fetches are parked at the leader (500 ms)
    net.image({0: old, 1: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})
    net.m[1].handle("p", produce(batch("a"), acks=-1, partition=1), 10)
    net.step(10)  # not at 500, when the parked fetch would have returned
    assert one_partition(net.replies["p"]).error_code == ErrorCode.none
    assert [net.m[i].partitions[("t", 1)].log.log_end_offset for i in (1, 2, 3)] == [1, 1, 1]
    net.m[1].handle("q", produce(batch("b"), acks=-1, partition=0), 20)
    net.step(20)  # one fetch per follower again, naming both partitions
    assert one_partition(net.replies["q"]).error_code == ErrorCode.none


def test_an_answer_to_a_superseded_fetch_is_applied_once(tmp_path: Path) -> None:
    net = Net(tmp_path, min_isr=2)
    old = PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)
    net.image({0: old})
    net.step(0)
    net.image({0: old, 1: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})  # new fetches, not sent yet
    net.m[1].handle("p", produce(batch("a"), acks=-1), 5)  # answers the parked fetches with "a" at offset 0
    net.step(10)  # the new fetches (from offset 0) bring "a" a second time: already there, not appended
    assert values(net.m[1]) == values(net.m[2]) == values(net.m[3]) == [(0, 3, "a")]
    net.m[1].handle("q", produce(batch("b"), acks=-1), 20)
    net.step(20)  # no error, so no retry backoff: the next produce is replicated at once
    assert one_partition(net.replies["q"]).base_offset == 1
    assert values(net.m[2]) == values(net.m[3]) == [(0, 3, "a"), (1, 3, "b")]


def test_a_followers_newer_fetch_answers_its_parked_one(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(with_brokers(image_with(partitions={0: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=0)})), 0)
    m.handle("c1", fetch(0, min_bytes=1, max_wait_ms=500), 0)
    m.handle("f1", fetch(0, replica=2, epoch=0, min_bytes=1, max_wait_ms=500), 0)
    assert replies(m) == {}
    m.handle("c2", fetch(0, min_bytes=1, max_wait_ms=500), 10)
    assert replies(m) == {}  # a consumer's fetch supersedes nothing
    m.handle("f2", fetch(0, replica=2, epoch=0, min_bytes=1, max_wait_ms=500), 10)
    answered = replies(m)
    assert list(answered) == ["f1"] and one_partition(answered["f1"]).records == b""


def test_a_partition_its_leader_does_not_know_yet_holds_back_only_itself(tmp_path: Path) -> None:
    net = Net(tmp_path, min_isr=2)
    old = PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)
    net.image({0: old})
    net.step(0)
    new = PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)
    grown = with_brokers(image_with(partitions={0: old, 1: new}))
    for follower in (2, 3):  # the followers learn of partition 1 before its leader does
        net.m[follower].apply_image(grown, 10)
    net.step(10)  # the leader answers UNKNOWN_TOPIC_OR_PARTITION for it
    net.m[1].handle("q", produce(batch("b"), acks=-1, partition=0), 20)
    net.step(20)  # partition 0 goes on being replicated: no backoff of the whole leader
    assert one_partition(net.replies["q"]).error_code == ErrorCode.none
    net.m[1].apply_image(grown, 30)
    net.m[1].handle("p", produce(batch("a"), acks=-1, partition=1), 30)
    net.step(30)
    assert "p" not in net.replies  # partition 1 waits out its own backoff (retry.backoff.ms)
    net.step(10 + net.m[2].fetcher.retry_backoff_ms)
    assert one_partition(net.replies["p"]).error_code == ErrorCode.none
    assert [net.m[i].partitions[("t", 1)].log.log_end_offset for i in (1, 2, 3)] == [1, 1, 1]
