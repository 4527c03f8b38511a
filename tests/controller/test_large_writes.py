"""Large writes: a fence touching more partitions than one batch holds spans several bounded
batches with the fence record last (no committed offset shows a fenced broker in an ISR), and is
spread over ticks so it never stalls the controller; CreateTopics stays one atomic batch."""

from __future__ import annotations

from controller_harness import Harness
from kio.schema.errors import ErrorCode

from kraftlab.node.controller.write import MAX_RECORDS_PER_BATCH, split_batches
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import FenceBrokerRecord, decode
from kraftlab.node.raft.ports import Record


def test_split_batches_bounds_count_and_bytes() -> None:
    records = [Record(None, bytes(10)) for _ in range(25)]
    chunks = split_batches(records, max_records=10, max_bytes=1_000)
    assert [len(c) for c in chunks] == [10, 10, 5]
    assert [r for c in chunks for r in c] == records
    chunks = split_batches(records, max_records=100, max_bytes=35)
    assert [len(c) for c in chunks] == [3] * 8 + [1]
    huge = [Record(None, bytes(100)), Record(None, bytes(1))]
    assert [len(c) for c in split_batches(huge, max_records=10, max_bytes=50)] == [1, 1]
    assert split_batches([]) == []


def test_fence_of_many_partitions_spans_bounded_batches_fence_last() -> None:
    h = Harness(session_timeout_ms=9_000, fence_changes_per_tick=100_000)  # the whole fence in one tick
    epochs = h.start_brokers(1, 2, 3)
    per_topic = 5_000
    topics = 3  # 15,000 partitions with broker 1 in every ISR: more than one batch of changes
    for t in range(topics):
        created = h.create(f"t{t}", assignments={p: [1, 2, 3] for p in range(per_topic)})
        assert created.error_code == ErrorCode.none
        last = [b for b in h.q.batches if not b.control][-1]
        assert len(last.records) == 1 + per_topic  # Topic + Partition records: one atomic batch
    first_new = len(h.q.batches)
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.heartbeat(3, epochs[3])
    h.tick(5_000)  # broker 1's lease expired: fenced
    assert h.image().brokers[1].fenced
    fence_batches = [b for b in h.q.batches[first_new:] if not b.control and len(b.records) > 2]  # not heartbeats'
    assert len(fence_batches) >= 2
    assert all(len(b.records) <= MAX_RECORDS_PER_BATCH for b in fence_batches)
    decoded = [[decode(r.value) for r in b.records] for b in fence_batches]
    assert isinstance(decoded[-1][-1], FenceBrokerRecord)
    assert sum(isinstance(r, FenceBrokerRecord) for rs in decoded for r in rs) == 1
    # replaying batch by batch: at no batch boundary is a fenced broker in an ISR or leading
    image = MetadataImage()
    for batch in h.q.batches:
        if batch.control:
            continue
        for r in batch.records:
            image.apply(decode(r.value))
        fenced = {b.id for b in image.brokers.values() if b.fenced}
        if batch in fence_batches:
            for _, _, p in image.partitions():
                assert not fenced & set(p.isr) and p.leader not in fenced
    assert image.partition_count() == topics * per_topic
    for _, _, p in image.partitions():
        assert 1 not in p.isr and p.leader in (2, 3)
    h.commit()
    assert h.active().committed_image == h.image()


def test_large_fence_spread_over_ticks_fences_after_the_last_change() -> None:
    h = Harness(session_timeout_ms=9_000, fence_changes_per_tick=1_000)
    epochs = h.start_brokers(1, 2, 3)
    h.create("t", assignments={p: [1, 2, 3] for p in range(3_500)})
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.heartbeat(3, epochs[3])
    ticks = 0
    h.tick(5_000)  # broker 1's lease expired
    while not h.image().brokers[1].fenced:
        ticks += 1
        assert h.active().next_deadline_ms() == 0  # half done: tick again at once
        in_isr = sum(1 in p.isr for _, _, p in h.image().partitions())
        assert in_isr == 3_500 - 1_000 * ticks
        h.commit()
        h.tick(0)
        assert ticks < 10
    assert ticks == 3
    assert not any(1 in p.isr or p.leader == 1 for _, _, p in h.image().partitions())
    assert [e["action"] for e in h.evs("fence") if e["broker"] == 1] == ["unfence", "fence"]  # one fence
    assert h.active().next_deadline_ms() != 0
