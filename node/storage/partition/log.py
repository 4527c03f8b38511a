"""PartitionLog: one partition's log on disk, as Kafka's UnifiedLog keeps it.

Appends take clients' record batches as bytes: each is validated (size, magic 2, CRC32C, counts;
`max.message.bytes`), then a leader assigns offsets and its leader epoch by rewriting the base
offset and partition leader epoch fields in place (neither is covered by the CRC; LogAppendTime
topics also get the batch's max timestamp and timestamp type set, and their CRC recomputed). A
follower appends the leader's batches as they are. Reads return whole batches as bytes, up to a
bound (the high-water mark for consumers). On open every segment is scanned: the first torn,
CRC-bad or discontinuous batch ends the log (the rest is truncated and reported), the indexes
are rebuilt where they disagree. Leader epochs live in `leader-epoch-checkpoint` (rewritten
atomically on every change). Retention deletes whole segments below the high-water mark by time
(`retention.ms`, on the segment's largest timestamp) and size (`retention.bytes`); the flush
policy fsyncs after `flush.messages` messages or `flush.ms` milliseconds.
"""

from __future__ import annotations

import logging
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.storage.atomic import fsync_dir, make_dirs_durably
from kraftlab.node.storage.batches import BatchHeader, read_header, record_timestamps
from kraftlab.node.storage.epoch_cache import EpochCache
from kraftlab.node.storage.errors import CorruptBatch
from kraftlab.node.storage.partition.config import LogConfig
from kraftlab.node.storage.partition.files import (
    read_leader_epoch_checkpoint,
    read_partition_metadata,
    write_leader_epoch_checkpoint,
    write_partition_metadata,
)
from kraftlab.node.storage.partition.layout import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    index_path,
    log_path,
    segment_bases,
    time_index_path,
)
from kraftlab.node.storage.partition.segment import LogSegment
from kraftlab.node.storage.recovery import Damage, scan_segments

log = logging.getLogger(__name__)

UNDEFINED = OffsetAndEpoch(-1, -1)  # Kafka's UNDEFINED_EPOCH_OFFSET / UNDEFINED_EPOCH
_MAX_RELATIVE = (1 << 31) - 1
_LOG_APPEND_TIME_FLAG = 0x08
_ATTRIBUTES_AT = 21  # attributes field offset inside a batch
_MAX_TS_AT = 35
_CRC_AT = 17


class InvalidRecords(ValueError):
    """A produced record set is not valid (Kafka's CORRUPT_MESSAGE / INVALID_RECORD)."""


class RecordTooLarge(ValueError):
    """A batch exceeds `max.message.bytes` (Kafka's MESSAGE_TOO_LARGE)."""


class OffsetOutOfRange(ValueError):
    """A read below the log start or past the log end (Kafka's OFFSET_OUT_OF_RANGE)."""


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    record_count: int
    batches: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class LogRecovery:
    """What opening the log found: its bounds and the damage truncated away (None if none)."""

    start_offset: int
    end_offset: int
    segments: int
    damage: Damage | None = None


@dataclass
class _Validated:
    data: bytearray
    headers: list[BatchHeader] = field(default_factory=list)


def validate(records: bytes, max_message_bytes: int) -> _Validated:
    """Every batch of a produced record set, CRC-checked; raises InvalidRecords / RecordTooLarge."""
    out = _Validated(bytearray(records))
    pos = 0
    while pos < len(records):
        try:
            header = read_header(records, pos, compressed_ok=True)
        except CorruptBatch as e:
            raise InvalidRecords(e.reason) from None
        if header.size > max_message_bytes:
            raise RecordTooLarge(f"batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}")
        out.headers.append(header)
        pos = header.end_position
    if not out.headers:
        raise InvalidRecords("empty record set")
    return out


