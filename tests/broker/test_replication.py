"""The partition replication core (node.broker.replication): roles from the image, Produce with
acks 0/1/all and min.insync.replicas, Fetch for consumers and followers (HW from the ISR,
diverging epochs, min.bytes parking), ListOffsets, OffsetForLeaderEpoch and Kafka's error codes."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode
from replication_helpers import (
    TOPIC_ID,
    batch,
    decoded,
    fetch,
    image_with,
    list_offsets,
    manager,
    offsets_for_epoch,
    one_partition,
    produce,
    replies,
)

from kraftlab.node.broker.replication import ClientReply
from kraftlab.node.metadata.image import PartitionInfo
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.batches import encode_batch

RF3 = {0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=4)}


def test_single_replica_leader_round_trip(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("p1", produce(batch("a", "b")), 0)
    m.handle("p2", produce(batch("c")), 0)
    got = replies(m)
    assert [one_partition(got[t]).base_offset for t in ("p1", "p2")] == [0, 2]
    assert all(one_partition(r).error_code == ErrorCode.none for r in got.values())
    m.handle("f", fetch(1), 0)
    part = one_partition(replies(m)["f"])
    assert part.error_code == ErrorCode.none and part.high_watermark == 3 and part.last_stable_offset == 3
    assert decoded(part.records) == [(0, 0, "a"), (1, 0, "b"), (2, 0, "c")]  # whole batches, epoch 0


def test_acks_zero_gets_no_answer_but_is_written(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("p", produce(batch("x"), acks=0), 0)
    assert replies(m) == {"p": None}
    m.handle("f", fetch(0), 0)
    assert decoded(one_partition(replies(m)["f"]).records) == [(0, 0, "x")]


def test_errors_with_kafkas_codes(tmp_path: Path) -> None:
    image = image_with(partitions={0: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=3),
                                   1: PartitionInfo((1, 2), (1, 2), leader=2, leader_epoch=5),
                                   2: PartitionInfo((2, 3), (2, 3), leader=2, leader_epoch=1)})  # fmt: skip
    m = manager(tmp_path)
    m.apply_image(image, 0)
    cases = {
        "unknown topic": (produce(batch("a"), topic="nope"), ErrorCode.unknown_topic_or_partition),
        "unknown partition": (fetch(0, partition=9), ErrorCode.unknown_topic_or_partition),
        "follower": (produce(batch("a"), partition=1), ErrorCode.not_leader_or_follower),
        "not a replica": (fetch(0, partition=2), ErrorCode.not_leader_or_follower),
        "old epoch": (fetch(0, epoch=2), ErrorCode.fenced_leader_epoch),
        "new epoch": (fetch(0, epoch=4), ErrorCode.unknown_leader_epoch),
        "past the end": (fetch(1), ErrorCode.offset_out_of_range),
        "bad acks": (produce(batch("a"), acks=2), ErrorCode.invalid_required_acks),
        "corrupt": (produce(batch("a")[:-1] + b"\x01"), ErrorCode.corrupt_message),
        "list on follower": (list_offsets(-1, partition=1), ErrorCode.not_leader_or_follower),
        "list old epoch": (list_offsets(-1, epoch=1), ErrorCode.fenced_leader_epoch),
    }
    for name, (request, _) in cases.items():
        m.handle(name, request, 0)
    got = replies(m)
    assert {n: one_partition(got[n]).error_code for n in cases} == {n: code for n, (_, code) in cases.items()}
    m.handle("f", fetch(0, partition=1), 0)  # a follower's answer names the leader it knows
    current = one_partition(replies(m)["f"]).current_leader
    assert (current.leader_id, current.leader_epoch) == (2, 5)


def test_acks_all_waits_for_the_isr_and_consumers_see_only_below_the_hw(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(partitions=RF3), 0)
    m.handle("p", produce(batch("a", "b"), acks=-1), 10)
    assert replies(m) == {}
    m.handle("c", fetch(0), 10)
    consumer = one_partition(replies(m)["c"])
    assert consumer.high_watermark == 0 and decoded(consumer.records) == []
    m.handle("f2", fetch(2, replica=2, epoch=4), 20)  # follower 2 has both records
    follower = one_partition(replies(m)["f2"])
    assert follower.high_watermark == 0 and replies(m) == {}  # follower 3 has nothing yet
    m.handle("f3", fetch(0, replica=3, epoch=4), 30)
    f3 = one_partition(replies(m)["f3"])
    assert decoded(f3.records) == [(0, 4, "a"), (1, 4, "b")]  # followers read past the HW
    m.handle("f3", fetch(2, replica=3, epoch=4), 40)
    got = replies(m)
    assert one_partition(got["p"]).error_code == ErrorCode.none and one_partition(got["p"]).base_offset == 0
    assert one_partition(got["f3"]).high_watermark == 2
    m.handle("c", fetch(0), 50)
    assert [v for _, _, v in decoded(one_partition(replies(m)["c"]).records)] == ["a", "b"]


def test_min_insync_replicas(tmp_path: Path) -> None:
    shrunk = {0: PartitionInfo((1, 2, 3), (1,), leader=1, leader_epoch=4)}
    m = manager(tmp_path, min_isr=2)
    m.apply_image(image_with(partitions=shrunk), 0)
    m.handle("all", produce(batch("a"), acks=-1), 0)
    m.handle("one", produce(batch("b"), acks=1), 0)
    got = replies(m)
    assert one_partition(got["all"]).error_code == ErrorCode.not_enough_replicas
    assert one_partition(got["one"]).error_code == ErrorCode.none and one_partition(got["one"]).base_offset == 0


def test_acks_all_after_append_shrink_and_timeout(tmp_path: Path) -> None:
    m = manager(tmp_path, min_isr=2)
    m.apply_image(image_with(partitions=RF3), 0)
    m.handle("p", produce(batch("a"), acks=-1, timeout_ms=100), 0)
    m.handle("q", produce(batch("b"), acks=-1, timeout_ms=1000), 0)
    m.tick(99)
    assert replies(m) == {}
    m.tick(100)
    assert one_partition(replies(m)["p"]).error_code == ErrorCode.request_timed_out
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2, 3), (1,), leader=1, leader_epoch=4)}), 200)
    assert one_partition(replies(m)["q"]).error_code == ErrorCode.not_enough_replicas_after_append


def test_acks_all_acknowledgement_is_journalled_with_its_hw_and_isr(tmp_path: Path) -> None:
    m = manager(tmp_path, min_isr=2)
    m.apply_image(image_with(partitions=RF3), 0)
    m.handle("p", produce(batch("a", "b"), acks=-1), 0)
    m.handle("q", produce(batch("c"), acks=-1), 0)
    m.handle("f2", fetch(2, replica=2, epoch=4), 10)
    m.handle("f3", fetch(2, replica=3, epoch=4), 10)  # the HW passes p's batch, not q's
    acks = [o.fields for o in m.take_outputs() if isinstance(o, JournalEvent) and o.ev == "partition_ack"]
    assert acks == [{"topic": "t", "partition": 0, "first": 0, "last": 1, "leader_epoch": 4, "hw": 2,
                     "isr": [1, 2, 3], "min_insync_replicas": 2, "topic_id": str(TOPIC_ID)}]
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2, 3), (1,), leader=1, leader_epoch=4)}), 20)
    outputs = m.take_outputs()  # q's HW is reached with an ISR below min.insync: refused, not acknowledged
    assert [o.ev for o in outputs if isinstance(o, JournalEvent) and o.ev == "partition_ack"] == []
    answer = [o.response for o in outputs if isinstance(o, ClientReply) and o.token == "q"]
    assert one_partition(answer[0]).error_code == ErrorCode.not_enough_replicas_after_append


def test_leadership_lost_answers_parked_produces(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(partitions=RF3), 0)
    m.handle("p", produce(batch("a"), acks=-1), 0)
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2, 3), (2, 3), leader=2, leader_epoch=5)}), 10)
    outputs = m.take_outputs()
    answer = [o.response for o in outputs if isinstance(o, ClientReply) and o.token == "p"]
    assert one_partition(answer[0]).error_code == ErrorCode.not_leader_or_follower
    roles = [(o.fields["role"], o.fields["leader"], o.fields["leader_epoch"], o.fields["log_end_offset"],
              o.fields["topic_id"]) for o in outputs if isinstance(o, JournalEvent) and o.ev == "partition_role"]
    assert roles == [("leader", 1, 4, 0, str(TOPIC_ID)), ("follower", 2, 5, 1, str(TOPIC_ID))]
    hws = [o.fields for o in outputs if isinstance(o, JournalEvent) and o.ev == "partition_hw"]
    assert hws == []  # acks=all waits on followers that never fetched: the HW stayed at 0
    assert m.partitions[("t", 0)].role.value == "follower" and m.partitions[("t", 0)].leader == 2


def test_fetch_waits_for_min_bytes_until_max_wait(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("wait", fetch(0, min_bytes=1, max_wait_ms=500), 0)
    m.handle("idle", fetch(0, min_bytes=1, max_wait_ms=500), 0)
    assert replies(m) == {} and m.next_deadline_ms() == 500
    m.handle("p", produce(batch("a")), 100)
    got = replies(m)
    assert decoded(one_partition(got["wait"]).records) == [(0, 0, "a")]
    assert decoded(one_partition(got["idle"]).records) == [(0, 0, "a")]
    m.handle("late", fetch(1, min_bytes=1, max_wait_ms=500), 200)
    m.tick(699)
    assert replies(m) == {}
    m.tick(700)
    assert decoded(one_partition(replies(m)["late"]).records) == []


def test_list_offsets_earliest_latest_and_by_time(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(partitions={0: PartitionInfo((1,), (1,), leader=1, leader_epoch=2)}), 0)
    m.handle("a", produce(batch("a", ts=1000)), 0)
    m.handle("b", produce(batch("b", "c", ts=2000)), 0)
    replies(m)
    for token, ts in (("earliest", -2), ("latest", -1), ("t1500", 1500), ("t9999", 9999), ("max", -3)):
        m.handle(token, list_offsets(ts), 0)
    got = {t: one_partition(r) for t, r in replies(m).items()}
    assert (got["earliest"].offset, got["latest"].offset, got["latest"].leader_epoch) == (0, 3, 2)
    assert (got["t1500"].offset, got["t1500"].timestamp) == (1, 2000)
    assert got["t9999"].offset == -1
    assert got["max"].timestamp == 2000 and got["max"].offset == 1


def test_offset_for_leader_epoch_and_diverging_follower(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=2)}), 0)
    m.handle("a", produce(batch("a", "b")), 0)
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=5)}), 0)
    m.handle("b", produce(batch("c")), 0)
    replies(m)
    for token, epoch in (("e1", 1), ("e2", 2), ("e3", 3), ("e5", 5)):
        m.handle(token, offsets_for_epoch(epoch), 0)
    got = {t: one_partition(r) for t, r in replies(m).items()}
    assert {t: (p.leader_epoch, p.end_offset) for t, p in got.items()} == {
        "e1": (-1, -1), "e2": (2, 2), "e3": (2, 2), "e5": (5, 3)}
    # a follower that has offsets 0..3 of epoch 3 (written by some other leader) diverges at 2
    m.handle("f", fetch(4, replica=2, epoch=5, last_fetched_epoch=3), 0)
    part = one_partition(replies(m)["f"])
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (2, 2)
    assert decoded(part.records) == []
    assert m.partitions[("t", 0)].followers[2].log_end_offset == -1  # a diverging fetch says nothing


def test_deleted_topic_drops_its_log(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("p", produce(batch("a")), 0)
    log_dir = tmp_path / "logs-1" / "t-0"
    assert log_dir.is_dir()
    m.apply_image(image_with(name="other"), 0)
    assert not log_dir.exists() and ("t", 0) not in m.partitions


def test_a_new_leader_answers_offset_not_available_until_its_hw_reaches_its_epoch(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2), (2,), leader=2, leader_epoch=1)}), 0)
    m.partitions[("t", 0)].log.append_as_follower(_leader_batch(), 0)  # offsets 0-1 of epoch 1, HW still 0
    m.apply_image(image_with(partitions={0: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=2)}), 0)
    m.handle("latest", list_offsets(-1), 0)
    m.handle("earliest", list_offsets(-2), 0)
    got = {t: one_partition(r) for t, r in replies(m).items()}
    assert got["latest"].error_code == ErrorCode.offset_not_available
    assert got["earliest"].error_code == ErrorCode.none and got["earliest"].offset == 0
    m.handle("f", fetch(2, replica=2, epoch=2), 0)  # the follower has everything: HW 2
    m.handle("latest", list_offsets(-1), 0)
    assert one_partition(replies(m)["latest"]).offset == 2


def _leader_batch() -> bytes:
    return encode_batch(Batch(0, 1, (Record(None, b"a"), Record(None, b"b")), False, 1000))


def test_max_wait_and_timeout_are_read_to_the_millisecond(tmp_path: Path) -> None:
    """8200487 ms read as float seconds times 1000 was 8200486: a fetch answered a millisecond early."""
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("wait", fetch(0, min_bytes=1, max_wait_ms=8_200_487), 0)
    assert m.next_deadline_ms() == 8_200_487
    m.tick(8_200_486)
    assert replies(m) == {}
    m.tick(8_200_487)
    assert "wait" in replies(m)
