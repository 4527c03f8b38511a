"""AllocateProducerIds on the controller (Kafka's ProducerIdControlManager): blocks of 1000 ids,
ProducerIdsRecord in the log, the image and its snapshot, the broker epoch checked, and no block
granted twice across a failover."""

from __future__ import annotations

import pytest
from controller_harness import Harness
from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.controller.producer_ids import BLOCK_SIZE
from kraftlab.node.metadata.image import ImageError, MetadataImage
from kraftlab.node.metadata.records import ProducerIdsRecord, decode, encode, to_json


def allocate(h: Harness, broker: int, epoch: int, to: int | None = None) -> tuple[ErrorCode, int, int]:
    r = h.run(AllocateProducerIdsRequest(broker_id=broker, broker_epoch=epoch), to)
    return r.error_code, r.producer_id_start, r.producer_id_len


def test_blocks_follow_each_other_across_brokers(h: Harness) -> None:
    e = h.start_brokers(1, 2)
    assert allocate(h, 1, e[1]) == (ErrorCode.none, 0, BLOCK_SIZE)
    assert allocate(h, 2, e[2]) == (ErrorCode.none, BLOCK_SIZE, BLOCK_SIZE)
    assert allocate(h, 1, e[1]) == (ErrorCode.none, 2 * BLOCK_SIZE, BLOCK_SIZE)
    assert h.image().producer_ids == ProducerIdsRecord(broker_id=1, broker_epoch=e[1], next_producer_id=3000)
    assert [(d["broker"], d["producer_id_start"], d["error"]) for d in h.evs("decision")
            if d["api"] == "AllocateProducerIds"] == [(1, 0, "NONE"), (2, 1000, "NONE"), (1, 2000, "NONE")]


def test_stale_or_unknown_broker_epoch_refused_and_nothing_written(h: Harness) -> None:
    e = h.start_brokers(1)
    before = h.active().committed_offset
    assert allocate(h, 1, e[1] - 1) == (ErrorCode.stale_broker_epoch, -1, 0)
    assert allocate(h, 7, 0)[0] == ErrorCode.stale_broker_epoch
    assert h.active().committed_offset == before and h.image().producer_ids is None


def test_a_new_controller_continues_after_every_committed_block(h3: Harness) -> None:
    h = h3
    e = h.start_brokers(1)
    assert allocate(h, 1, e[1])[1] == 0
    h.elect(2)
    assert allocate(h, 1, e[1], to=2)[1] == BLOCK_SIZE
    # an uncommitted block is lost with its leader; its answer was never sent, so re-granting it is safe
    token = h.send(AllocateProducerIdsRequest(broker_id=1, broker_epoch=e[1]))
    h.elect(3)
    assert h.replies.pop(token).error_code == ErrorCode.not_controller
    assert allocate(h, 1, e[1], to=3)[1] == 2 * BLOCK_SIZE


def test_record_wire_form_snapshot_and_replay_order() -> None:
    r = ProducerIdsRecord(broker_id=3, broker_epoch=42, next_producer_id=5000)
    assert encode(r)[:3] == bytes([1, 15, 0])  # frame 1, Kafka's record type 15, version 0
    assert decode(encode(r)) == r
    assert to_json(r) == {"type": "PRODUCER_IDS_RECORD", "version": 0,
                          "data": {"brokerId": 3, "brokerEpoch": 42, "nextProducerId": 5000}}
    image = MetadataImage()
    image.apply(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000))
    image.apply(r)
    rebuilt = MetadataImage.from_records(image.to_records())
    assert rebuilt == image and rebuilt.next_producer_id == 5000
    assert image.semantic_form()["producer_ids"] == {"next_producer_id": 5000}
    assert "producer_ids" not in MetadataImage().semantic_form()  # digests of images without blocks unchanged
    with pytest.raises(ImageError, match="granted twice"):
        image.apply(ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=5000))