class PartitionLog:
    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self.epochs = EpochCache()
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0  # every offset below it is fsynced
        self.last_flush_ms = 0
        self.recovery = LogRecovery(0, 0, 0)

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        now_ms: int,
        topic_id: uuid.UUID | None = None,
        log_start_offset: int = 0,
        high_watermark: int = 0,
    ) -> PartitionLog:
        """Open (creating if needed) and recover a partition's directory."""
        make_dirs_durably(directory)
        self = cls(directory, topic, partition, config)
        try:
            self._recover(now_ms, topic_id, log_start_offset, high_watermark)
        except BaseException:
            self.close()
            raise
        return self

    def _recover(self, now_ms: int, topic_id: uuid.UUID | None, log_start: int, hw: int) -> None:
        meta = self.directory / PARTITION_METADATA
        stored = read_partition_metadata(meta)
        if topic_id is not None and stored is not None and stored != topic_id:
            raise ValueError(f"{meta}: topic id {stored} is not the topic's {topic_id} (a deleted topic's log?)")
        if topic_id is not None and stored is None:
            write_partition_metadata(meta, topic_id)
        bases = segment_bases(self.directory)
        for p in self.directory.iterdir():  # indexes whose log is gone
            stem, _, suffix = p.name.partition(".")
            if suffix in ("index", "timeindex") and stem.isdigit() and int(stem) not in bases:
                p.unlink()
        contents = [(b, log_path(self.directory, b), log_path(self.directory, b).read_bytes()) for b in bases]
        kept, damage = scan_segments(contents, compressed_ok=True)
        if damage is not None:
            log.warning(
                "partition log %s damaged at %s:%d (%s): truncating to offset %d",
                self.directory.name,
                damage.path,
                damage.position,
                damage.reason,
                damage.offset,
            )
            for name in damage.deleted_segments:
                base = int(Path(name).name.split(".")[0])
                for path in (Path(name), index_path(self.directory, base), time_index_path(self.directory, base)):
                    path.unlink(missing_ok=True)
        for scanned in kept:
            seg = LogSegment(self.directory, scanned.base_offset, self.config.index_interval_bytes)
            valid = scanned.headers[-1].end_position if scanned.headers else 0
            if seg.size > valid:
                seg.file.truncate(valid)
            seg.rebuild(scanned.headers, now_ms)
            self.segments.append(seg)
            for h in scanned.headers:
                self._assign(h.epoch, h.base_offset, persist=False)
        if damage is not None:
            fsync_dir(self.directory)
        if not self.segments:
            self._roll(max(log_start, 0))
        end = self.log_end_offset
        checkpointed = read_leader_epoch_checkpoint(self.directory / LEADER_EPOCH_CHECKPOINT) or []
        for epoch, start in checkpointed:  # epochs begun without a batch yet (a leader's first epoch offset)
            latest = self.epochs.latest()
            if start <= end and (latest is None or epoch > latest):
                self.epochs.assign(epoch, start)
        self.log_start_offset = min(max(log_start, self.segments[0].base_offset), end)
        self.epochs.truncate_from_start(self.log_start_offset, end + 1)
        self._write_epochs()
        self.high_watermark = min(max(hw, self.log_start_offset), end)
        self.recovery_point = end
        self.last_flush_ms = now_ms
        self.recovery = LogRecovery(self.log_start_offset, end, len(self.segments), damage)

    # ---- bounds -------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def latest_epoch(self) -> int | None:
        return self.epochs.latest()

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the record at `offset` (-1 if none is known)."""
        return self.epochs.epoch_at(offset, -1)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's endOffsetForEpoch: the largest epoch <= `epoch` and the end offset of its records
        (the log end for the latest epoch); (-1, -1) when the log knows no such epoch."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset, UNDEFINED)

    def update_high_watermark(self, hw: int) -> int:
        """Set the high-water mark, kept within [log start, log end]; returns it."""
        self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    # ---- appends ------------------------------------------------------------------------------

    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: int) -> AppendInfo:
        """Validate a produced record set, assign its offsets and `leader_epoch`, append it."""
        v = validate(records, self.config.max_message_bytes)
        next_offset = self.log_end_offset
        log_append_time = -1
        headers: list[BatchHeader] = []
        for h in v.headers:
            struct.pack_into(">q", v.data, h.position, next_offset)
            struct.pack_into(">i", v.data, h.position + 12, leader_epoch)
            max_ts = h.max_timestamp
            if self.config.log_append_time:
                log_append_time = max_ts = now_ms
                attributes = struct.unpack_from(">h", v.data, h.position + _ATTRIBUTES_AT)[0]
                struct.pack_into(">h", v.data, h.position + _ATTRIBUTES_AT, attributes | _LOG_APPEND_TIME_FLAG)
                struct.pack_into(">q", v.data, h.position + _MAX_TS_AT, now_ms)
                crc = crc32c.crc32c(memoryview(v.data)[h.position + _CRC_AT + 4 : h.end_position])
                struct.pack_into(">I", v.data, h.position + _CRC_AT, crc)
            headers.append(BatchHeader(
                h.position, h.size, next_offset, next_offset + h.count - 1, leader_epoch, h.crc, h.control,
                h.append_time_ms, h.count, max_ts, h.compression, 1 if self.config.log_append_time else 0,
            ))  # fmt: skip
            next_offset += h.count
        self._assign(leader_epoch, headers[0].base_offset)
        return self._append(bytes(v.data), headers, now_ms, log_append_time)

    def append_as_follower(self, records: bytes, now_ms: int) -> AppendInfo:
        """Append a leader's batches as they are (offsets must continue the log, epochs not go back)."""
        v = validate(records, max(self.config.max_message_bytes, _MAX_RELATIVE))
        expected = self.log_end_offset
        for h in v.headers:
            if h.base_offset != expected:
                raise InvalidRecords(f"batch at offset {h.base_offset} does not continue the log (end {expected})")
            latest = self.epochs.latest()
            if latest is not None and h.epoch < latest:
                raise InvalidRecords(f"batch epoch {h.epoch} is below the log's latest epoch {latest}")
            self._assign(h.epoch, h.base_offset)
            expected = h.next_offset
        return self._append(bytes(v.data), v.headers, now_ms, -1)

    def _append(self, data: bytes, headers: list[BatchHeader], now_ms: int, log_append_time: int) -> AppendInfo:
        seg = self.segments[-1]
        last = headers[-1].last_offset
        if not seg.empty and (
            seg.size + len(data) > self.config.segment_bytes
            or (seg.first_append_ms is not None and now_ms - seg.first_append_ms >= self.config.segment_ms)
            or last - seg.base_offset > _MAX_RELATIVE
        ):
            seg = self._roll(headers[0].base_offset)
        seg.append(data, headers, now_ms)
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush(now_ms)
        return AppendInfo(
            headers[0].base_offset, last, log_append_time, sum(h.count for h in headers), len(headers),
            max(h.max_timestamp for h in headers),
        )  # fmt: skip

    def assign_epoch_start(self, epoch: int, offset: int) -> None:
        """A new leader's epoch begins at `offset` (its log end), written before any batch of it."""
        self._assign(epoch, offset)

    def _assign(self, epoch: int, start: int, persist: bool = True) -> None:
        latest = self.epochs.latest()
        if latest is not None and epoch <= latest:
            if epoch < latest:
                raise InvalidRecords(f"leader epoch {epoch} is below the log's latest epoch {latest}")
            return
        self.epochs.assign(epoch, start)
        if persist:
            self._write_epochs()

    def _write_epochs(self) -> None:
        write_leader_epoch_checkpoint(self.directory / LEADER_EPOCH_CHECKPOINT, self.epochs.entries())

    # ---- reads --------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True) -> bytes:
        """Whole batches from the one holding `offset`, ending at or before `max_offset` (default:
        the log end) and within `max_bytes` (the first batch whatever its size when `min_one`)."""
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {end}]")
        bound = end if max_offset is None else min(max_offset, end)
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            found = seg.find(offset)
            if found is not None:
                return seg.read(found, max_bytes, bound, min_one)
            i += 1
        return b""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record whose timestamp is >= `timestamp`
        (ListOffsets by time); None if no record is that recent."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp:
                continue
            found = seg.find(max(seg.time_index.lookup(timestamp), self.log_start_offset))
            while found is not None:
                if found.max_timestamp >= timestamp:
                    data = seg.file.read(found.position, found.size)
                    header = read_header(data, 0, compressed_ok=True)
                    if header.compression:  # no decompression here: the batch's max timestamp stands for it
                        return found.base_offset, found.max_timestamp, found.epoch
                    for offset, ts in record_timestamps(data, header):
                        if ts >= timestamp and offset >= self.log_start_offset:
                            return offset, ts, found.epoch
                found = seg.find(found.next_offset)
        return None

    def max_timestamp(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the record with the largest timestamp (ListOffsets -3)."""
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        return self.offset_for_timestamp(best.max_timestamp)

    # ---- truncation and retention -------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= `offset` (a follower's truncation); the new log end."""
        if offset >= self.log_end_offset:
            return self.log_end_offset
        if offset < self.log_start_offset:
            return self.truncate_fully_and_start_at(offset)
        i = self._segment_index(offset)
        for seg in reversed(self.segments[i + 1 :]):
            seg.delete()
        del self.segments[i + 1 :]
        self.segments[i].truncate_to(offset)
        fsync_dir(self.directory)
        end = self.log_end_offset
        self.epochs.truncate_from_end(end)
        self._write_epochs()
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        return end

    def truncate_fully_and_start_at(self, offset: int) -> int:
        for seg in reversed(self.segments):
            seg.delete()
        self.segments.clear()
        self._roll(offset)
        fsync_dir(self.directory)
        self.epochs = EpochCache()
        self._write_epochs()
        self.log_start_offset = self.high_watermark = self.recovery_point = offset
        return offset

    def delete_expired(self, now_ms: int) -> int:
        """Retention: delete the oldest segments wholly below the high-water mark that are older
        than `retention.ms` or beyond `retention.bytes`; the number deleted."""
        cfg = self.config
        excess = self.size_bytes - cfg.retention_bytes if cfg.retention_bytes >= 0 else 0
        doomed = 0
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else seg.next_offset
            if seg.empty or nxt > self.high_watermark:
                break
            newest = seg.max_timestamp if seg.max_timestamp >= 0 else (seg.first_append_ms or now_ms)
            expired = cfg.retention_ms >= 0 and now_ms - newest > cfg.retention_ms
            too_big = excess >= seg.size > 0
            if not (expired or too_big):
                break
            excess -= seg.size
            doomed += 1
        if doomed == 0:
            return 0
        if doomed == len(self.segments):
            self._roll(self.log_end_offset)
        for seg in self.segments[:doomed]:
            seg.delete()
        del self.segments[:doomed]
        fsync_dir(self.directory)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.epochs.truncate_from_start(self.log_start_offset, self.log_end_offset + 1)
        self._write_epochs()
        return doomed

    def increment_log_start_offset(self, offset: int) -> None:
        """Move the log start up (DeleteRecords); segments wholly below it go at the next retention."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"log start {offset} beyond the high-water mark {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epochs.truncate_from_start(offset, self.log_end_offset + 1)
            self._write_epochs()

    # ---- flushing -----------------------------------------------------------------------------

    def maybe_flush(self, now_ms: int) -> bool:
        """`flush.ms`: fsync when that long has passed since the last flush and something is unflushed."""
        if self.recovery_point < self.log_end_offset and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush(now_ms)
            return True
        return False

    def flush(self, now_ms: int) -> None:
        for seg in self.segments:
            seg.flush()
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = now_ms

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        """Remove the partition's directory (the topic was deleted or the replica moved away)."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.directory.parent.exists():
            fsync_dir(self.directory.parent)

    # ---- helpers ------------------------------------------------------------------------------

    def _roll(self, base_offset: int) -> LogSegment:
        if self.segments:
            self.segments[-1].flush()  # Kafka flushes a segment as it rolls
        seg = LogSegment(self.directory, base_offset, self.config.index_interval_bytes, create=True)
        seg.next_offset = base_offset
        self.segments.append(seg)
        return seg

    def _segment_index(self, offset: int) -> int:
        lo, hi = 0, len(self.segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo
