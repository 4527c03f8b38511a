"""The in-memory storage ports: Kafka log semantics and crash loss of what was not flushed."""

from __future__ import annotations

import pytest

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, QuorumStateData, Record
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


def batch(base: int, epoch: int, n: int = 2) -> Batch:
    return Batch(base, epoch, tuple(Record(None, b"%d" % (base + i)) for i in range(n)))


def test_log_offsets_epochs_and_reads() -> None:
    log = MemoryLog()
    log.append([batch(0, 1), batch(2, 1), batch(4, 3)])
    assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (0, 6, 3)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(6, 3)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert [b.base_offset for b in log.read(2, 10_000)] == [2, 4]
    assert log.read(6, 100) == []
    with pytest.raises(ValueError):
        log.read(3, 100)
    with pytest.raises(ValueError):
        log.append([batch(7, 3)])


def test_crash_loses_what_was_not_flushed() -> None:
    log = MemoryLog()
    log.append([batch(0, 1)])
    log.flush()
    log.append([batch(2, 1)])
    assert log.flushed_end_offset() == 2
    log.crash()
    assert log.end_offset() == 2


def test_truncate_inside_a_batch_and_flushed_end_follows() -> None:
    log = MemoryLog()
    log.append([batch(0, 1, 4)])
    log.flush()
    log.truncate_to(3)
    assert log.end_offset() == 3 and log.flushed_end_offset() == 3
    assert log.read(0, 100)[0].records == tuple(Record(None, b"%d" % i) for i in range(3))


def test_snapshot_start_and_epoch_fallback() -> None:
    log = MemoryLog()
    log.append([batch(0, 1), batch(2, 2), batch(4, 2)])
    log.delete_before(4)
    assert (log.start_offset(), log.end_offset()) == (4, 6)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 2)  # older than the start: the start and its epoch
    log.reset_to_snapshot(OffsetAndEpoch(10, 5))
    assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (10, 10, 5)
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(10, 5)


def test_quorum_state_is_durable_until_wiped() -> None:
    store = MemoryQuorumStateStore()
    assert store.read() is None
    store.write(QuorumStateData(3, None, 2, (1, 2, 3)))
    assert store.read() == QuorumStateData(3, None, 2, (1, 2, 3))
    store.wipe()
    assert store.read() is None


def test_snapshot_store_chunks_freeze_and_crash() -> None:
    src, dst = MemorySnapshotStore(), MemorySnapshotStore()
    sid = OffsetAndEpoch(10, 2)
    records = [Record(b"k", b"v" * 40), Record(None, None)]
    src.write(sid, records, 0)
    size = src.size(sid)
    for pos in range(0, size, 7):
        dst.write_bytes(sid, pos, src.read_bytes(sid, pos, 7))
    dst.freeze(sid)
    assert dst.read_records(sid) == records and dst.latest() == sid
    dst.write_bytes(OffsetAndEpoch(20, 2), 0, b"partial")
    dst.crash()
    with pytest.raises(ValueError):
        dst.freeze(OffsetAndEpoch(20, 2))  # the partial chunk did not survive


def test_corrupt_fetched_snapshot_is_refused() -> None:
    src, dst = MemorySnapshotStore(), MemorySnapshotStore()
    sid = OffsetAndEpoch(4, 1)
    src.write(sid, [Record(b"k", b"value")], 0)
    data = bytearray(src.read_bytes(sid, 0, 1000))
    data[-1] ^= 0x40
    dst.write_bytes(sid, 0, bytes(data))
    with pytest.raises(ValueError):
        dst.freeze(sid)
    assert dst.latest() is None
