"""Control records of the metadata log: the snapshot header/footer (and the control key, re-exported).

The key (`ControlRecordType`, `control_key`, `control_type`) is defined once in node.raft.control and
re-exported here; a control record's value is the control message serialised by `kio` without a version prefix
(SnapshotHeaderRecord v0 and SnapshotFooterRecord v0 here; LeaderChangeMessage is the Raft layer's).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import TypeVar

from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i16, i64

from kraftlab.node.raft.control import ControlRecordType, control_key, control_type
from kraftlab.node.raft.ports import Record

__all__ = [
    "ControlRecordType",
    "control_key",
    "control_type",
    "parse_snapshot_footer",
    "parse_snapshot_header",
    "snapshot_footer",
    "snapshot_header",
]

T = TypeVar("T")
_write_header = entity_writer(SnapshotHeaderRecord)
_write_footer = entity_writer(SnapshotFooterRecord)
_read_header = entity_reader(SnapshotHeaderRecord)
_read_footer = entity_reader(SnapshotFooterRecord)


def snapshot_header(last_contained_log_timestamp_ms: int) -> Record:
    buf = io.BytesIO()
    _write_header(
        buf, SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(last_contained_log_timestamp_ms))
    )
    return Record(control_key(ControlRecordType.SNAPSHOT_HEADER), buf.getvalue())


def snapshot_footer() -> Record:
    buf = io.BytesIO()
    _write_footer(buf, SnapshotFooterRecord(version=i16(0)))
    return Record(control_key(ControlRecordType.SNAPSHOT_FOOTER), buf.getvalue())


def _decode(reader: Callable[[bytes, int], tuple[T, int]], value: bytes | None) -> tuple[T, int]:
    try:
        return reader(value or b"", 0)
    except (SerialError, struct.error, ValueError) as e:
        raise ValueError(f"malformed control record value: {e}") from None


def parse_snapshot_header(record: Record) -> SnapshotHeaderRecord:
    """The header a SNAPSHOT_HEADER control record carries; ValueError if it is not one."""
    if control_type(record.key) != ControlRecordType.SNAPSHOT_HEADER:
        raise ValueError(f"not a snapshot header (control type {control_type(record.key)})")
    header, size = _decode(_read_header, record.value)
    if size != len(record.value or b""):
        raise ValueError("trailing bytes after the snapshot header")
    return header


def parse_snapshot_footer(record: Record) -> SnapshotFooterRecord:
    """The footer a SNAPSHOT_FOOTER control record carries; ValueError if it is not one."""
    if control_type(record.key) != ControlRecordType.SNAPSHOT_FOOTER:
        raise ValueError(f"not a snapshot footer (control type {control_type(record.key)})")
    footer, size = _decode(_read_footer, record.value)
    if size != len(record.value or b""):
        raise ValueError("trailing bytes after the snapshot footer")
    return footer
