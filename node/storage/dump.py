"""Read-only walkers over segment and snapshot files, for `kraft-node dump-log`.

`iter_file_batches` yields each batch with its byte position and validated header, then raises
the first damage (CorruptBatch, located in the file). `dump_lines` renders them like Kafka's
DumpLogSegments; decoding metadata record payloads is left to a caller-supplied function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftlab.node.raft.membership.records import describe_membership_record
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.batches import BatchHeader, decode_at, read_header
from kraftlab.node.storage.control import ControlRecordType, control_type, parse_snapshot_footer, parse_snapshot_header
from kraftlab.node.storage.errors import CorruptBatch
from kraftlab.node.storage.layout import METADATA_PARTITION, parse_segment_name, parse_snapshot_name

RecordDecoder = Callable[[Record], str | None]


@dataclass(frozen=True, slots=True)
class FileBatch:
    header: BatchHeader
    batch: Batch

    @property
    def position(self) -> int:
        return self.header.position


def file_kind(path: str | Path) -> str | None:
    """`segment`, `snapshot`, or None when the name is neither."""
    name = Path(path).name.removesuffix(".part")
    if parse_segment_name(name) is not None:
        return "segment"
    if parse_snapshot_name(name) is not None:
        return "snapshot"
    return None


def dumpable_files(path: str | Path) -> list[Path]:
    """The files `dump-log PATH` covers: PATH itself if it is a file, else every segment and
    snapshot (partial ones included) in PATH or in its `__cluster_metadata-0` subdirectory."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    if (path / METADATA_PARTITION).is_dir():
        path = path / METADATA_PARTITION
    return sorted(p for p in path.iterdir() if file_kind(p) is not None)


def iter_file_batches(path: str | Path) -> Iterator[FileBatch]:
    """Every batch of a segment or snapshot file with its position; raises CorruptBatch (carrying
    the path) at the first damaged batch, after yielding the valid ones before it."""
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        try:
            header = read_header(data, pos)
            batch = decode_at(data, header)
        except CorruptBatch as e:
            raise e.in_file(str(path)) from None
        yield FileBatch(header, batch)
        pos = header.end_position


def describe_batch(fb: FileBatch) -> str:
    h = fb.header
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.count} "
        f"partitionLeaderEpoch: {h.epoch} isControl: {str(h.control).lower()} position: {h.position} "
        f"CreateTime: {h.append_time_ms} size: {h.size} magic: 2 compresscodec: none crc: {h.crc} isvalid: true"
    )


def describe_control(record: Record) -> str:
    try:
        kind = control_type(record.key)
        name = ControlRecordType(kind).name if kind in ControlRecordType._value2member_map_ else f"UNKNOWN({kind})"
        if kind == ControlRecordType.SNAPSHOT_HEADER:
            header = parse_snapshot_header(record)
            return f"{name} version: {header.version} lastContainedLogTimestamp: {header.last_contained_log_timestamp}"
        if kind == ControlRecordType.SNAPSHOT_FOOTER:
            return f"{name} version: {parse_snapshot_footer(record).version}"
        return describe_membership_record(record) or name
    except ValueError as e:
        return f"unreadable control record ({e})"


def describe_record(offset: int, record: Record, control: bool, decode: RecordDecoder | None = None) -> str:
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    line = f"| offset: {offset} keySize: {key_size} valueSize: {value_size} crc32c: {record.crc()}"
    if control:
        return f"{line} control: {describe_control(record)}"
    payload = decode(record) if decode is not None else None
    return f"{line} payload: {payload}" if payload is not None else line


def dump_lines(path: str | Path, decode: RecordDecoder | None = None, records: bool = True) -> Iterator[str]:
    """Kafka-DumpLogSegments-like text for a segment or snapshot file; damage ends the dump with a line
    saying where and why (the caller decides the exit status from `iter_file_batches` if it must)."""
    yield f"Dumping {path} ({file_kind(path) or 'unknown kind'})"
    try:
        for fb in iter_file_batches(path):
            yield describe_batch(fb)
            if records:
                for i, record in enumerate(fb.batch.records):
                    yield describe_record(fb.batch.base_offset + i, record, fb.batch.control, decode)
    except CorruptBatch as e:
        yield f"CORRUPT: {e}"
