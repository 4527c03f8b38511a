"""Control records of the metadata log: Kafka's ControlRecordType key and the snapshot header/footer.

A control record's key is `version (int16) = 0, type (int16)` as Kafka's ControlRecordType writes
it; its value is the control message serialised by `kio` without a version prefix
(SnapshotHeaderRecord v0 and SnapshotFooterRecord v0 here; LeaderChangeMessage is the Raft layer's).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import TypeVar

from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i16, i64

from node.raft.ports import Record

_KEY = struct.Struct(">hh")
CONTROL_KEY_VERSION = 0


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_key(kind: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(kind))


def control_type(key: bytes | None) -> int:
    """The control record type a key encodes (an int: unknown types are returned, not rejected)."""
    if key is None or len(key) < _KEY.size:
        raise ValueError(f"control record key too short: {key!r}")
    version, kind = _KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION:
        raise ValueError(f"unsupported control record key version {version}")
    return int(kind)


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
