"""DiskSnapshotStore: KIP-630 snapshots as files of record batches in the metadata partition directory.

A snapshot `<20-digit end offset>-<10-digit epoch>.checkpoint` holds: a control batch with the
SnapshotHeaderRecord (then, as Kafka writes it with kraft.version 1, the KRaftVersionRecord and the
VotersRecord in force), the state machine's records in batches, a control batch with one
SnapshotFooterRecord; offsets inside the file count from 0 (Kafka's snapshot writer does the
same). A snapshot being written or fetched is `<name>.checkpoint.part` until `freeze` validated
it (CRCs, contiguous offsets, header first, footer last, nothing after) and renamed it durably;
partial files left by a crash are deleted when the store opens.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from kraftlab.node.raft.membership.records import parse_kraft_version, parse_voters
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.storage.atomic import fsync_dir, make_dirs_durably
from kraftlab.node.storage.batches import decode_batches, encode_batch
from kraftlab.node.storage.control import (
    ControlRecordType,
    control_type,
    parse_snapshot_footer,
    parse_snapshot_header,
    snapshot_footer,
    snapshot_header,
)
from kraftlab.node.storage.errors import CorruptBatch, CorruptSnapshot
from kraftlab.node.storage.layout import is_partial_snapshot, parse_snapshot_name, partition_dir, snapshot_name

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_BYTES = 1 << 20


def encode_snapshot(
    snapshot_id: OffsetAndEpoch,
    records: Sequence[Record],
    append_time_ms: int,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    control_records: Sequence[Record] = (),
) -> bytes:
    """The bytes of a complete snapshot: header batch (the header, then `control_records`: the
    KRaftVersion and KRaftVoters records), records in batches of about `max_batch_bytes`, footer."""
    epoch = snapshot_id.epoch
    header = (snapshot_header(append_time_ms), *control_records)
    parts = [encode_batch(Batch(0, epoch, header, True, append_time_ms))]
    offset = len(header)
    chunk: list[Record] = []
    chunk_bytes = 0
    for record in records:
        size = len(record.key or b"") + len(record.value or b"") + 16
        if chunk and chunk_bytes + size > max_batch_bytes:
            parts.append(encode_batch(Batch(offset, epoch, tuple(chunk), False, append_time_ms)))
            offset += len(chunk)
            chunk, chunk_bytes = [], 0
        chunk.append(record)
        chunk_bytes += size
    if chunk:
        parts.append(encode_batch(Batch(offset, epoch, tuple(chunk), False, append_time_ms)))
        offset += len(chunk)
    parts.append(encode_batch(Batch(offset, epoch, (snapshot_footer(),), True, append_time_ms)))
    return b"".join(parts)


def decode_snapshot(data: bytes, path: str = "snapshot") -> list[Record]:
    """Validate a snapshot's bytes and return its data records (control batches excluded)."""
    return _decode_snapshot(data, path)[1]


def decode_snapshot_control(data: bytes, path: str = "snapshot") -> list[Record]:
    """Validate a snapshot's bytes and return the membership control records after its header
    (KRaftVersion, KRaftVoters; none in a snapshot of a static quorum)."""
    return _decode_snapshot(data, path)[0]


def _decode_snapshot(data: bytes, path: str) -> tuple[list[Record], list[Record]]:
    try:
        batches = decode_batches(data)
    except CorruptBatch as e:
        raise CorruptSnapshot(path, str(e)) from None
    if len(batches) < 2:
        raise CorruptSnapshot(path, f"{len(batches)} batch(es): a header and a footer are required")
    expected = 0
    for b in batches:
        if b.base_offset != expected:
            raise CorruptSnapshot(path, f"batch at offset {b.base_offset} where {expected} was expected")
        expected = b.next_offset
    _check_control(batches[0], parse_snapshot_header, "header", path, _MEMBERSHIP_PARSERS)
    _check_control(batches[-1], parse_snapshot_footer, "footer", path, {})
    control = list(batches[0].records[1:])
    return control, [r for b in batches[1:-1] if not b.control for r in b.records]


_MEMBERSHIP_PARSERS: dict[int, Callable[[Record], object]] = {
    ControlRecordType.KRAFT_VERSION: parse_kraft_version,
    ControlRecordType.KRAFT_VOTERS: parse_voters,
}


