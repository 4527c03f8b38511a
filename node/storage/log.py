"""DiskLog: the metadata log as Kafka record batch segments in `<metadata.log.dir>/__cluster_metadata-0/`.

Segments are `<20-digit base offset>.log`, rolled when the next batch would push the active one
past `segment_bytes`. An in-memory index (batch positions) and an epoch cache are rebuilt on open
by scanning every segment: the first torn, CRC-bad or discontinuous batch ends the log (the tail
is truncated, a warning is logged and `DiskLog.recovery` reports it for the journal), unless that
would lose records below the durable high-water mark (`hw-checkpoint`, written by the owner via
`checkpoint_hw`): then `CommittedDataDamaged` (a `ports.LogCorruption`) is raised and nothing is
served or changed; an unreadable `hw-checkpoint` raises it too.

Writes go to the OS at `append` and are fsynced at `flush`, or by a flush split in three so that
the fsync can run on a thread while the event loop goes on (`begin_flush` on the loop, then
`FlushTicket.sync` on any thread, then `complete_flush` on the loop). A SIGKILL loses nothing (the
kernel still holds the written pages); a power loss takes what was never fsynced, which tests make
real by running the log on the disk-fault filesystem (kraftlab.nemesis.diskfs).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraftlab.node.raft.ports import Batch, LogSegment, OffsetAndEpoch
from kraftlab.node.storage.atomic import fsync_dir, make_dirs_durably
from kraftlab.node.storage.batches import decode_batch, encode_batch
from kraftlab.node.storage.checkpoint import HighWatermarkCheckpoint
from kraftlab.node.storage.epoch_cache import EpochCache
from kraftlab.node.storage.errors import CommittedDataDamaged, CorruptStateFile
from kraftlab.node.storage.layout import HW_CHECKPOINT_FILE, parse_segment_name, partition_dir, segment_name
from kraftlab.node.storage.recovery import RecoveryReport, scan_segments
from kraftlab.node.storage.segment import Segment

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 1 << 30  # Kafka's metadata.log.segment.bytes default
CACHE_BATCHES = 4096


@dataclass(slots=True)
class FlushTicket:
    """What one split flush makes durable: duplicates of the dirty segments' descriptors (a segment
    deleted meanwhile stays fsyncable), the bytes each covers, and the log end they cover."""

    generation: int
    end: int
    covers: list[tuple[Segment, int]]
    directory: Path | None
    dir_generation: int
    fds: list[int] = field(default_factory=list)

    def sync(self) -> None:
        """The fsyncs (blocking; safe on any thread). Closes the duplicated descriptors."""
        try:
            for fd in self.fds:
                os.fdatasync(fd)  # as Segment.flush
            if self.directory is not None:
                fsync_dir(self.directory)
        finally:
            self.discard()

    def discard(self) -> None:
        """Close the duplicated descriptors without syncing (a flush abandoned at shutdown)."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


