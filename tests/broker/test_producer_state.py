"""Idempotent producers on a partition (node.broker.replication.producer_state, through the
replication core): a retried batch is answered with its first offsets and not appended again;
a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older producer epoch INVALID_PRODUCER_EPOCH; a
new epoch or an unknown producer must start at sequence 0; a follower that becomes leader and a
restarted broker deduplicate from the batches of their log."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
from kio.schema.errors import ErrorCode
from replication_helpers import Net, batch, image_with, manager, one_partition, produce, replies, values

from kraftlab.node.broker.replication.producer_state import MAX_SEQUENCE, follows
from kraftlab.node.metadata.image import PartitionInfo

PID_AT = 43  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2, last delta 4, timestamps 16


def idempotent(records: bytes, pid: int, epoch: int, seq: int) -> bytes:
    """A batch of `records` as an idempotent producer sends it (producer id, epoch, base sequence)."""
    data = bytearray(records)
    struct.pack_into(">qhi", data, PID_AT, pid, epoch, seq)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_a_retried_batch_gets_its_offsets_of_then_and_is_not_appended_again(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    first = idempotent(batch("a", "b"), pid=7, epoch=0, seq=0)
    m.handle("p", produce(first), 0)
    m.handle("other", produce(batch("x")), 0)  # no producer id: never checked
    m.handle("retry", produce(first), 0)
    m.handle("next", produce(idempotent(batch("c"), 7, 0, 2)), 0)
    got = {t: one_partition(r) for t, r in replies(m).items()}
    assert [(got[t].error_code, got[t].base_offset) for t in ("p", "other", "retry", "next")] == [
        (ErrorCode.none, 0), (ErrorCode.none, 2), (ErrorCode.none, 0), (ErrorCode.none, 3)]
    assert [v for _, _, v in values(m)] == ["a", "b", "x", "c"]


def test_sequence_and_epoch_errors(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.apply_image(image_with(), 0)
    m.handle("p", produce(idempotent(batch("a"), 7, 3, 0)), 0)
    cases = {
        "gap": (idempotent(batch("b"), 7, 3, 5), ErrorCode.out_of_order_sequence_number),
        "old epoch": (idempotent(batch("b"), 7, 2, 1), ErrorCode.invalid_producer_epoch),
        "new epoch not at 0": (idempotent(batch("b"), 7, 4, 1), ErrorCode.out_of_order_sequence_number),
        "unknown producer not at 0": (idempotent(batch("b"), 8, 0, 4), ErrorCode.unknown_producer_id),
    }
    for name, (records, _) in cases.items():
        m.handle(name, produce(records), 0)
    m.handle("new epoch", produce(idempotent(batch("c"), 7, 4, 0)), 0)
    got = {t: one_partition(r).error_code for t, r in replies(m).items()}
    assert {n: got[n] for n in cases} == {n: code for n, (_, code) in cases.items()}
    assert got["p"] == got["new epoch"] == ErrorCode.none
    assert [v for _, _, v in values(m)] == ["a", "c"]
    assert follows(MAX_SEQUENCE, 0) and follows(4, 5) and not follows(4, 6)


def test_a_new_leader_and_a_restarted_broker_deduplicate_from_their_log(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})
    first = idempotent(batch("a"), 9, 0, 0)
    net.m[1].handle("p", produce(first, acks=-1), 0)
    net.step(10)
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=2, leader_epoch=4)})
    net.m[2].handle("retry", produce(first, acks=-1), 20)  # the answer was lost: the client retries on 2
    net.step(30)
    assert one_partition(net.replies["retry"]).base_offset == 0 and [v for _, _, v in values(net.m[2])] == ["a"]
    again = manager(tmp_path, 2)  # broker 2 restarted over the same log directory
    again.apply_image(image_with(partitions={0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=2, leader_epoch=5)}), 40)
    again.handle("gap", produce(idempotent(batch("b"), 9, 0, 2)), 40)
    again.handle("retry", produce(first), 40)
    got = {t: one_partition(r) for t, r in replies(again).items()}
    assert got["gap"].error_code == ErrorCode.out_of_order_sequence_number and got["retry"].base_offset == 0