def _check_control(
    batch: Batch,
    parse: Callable[[Record], object],
    what: str,
    path: str,
    followers: dict[int, Callable[[Record], object]],
) -> None:
    """The batch is a control batch whose first record is the `what` record, followed only by
    records `followers` can parse (each type at most once, in the order Kafka writes them)."""
    if not batch.control or not batch.records or len(batch.records) > 1 + len(followers):
        extra = f" (then at most {', '.join(ControlRecordType(k).name for k in followers)})" if followers else ""
        raise CorruptSnapshot(path, f"the {what} batch must be a control batch with the {what} record{extra}")
    try:
        parse(batch.records[0])
        kinds = [control_type(r.key) for r in batch.records[1:]]
        if kinds != sorted(set(kinds)) or any(k not in followers for k in kinds):
            raise ValueError(f"unexpected control records {kinds} after the {what}")
        for record, kind in zip(batch.records[1:], kinds, strict=True):
            followers[kind](record)
    except ValueError as e:
        raise CorruptSnapshot(path, f"bad snapshot {what}: {e}") from None


class DiskSnapshotStore:
    """A SnapshotStore over the snapshot files of one directory."""

    def __init__(self, directory: str | Path, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        self.directory = Path(directory)
        self.max_batch_bytes = max_batch_bytes
        make_dirs_durably(self.directory)
        partials = [p for p in self.directory.iterdir() if is_partial_snapshot(p.name)]
        for p in partials:
            log.info("deleting partial snapshot %s", p)
            p.unlink()
        if partials:
            fsync_dir(self.directory)

    @classmethod
    def in_log_dir(
        cls, metadata_log_dir: str | Path, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    ) -> DiskSnapshotStore:
        return cls(partition_dir(metadata_log_dir), max_batch_bytes)

    def path(self, snapshot_id: OffsetAndEpoch, partial: bool = False) -> Path:
        return self.directory / snapshot_name(snapshot_id, partial)

    def ids(self) -> list[OffsetAndEpoch]:
        return sorted(i for p in self.directory.iterdir() if (i := parse_snapshot_name(p.name)) is not None)

    def latest(self) -> OffsetAndEpoch | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def write(
        self,
        snapshot_id: OffsetAndEpoch,
        records: Sequence[Record],
        append_time_ms: int,
        control_records: Sequence[Record] = (),
    ) -> None:
        if self.path(snapshot_id).exists():
            return  # snapshots are immutable: the same id holds the same committed state
        data = encode_snapshot(snapshot_id, records, append_time_ms, self.max_batch_bytes, control_records)
        part = self.path(snapshot_id, partial=True)
        part.unlink(missing_ok=True)
        self._write_at(part, 0, data)
        self._publish(snapshot_id)

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._frozen(snapshot_id).stat().st_size

    def read_bytes(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        with open(self._frozen(snapshot_id), "rb") as f:
            return os.pread(f.fileno(), max_bytes, position)

    def partial_size(self, snapshot_id: OffsetAndEpoch) -> int:
        """Bytes received so far of a snapshot being fetched (0 if none)."""
        try:
            return self.path(snapshot_id, partial=True).stat().st_size
        except FileNotFoundError:
            return 0

    def write_bytes(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Receive a chunk at `position`: the next one, or a resend from an earlier position (the
        part file is cut there first); a gap is an error."""
        have = self.partial_size(snapshot_id)
        if position > have:
            raise ValueError(f"snapshot {snapshot_id}: chunk at {position} leaves a gap after {have} bytes")
        self._write_at(self.path(snapshot_id, partial=True), position, data, fsync=False)

    def freeze(self, snapshot_id: OffsetAndEpoch) -> None:
        part = self.path(snapshot_id, partial=True)
        try:
            if not part.exists():
                raise CorruptSnapshot(str(part), "no bytes were received")
            decode_snapshot(part.read_bytes(), str(part))
        except CorruptSnapshot:
            part.unlink(missing_ok=True)
            raise
        fd = os.open(part, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._publish(snapshot_id)

    def read_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        path = self._frozen(snapshot_id)
        return decode_snapshot(path.read_bytes(), str(path))

    def read_control_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        """The KRaftVersion and KRaftVoters records of a snapshot (empty for a static quorum's)."""
        path = self._frozen(snapshot_id)
        return decode_snapshot_control(path.read_bytes(), str(path))

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> None:
        doomed = [p for p in self.directory.iterdir() if is_partial_snapshot(p.name)]
        doomed += [self.path(i) for i in self.ids() if i < snapshot_id]
        for p in doomed:
            p.unlink(missing_ok=True)
        if doomed:
            fsync_dir(self.directory)

    def _frozen(self, snapshot_id: OffsetAndEpoch) -> Path:
        path = self.path(snapshot_id)
        if not path.exists():
            raise KeyError(f"no frozen snapshot {snapshot_id} in {self.directory}")
        return path

    def _publish(self, snapshot_id: OffsetAndEpoch) -> None:
        os.replace(self.path(snapshot_id, partial=True), self.path(snapshot_id))
        fsync_dir(self.directory)

    @staticmethod
    def _write_at(path: Path, position: int, data: bytes, fsync: bool = True) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, position)
            view = memoryview(data)
            while view:
                n = os.pwrite(fd, view, position)
                position += n
                view = view[n:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