class DiskLog:
    """A ReplicatedLog on disk. Open with `DiskLog.open`; pass the latest frozen snapshot id so
    that a log starting after offset 0 (or behind the snapshot) is understood."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.hw_checkpoint = HighWatermarkCheckpoint(directory / HW_CHECKPOINT_FILE)
        self.recovery = RecoveryReport(0, 0, 0, 0, 0)
        self._segments: list[Segment] = []
        # one entry per batch, parallel lists, sorted by base offset
        self._bases: list[int] = []
        self._sizes: list[int] = []
        self._positions: list[int] = []
        self._segs: list[Segment] = []
        self._epochs = EpochCache()
        self._start = 0
        self._start_epoch = 0  # epoch of the record just before `_start` (the snapshot's)
        self._end = 0
        self._flushed_end = 0
        self._dir_dirty = False
        self._dir_generation = 0  # bumped whenever the directory gets dirty
        self._generation = 0  # bumped by every truncation: a flush begun before it covers nothing after it
        self._cache: dict[int, Batch] = {}

    # ---- opening and recovery -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        metadata_log_dir: str | Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        snapshot_id: OffsetAndEpoch | None = None,
    ) -> DiskLog:
        """Open (creating if needed) and recover the log of `metadata.log.dir`."""
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, not {segment_bytes}")
        directory = partition_dir(metadata_log_dir)
        make_dirs_durably(directory)
        self = cls(directory, segment_bytes)
        try:
            self._recover(snapshot_id)
        except BaseException:
            self.close()
            raise
        return self

    def _recover(self, snapshot_id: OffsetAndEpoch | None) -> None:
        try:
            hw = self.hw_checkpoint.read()
        except CorruptStateFile as e:
            message = f"{e}: cannot tell committed records from an uncommitted tail; refusing to serve the log"
            raise CommittedDataDamaged(message, e.path, -1, e.reason, -1) from e
        found = sorted((b, p) for p in self.directory.iterdir() if (b := parse_segment_name(p.name)) is not None)
        contents = [(base, path, path.read_bytes()) for base, path in found]
        kept, damage = scan_segments(contents)
        start = kept[0].base_offset if kept else 0
        if damage is not None:
            end = damage.offset
        elif kept:
            end = kept[-1].headers[-1].next_offset if kept[-1].headers else kept[-1].base_offset
        else:
            end = 0
        covered = snapshot_id is not None and snapshot_id.offset >= hw
        if end < hw and not covered:
            reason = damage.reason if damage else "records missing"
            path = damage.path if damage else str(self.directory)
            where = f" ({damage.reason} at {damage.path}:{damage.position})" if damage else ""
            raise CommittedDataDamaged(
                f"metadata log in {self.directory} ends at offset {end}{where}, below the checkpointed "
                f"high-water mark {hw}: committed records are damaged or missing; refusing to serve them",
                path, end, reason, hw,
            )  # fmt: skip
        if start > 0 and (snapshot_id is None or snapshot_id.offset < start):
            raise CommittedDataDamaged(
                f"metadata log in {self.directory} starts at offset {start} but no snapshot covers the records "
                f"before it (latest snapshot: {snapshot_id})",
                str(self.directory), 0, "log prefix missing", hw,
            )  # fmt: skip
        if damage is not None:
            log.warning(
                "metadata log damaged at %s:%d (%s): truncating to offset %d, dropping %d bytes and %d segment(s)",
                damage.path, damage.position, damage.reason, damage.offset, damage.dropped_bytes,
                len(damage.deleted_segments),
            )  # fmt: skip
            for name in damage.deleted_segments:
                Path(name).unlink(missing_ok=True)
        for scanned in kept:
            seg = Segment(scanned.path, scanned.base_offset)
            self._segments.append(seg)
            valid = scanned.headers[-1].end_position if scanned.headers else 0
            if seg.size > valid:
                seg.truncate(valid)
            for h in scanned.headers:
                self._index(seg, h.base_offset, h.position, h.size, h.epoch)
                seg.last_append_ms = max(seg.last_append_ms, h.append_time_ms)
        if damage is not None:
            fsync_dir(self.directory)
        self._start = start
        self._end = end
        if not self._segments:
            self._roll(start)
            self._flush_dir()
        self._flushed_end = self._end
        reset = None
        if snapshot_id is not None:
            if snapshot_id.offset == self._start:
                self._start_epoch = snapshot_id.epoch
            if snapshot_id.offset > self._end or snapshot_id.epoch > self.last_epoch():
                reset = snapshot_id  # Kafka's truncateToLatestSnapshot on start
        self.recovery = RecoveryReport(self._start, self._end, len(self._segments), len(self._bases), hw, damage, reset)
        if reset is not None:
            log.warning("metadata log ends at %d, behind snapshot %s: starting it at the snapshot", self._end, reset)
            self.reset_to_snapshot(reset)

    def _index(self, seg: Segment, base: int, position: int, size: int, epoch: int) -> None:
        self._bases.append(base)
        self._positions.append(position)
        self._sizes.append(size)
        self._segs.append(seg)
        self._epochs.assign(epoch, base)

    # ---- ReplicatedLog --------------------------------------------------------------------

    def start_offset(self) -> int:
        return self._start

    def end_offset(self) -> int:
        return self._end

    def last_epoch(self) -> int:
        latest = self._epochs.latest()
        return self._start_epoch if latest is None else latest

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return self._epochs.end_offset_for(epoch, self._end, OffsetAndEpoch(self._start, self._start_epoch))

    def append(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset != self._end:
                raise ValueError(f"batch at offset {batch.base_offset} does not continue the log (end {self._end})")
            if batch.epoch < self.last_epoch():
                raise ValueError(f"batch epoch {batch.epoch} is below the log's last epoch {self.last_epoch()}")
            data = encode_batch(batch)
            seg = self._segments[-1]
            if seg.size > 0 and seg.size + len(data) > self.segment_bytes:
                seg = self._roll(batch.base_offset)
            self._index(seg, batch.base_offset, seg.size, len(data), batch.epoch)
            seg.append(data)
            seg.last_append_ms = max(seg.last_append_ms, batch.append_time_ms)
            self._end = batch.next_offset
            self._remember(batch)

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        out: list[Batch] = []
        for i in self._span(start_offset, max_bytes):
            batch = self._cache.get(self._bases[i])
            if batch is None:
                batch = decode_batch(self._segs[i].read(self._positions[i], self._sizes[i]))[0]
                self._remember(batch)
            out.append(batch)
        return out

    def read_bytes(self, start_offset: int, max_bytes: int) -> bytes:
        """The raw record set `read` would return (for Fetch responses: no decoding)."""
        span = self._span(start_offset, max_bytes)
        parts: list[bytes] = []
        i = span.start
        while i < span.stop:  # one read per segment
            j = i
            while j + 1 < span.stop and self._segs[j + 1] is self._segs[i]:
                j += 1
            parts.append(
                self._segs[i].read(self._positions[i], self._positions[j] + self._sizes[j] - self._positions[i])
            )
            i = j + 1
        return b"".join(parts)

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after `offset`. An offset inside a batch keeps the batch's
        records before it, re-encoded as a shorter batch and fsynced at once (Raft truncates at
        epoch boundaries, which are batch boundaries, so this is only a safety net)."""
        if offset >= self._end:
            return
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset}, below the log start {self._start}")
        self._generation += 1
        i = bisect_right(self._bases, offset) - 1
        cut = self._bases[i]
        prefix = None
        if cut != offset:
            whole = self.read(cut, 0)[0]
            prefix = Batch(cut, whole.epoch, whole.records[: offset - cut], whole.control, whole.append_time_ms)
        seg = self._segs[i]
        keep = self._segments.index(seg)
        for later in self._segments[keep + 1 :]:
            later.delete()
            self._dirty_dir()
        del self._segments[keep + 1 :]
        seg.truncate(self._positions[i])
        for lst in (self._bases, self._positions, self._sizes, self._segs):
            del lst[i:]
        self._epochs.truncate_from_end(cut)
        self._cache = {b: v for b, v in self._cache.items() if b < cut}
        self._end = cut
        if prefix is not None:
            self.append([prefix])
            self._segments[-1].flush()
        self._flushed_end = min(self._flushed_end, offset)
        self._flush_dir()

    def flush(self) -> None:
        for seg in self._segments:
            if seg.dirty:
                seg.flush()
        self._flush_dir()
        self._flushed_end = self._end

    def begin_flush(self) -> FlushTicket:
        """First part of a split flush (on the thread that appends): note what `FlushTicket.sync`
        will make durable."""
        ticket = FlushTicket(
            self._generation, self._end, [], self.directory if self._dir_dirty else None, self._dir_generation
        )
        for seg in self._segments:
            if seg.dirty:
                ticket.covers.append((seg, seg.written))
                ticket.fds.append(os.dup(seg.fd))
        return ticket

    def complete_flush(self, ticket: FlushTicket) -> None:
        """Last part of a split flush (on the thread that appends), after `ticket.sync()` returned:
        the durable end moves to what the ticket covered, unless the log was truncated meanwhile."""
        if ticket.generation != self._generation:
            return
        for seg, written in ticket.covers:
            seg.durable = max(seg.durable, written)
        if ticket.directory is not None and ticket.dir_generation == self._dir_generation:
            self._dir_dirty = False
        self._flushed_end = max(self._flushed_end, ticket.end)

    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def reset_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self._generation += 1
        for seg in reversed(self._segments):  # newest first: a crash leaves a contiguous prefix
            seg.delete()
        fsync_dir(self.directory)
        self._segments.clear()
        for lst in (self._bases, self._positions, self._sizes, self._segs):
            lst.clear()
        self._epochs = EpochCache()
        self._cache.clear()
        self._start = self._end = self._flushed_end = snapshot_id.offset
        self._start_epoch = snapshot_id.epoch
        self._roll(snapshot_id.offset)
        self._flush_dir()

    def segments(self) -> list[LogSegment]:
        ends = [s.base_offset for s in self._segments[1:]] + [self._end]
        return [
            LogSegment(s.base_offset, end, s.size, s.last_append_ms)
            for s, end in zip(self._segments, ends, strict=True)
        ]

    def delete_before(self, offset: int) -> None:
        seg_ends = [s.base_offset for s in self._segments[1:]] + [self._end]
        doomed = 0
        while doomed < len(self._segments) and self._segments[doomed].base_offset < seg_ends[doomed] <= offset:
            doomed += 1
        if doomed == 0:
            return
        if doomed == len(self._segments):
            self._roll(self._end)
        gone = bisect_left(self._bases, seg_ends[doomed - 1])
        self._start_epoch = self._epochs.epoch_at(self._bases[gone - 1], self._start_epoch)
        for seg in self._segments[:doomed]:  # oldest first: a crash leaves a contiguous suffix
            seg.delete()
        del self._segments[:doomed]
        for lst in (self._bases, self._positions, self._sizes, self._segs):
            del lst[:gone]
        self._start = self._segments[0].base_offset
        self._epochs.truncate_from_start(self._start, self._end)
        self._cache = {b: v for b, v in self._cache.items() if b >= self._start}
        self._dirty_dir()
        self._flush_dir()

    # ---- beyond the protocol --------------------------------------------------------------

    def checkpoint_hw(self, hw: int) -> None:
        """Durably record `min(hw, flushed end)` as the high-water mark recovery must not lose."""
        self.hw_checkpoint.write(min(hw, self._flushed_end))

    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    def close(self) -> None:
        """Close the files."""
        for seg in self._segments:
            seg.close()

    def __enter__(self) -> DiskLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- helpers --------------------------------------------------------------------------

    def _roll(self, base_offset: int) -> Segment:
        seg = Segment(self.directory / segment_name(base_offset), base_offset, create=True)
        self._segments.append(seg)
        self._dirty_dir()
        return seg

    def _dirty_dir(self) -> None:
        self._dir_dirty = True
        self._dir_generation += 1

    def _flush_dir(self) -> None:
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False

    def _batch_index(self, offset: int) -> int:
        i = bisect_left(self._bases, offset)
        if i == len(self._bases) or self._bases[i] != offset:
            raise ValueError(f"offset {offset} is not a batch boundary of the log [{self._start}, {self._end})")
        return i

    def _span(self, start_offset: int, max_bytes: int) -> range:
        if start_offset == self._end:
            return range(0)
        first = self._batch_index(start_offset)
        last = first + 1
        total = self._sizes[first]
        while last < len(self._bases) and total + self._sizes[last] <= max_bytes:
            total += self._sizes[last]
            last += 1
        return range(first, last)

    def _remember(self, batch: Batch) -> None:
        self._cache[batch.base_offset] = batch
        if len(self._cache) > CACHE_BATCHES:
            del self._cache[next(iter(self._cache))]
