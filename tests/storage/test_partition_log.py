"""Partition logs (node.storage.partition): appends as leader and follower, reads bounded by offset
and bytes, Kafka's files (indexes, leader-epoch-checkpoint, partition.metadata, offset
checkpoints), recovery of a torn or bit-flipped tail, truncation, retention, flush policy and
several log dirs."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.storage.batches import decode_batches, encode_batch, read_header
from kraftlab.node.storage.errors import CorruptStateFile
from kraftlab.node.storage.partition import (
    InvalidRecords,
    LogConfig,
    LogManager,
    OffsetOutOfRange,
    PartitionLog,
    RecordTooLarge,
)
from kraftlab.node.storage.partition.files import (
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    read_partition_metadata,
)

CFG = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def produced(n: int, ts: int = 1000, size: int = 100, tag: str = "v") -> bytes:
    """A producer's batch: base offset 0, epoch -1 (clients leave both for the leader)."""
    records = tuple(Record(f"k{i}".encode(), f"{tag}{i}".encode().ljust(size, b".")) for i in range(n))
    return encode_batch(Batch(0, -1, records, False, ts))


def values(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, epoch, value) of every record in a record set."""
    out = []
    for b in decode_batches(data):
        for i, r in enumerate(b.records):
            out.append((b.base_offset + i, b.epoch, bytes(r.value or b"")))
    return out


def read_all(log: PartitionLog, offset: int = 0) -> list[tuple[int, int, bytes]]:
    """Every record from `offset` on, reading segment after segment as a consumer would."""
    out: list[tuple[int, int, bytes]] = []
    while offset < log.log_end_offset:
        got = values(log.read(offset, 1 << 30))
        out += [v for v in got if v[0] >= offset]
        offset = got[-1][0] + 1
    return out


def open_log(tmp_path: Path, cfg: LogConfig = CFG, now: int = 0, **kw: object) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", "t", 0, cfg, now, **kw)  # type: ignore[arg-type]


def test_leader_assigns_offsets_and_epoch_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = log.append_as_leader(produced(3), 5, 10)
    b = log.append_as_leader(produced(2, tag="w"), 5, 11)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 4)
    assert a.log_append_time_ms == -1
    assert log.log_end_offset == 5
    got = values(log.read(0, 1 << 20))
    assert [(o, e) for o, e, _ in got] == [(i, 5) for i in range(5)]
    assert got[3][2].startswith(b"w0")
    # every batch read back passes the CRC check: offsets and epochs are outside the CRC
    assert all(read_header(log.read(o, 1 << 20), 0) for o in (0, 3))
    # a read from inside a batch returns the whole batch holding the offset
    assert values(log.read(4, 1 << 20))[0][0] == 3
    # the bound (the high-water mark for consumers) excludes a batch that crosses it
    assert [o for o, _, _ in values(log.read(0, 1 << 20, max_offset=4))] == [0, 1, 2]
    assert log.read(0, 1 << 20, max_offset=0) == b""
    assert log.read(5, 1 << 20) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 100)
    # max_bytes: whole batches only, but always the first one
    assert [o for o, _, _ in values(log.read(0, 10))] == [0, 1, 2]
    assert values(log.read(0, 10, min_one=False)) == []
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(-1, -1)
    log.close()


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path, CFG.with_(log_append_time=True))
    info = log.append_as_leader(produced(2, ts=1), 1, 777)
    assert info.log_append_time_ms == 777
    header = read_header(log.read(0, 1 << 20), 0)  # CRC recomputed: validates
    assert (header.timestamp_type, header.max_timestamp) == (1, 777)
    log.close()


def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, CFG.with_(max_message_bytes=500))
    log.append_as_leader(produced(1), 0, 0)
    flipped = bytearray(produced(1))
    flipped[-3] ^= 0x40
    for bad in (bytes(flipped), produced(1)[:-1], b"", b"\x00" * 5):
        with pytest.raises(InvalidRecords):
            log.append_as_leader(bad, 0, 0)
    with pytest.raises(RecordTooLarge):
        log.append_as_leader(produced(10), 0, 0)
    log.assign_epoch_start(3, log.log_end_offset)
    with pytest.raises(InvalidRecords):  # epochs never go back
        log.append_as_leader(produced(1), 2, 0)
    assert log.log_end_offset == 1
    assert values(log.read(0, 1 << 20)) == values(log.read(0, 1 << 20))[:1]


def test_follower_appends_leader_batches_verbatim(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l")
    follower = open_log(tmp_path / "f")
    for epoch in (1, 1, 2):
        leader.append_as_leader(produced(2), epoch, 0)
    data = leader.read(0, 1 << 20)
    follower.append_as_follower(data, 0)
    assert follower.read(0, 1 << 20) == data
    assert follower.epochs.entries() == leader.epochs.entries() == [(1, 0), (2, 4)]
    with pytest.raises(InvalidRecords):  # a gap
        follower.append_as_follower(leader.read(2, 1 << 20), 0)


def test_segments_roll_and_indexes_serve_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(60):
        log.append_as_leader(produced(2, ts=1000 + i), 0, i)
    assert len(log.segments) > 3
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names and "leader-epoch-checkpoint" in names
    assert all(len(s.index) > 0 for s in log.segments[:-1])
    for offset in range(0, 120, 7):
        assert values(log.read(offset, 1))[0][0] == offset - offset % 2
    assert log.offset_for_timestamp(1030) == (60, 1030, 0)
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(0) == (0, 1000, 0)
    assert log.max_timestamp() == (118, 1059, 0)
    # the index files hold Kafka's 8-byte entries (relative offset, position)
    seg = log.segments[0]
    raw = seg.index.path.read_bytes()
    assert len(raw) == 8 * len(seg.index)
    rel, pos = struct.unpack(">ii", raw[:8])
    assert values(seg.file.read(pos, 1 << 20))[0][0] <= rel


def test_recovery_truncates_torn_tail_and_rebuilds(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(30):
        log.append_as_leader(produced(2), 1 + i // 10, i)
    log.close()
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-7])  # a torn last batch
    (tmp_path / "t-0" / last.name.replace(".log", ".index")).write_bytes(b"\x00" * 64)  # preallocated zeros
    log = open_log(tmp_path)
    assert log.log_end_offset == 58
    assert log.recovery.damage is not None and log.recovery.damage.offset == 58
    # a read serves one segment, as Kafka's does: the last one now ends at 57
    assert [o for o, _, _ in values(log.read(log.segments[-1].base_offset, 1 << 20))][-1] == 57
    assert log.epochs.entries() == [(1, 0), (2, 20), (3, 40)]
    log.append_as_leader(produced(1), 3, 0)
    assert log.log_end_offset == 59
    log.close()


def test_recovery_drops_everything_after_a_bit_flip(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(40):
        log.append_as_leader(produced(2), 0, i)
    seg_count = len(log.segments)
    log.close()
    first = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[300] ^= 0x01
    first.write_bytes(bytes(data))
    log = open_log(tmp_path)
    assert len(log.segments) == 1 < seg_count
    assert log.log_end_offset < 10
    assert not list((tmp_path / "t-0").glob("*0000000000000[1-9]*.index"))
    log.close()


def test_leader_epoch_checkpoint_keeps_an_epoch_without_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(produced(2), 1, 0)
    log.assign_epoch_start(4, log.log_end_offset)  # became leader in epoch 4, nothing written yet
    log.close()
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert path.read_text() == "0\n2\n1 0\n4 2\n"
    log = open_log(tmp_path)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(2, 4)
    log.close()
    path.write_text("0\n3\n1 0\n")
    with pytest.raises(CorruptStateFile):
        open_log(tmp_path)


def test_truncation_by_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (1, 1, 2, 2, 3):
        log.append_as_leader(produced(3), epoch, 0)
    log.update_high_watermark(15)
    assert log.truncate_to(7) == 6  # whole batches: the one holding 7 starts at 6
    assert log.epochs.entries() == [(1, 0)]  # epoch 2 began in the batch that went
    assert log.high_watermark == 6
    assert read_leader_epoch_checkpoint(tmp_path / "t-0" / "leader-epoch-checkpoint") == [(1, 0)]
    assert log.truncate_to(6) == 6
    assert log.truncate_fully_and_start_at(100) == 100
    assert (log.log_start_offset, log.log_end_offset, log.epochs.entries()) == (100, 100, [])
    log.append_as_leader(produced(1), 9, 0)
    assert values(log.read(100, 1 << 20))[0][:2] == (100, 9)


def test_retention_by_size_and_time_never_passes_the_hw(tmp_path: Path) -> None:
    log = open_log(tmp_path, CFG.with_(retention_bytes=8192, retention_ms=-1))
    for i in range(100):
        log.append_as_leader(produced(2, ts=i), 0, i)
    assert log.delete_expired(0) == 0  # HW 0: nothing is deletable
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_expired(0) > 0
    assert log.size_bytes <= 8192 + CFG.segment_bytes
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    log.config = CFG.with_(retention_ms=10)
    log.delete_expired(10_000)  # every segment expired: the log keeps an empty active one
    assert log.log_start_offset == log.log_end_offset == 200 and len(log.segments) == 1
    assert log.read(200, 100) == b""


def test_flush_policy(tmp_path: Path) -> None:
    log = open_log(tmp_path, CFG.with_(flush_messages=5, flush_ms=1000))
    log.append_as_leader(produced(3), 0, 0)
    assert log.recovery_point == 0
    log.append_as_leader(produced(3), 0, 0)
    assert log.recovery_point == 6  # flush.messages reached
    log.append_as_leader(produced(1), 0, 0)
    assert not log.maybe_flush(999) and log.maybe_flush(1000)
    assert log.recovery_point == 7


def test_config_from_kafka_keys() -> None:
    cfg = LogConfig.resolve(
        {"log.segment.bytes": "2048", "log.retention.hours": "2", "log.flush.interval.messages": "1"},
        {"retention.ms": "5", "min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime"},
    )
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.flush_messages, cfg.min_insync_replicas) == (2048, 5, 1, 2)
    assert cfg.log_append_time
    assert LogConfig.resolve({"log.retention.hours": "2"}).retention_ms == 7_200_000
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig.resolve({"log.segment.bytes": "x"})
    with pytest.raises(ValueError, match=r"min\.insync\.replicas"):
        LogConfig.resolve({}, {"min.insync.replicas": "0"})


def test_manager_spreads_partitions_and_checkpoints(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    topic_id = uuid.uuid4()
    mgr = LogManager(dirs, lambda topic: CFG)
    mgr.startup(0)
    for p in range(4):
        log = mgr.get_or_create("orders", p, topic_id, 0)
        log.append_as_leader(produced(2), 0, 0)
        log.update_high_watermark(2)
    assert {mgr.dir_of("orders", p) for p in range(4)} == set(dirs)
    assert read_partition_metadata(dirs[0] / "orders-0" / "partition.metadata") == topic_id
    mgr.checkpoint()
    assert read_offset_checkpoint(dirs[1] / "replication-offset-checkpoint") == {("orders", 1): 2, ("orders", 3): 2}
    mgr.close()
    again = LogManager(dirs, lambda topic: CFG)
    again.startup(0)
    log1 = again.get("orders", 1)
    assert log1 is not None and log1.high_watermark == 2 and log1.log_end_offset == 2
    again.delete("orders", 1)
    assert not (dirs[1] / "orders-1").exists()
    (dirs[0] / "orders-3").mkdir()  # the same partition in two dirs
    again.close()
    with pytest.raises(ValueError, match="two log dirs"):
        LogManager(dirs, lambda topic: CFG).startup(0)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=25),
    st.integers(0, 10_000),
)
def test_any_torn_tail_recovers_to_a_prefix(
    tmp_path_factory: pytest.TempPathFactory, appends: list[tuple[int, int]], cut: int
) -> None:
    root = tmp_path_factory.mktemp("p")
    log = open_log(root)
    epoch = 0
    for count, bump in appends:
        epoch += bump
        log.append_as_leader(produced(count), epoch, 0)
    whole = read_all(log)
    log.close()
    files = sorted((root / "t-0").glob("*.log"))
    last = files[-1]
    data = last.read_bytes()
    last.write_bytes(data[: max(len(data) - cut, 0)])
    log = open_log(root)
    got = read_all(log)
    assert got == whole[: len(got)]
    assert log.log_end_offset == len(got)
    log.close()
