"""Kafka record batch v2 <-> `Batch`: encode, decode, validate, and find how far a buffer is valid.

The byte format is exactly Kafka's (magic 2, CRC32C over attributes..end, control bit 0x20 in the
attributes, base/max timestamp = the batch's append time, offsets as deltas from the base offset,
producer id/epoch/sequence -1). `kio.records` is the reference implementation: the tests prove
that kio reads every batch written here and that batches written by kio decode here. The hot path
is hand-rolled with `struct` because kio's reader builds a datetime per record and rounds record
timestamps to whole seconds. Record headers are skipped on decode (the metadata log has none).

Used by the disk log (segments), snapshots, the Raft wire layer (Fetch record sets) and dump tools.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.errors import CorruptBatch

MAGIC = 2
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
COMPRESSION_MASK = 0x07
NO_PRODUCER_ID = -1

# base_offset, batch_length, partition_leader_epoch, magic, crc
_PRE = struct.Struct(">qiibI")
# attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count
_POST = struct.Struct(">hiqqqhii")
LOG_OVERHEAD = 12  # base offset + batch length: bytes not counted by batch_length
HEADER_SIZE = _PRE.size + _POST.size  # 61
_CRC_START = _PRE.size  # the CRC covers everything after the crc field
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [_zigzag_varint(n) for n in range(-1, 1 << 14)]


def _varint(n: int) -> bytes:
    return _SMALL[n + 1] if -1 <= n < (1 << 14) - 1 else _zigzag_varint(n)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, next position). Raises IndexError past the end."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos + 1
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _bytes_field(data: bytes | None) -> bytes:
    return _SMALL[0] if data is None else _varint(len(data)) + data


def encode_batch(batch: Batch) -> bytes:
    """The Kafka record batch v2 bytes of `batch` (at least one record)."""
    records = batch.records
    if not records:
        raise ValueError(f"a record batch needs at least one record (base offset {batch.base_offset})")
    parts: list[bytes] = []
    for delta, record in enumerate(records):
        # attributes 0, timestamp delta 0, offset delta, key, value, no headers
        body = b"".join((b"\x00\x00", _varint(delta), _bytes_field(record.key), _bytes_field(record.value), b"\x00"))
        parts.append(_varint(len(body)))
        parts.append(body)
    attributes = CONTROL_FLAG if batch.control else 0
    ts = batch.append_time_ms
    post = _POST.pack(attributes, len(records) - 1, ts, ts, NO_PRODUCER_ID, -1, -1, len(records)) + b"".join(parts)
    crc = crc32c.crc32c(post)
    return _PRE.pack(batch.base_offset, len(post) + 9, batch.epoch, MAGIC, crc) + post


def encode_batches(batches: Iterable[Batch]) -> bytes:
    """Concatenated batches (a log segment's or a Fetch response's record set)."""
    return b"".join(encode_batch(b) for b in batches)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What a validated batch header says, and where the batch lies in its buffer."""

    position: int
    size: int  # total bytes, LOG_OVERHEAD included
    base_offset: int
    last_offset: int
    epoch: int
    crc: int
    control: bool
    append_time_ms: int
    count: int
    max_timestamp: int = -1
    compression: int = 0
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime (attributes bit 3)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def end_position(self) -> int:
        return self.position + self.size


def read_header(buf: bytes | bytearray | memoryview, position: int = 0, compressed_ok: bool = False) -> BatchHeader:
    """Validate the batch at `position` (size, magic, CRC, counts) without decoding its records.

    Compressed batches are refused unless `compressed_ok` (a partition log keeps clients' batches
    as bytes whatever their codec; the metadata log never compresses)."""
    available = len(buf) - position
    if available < LOG_OVERHEAD:
        raise CorruptBatch(f"truncated batch header ({available} of {HEADER_SIZE} bytes)", position)
    base_offset, batch_length = struct.unpack_from(">qi", buf, position)
    if batch_length < _MIN_BATCH_LENGTH:
        raise CorruptBatch(f"invalid batch length {batch_length}", position, base_offset)
    size = batch_length + LOG_OVERHEAD
    if size > available:
        raise CorruptBatch(f"truncated batch ({available} of {size} bytes)", position, base_offset)
    _, _, epoch, magic, crc = _PRE.unpack_from(buf, position)
    if magic != MAGIC:
        raise CorruptBatch(f"unsupported magic {magic}", position, base_offset)
    actual = crc32c.crc32c(memoryview(buf)[position + _CRC_START : position + size])
    if actual != crc:
        raise CorruptBatch(f"CRC mismatch (stored {crc:#010x}, computed {actual:#010x})", position, base_offset)
    attributes, last_delta, base_ts, max_ts, pid, pepoch, seq, count = _POST.unpack_from(buf, position + _PRE.size)
    if attributes & COMPRESSION_MASK and not compressed_ok:
        raise CorruptBatch(f"compressed batches are not supported (codec {attributes & 7})", position, base_offset)
    if count < 1 or count != last_delta + 1:
        raise CorruptBatch(f"record count {count} disagrees with last offset delta {last_delta}", position, base_offset)
    return BatchHeader(
        position, size, base_offset, base_offset + last_delta, epoch, crc,
        bool(attributes & CONTROL_FLAG), base_ts, count, max_ts, attributes & COMPRESSION_MASK,
        (attributes >> 3) & 1, pid, pepoch, seq,
    )  # fmt: skip


def _decode_records(buf: bytes, header: BatchHeader) -> tuple[Record, ...]:
    pos = header.position + HEADER_SIZE
    end = header.end_position
    records: list[Record] = []
    for delta in range(header.count):
        length, pos = _read_varint(buf, pos)
        record_end = pos + length
        pos += 1  # attributes
        _ts_delta, pos = _read_varint(buf, pos)
        offset_delta, pos = _read_varint(buf, pos)
        if offset_delta != delta:
            raise ValueError(f"record {delta} has offset delta {offset_delta}")
        n, pos = _read_varint(buf, pos)
        key = None if n < 0 else buf[pos : pos + n]
        pos += max(n, 0)
        n, pos = _read_varint(buf, pos)
        value = None if n < 0 else buf[pos : pos + n]
        pos += max(n, 0)
        headers, pos = _read_varint(buf, pos)
        for _ in range(headers * 2):
            n, pos = _read_varint(buf, pos)
            pos += max(n, 0)
        if pos != record_end or pos > end:
            raise ValueError(f"record {delta} length {length} disagrees with its fields")
        records.append(Record(key, value))
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the last record")
    return tuple(records)


def decode_at(buf: bytes, header: BatchHeader) -> Batch:
    """The batch whose validated header is `header` (from `read_header` on the same buffer)."""
    try:
        records = _decode_records(buf, header)
    except (IndexError, ValueError) as e:
        raise CorruptBatch(f"bad record framing: {e}", header.position, header.base_offset) from None
    return Batch(header.base_offset, header.epoch, records, header.control, header.append_time_ms)


def decode_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> tuple[Batch, int]:
    """The batch at `position` and its size in bytes; raises CorruptBatch."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    header = read_header(data, position)
    return decode_at(data, header), header.size


def decode_batches(buf: bytes | bytearray | memoryview) -> list[Batch]:
    """Every batch of a buffer of concatenated batches; any damage, a trailing partial batch
    included, raises CorruptBatch."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    out: list[Batch] = []
    pos = 0
    while pos < len(data):
        header = read_header(data, pos)
        out.append(decode_at(data, header))
        pos = header.end_position
    return out


@dataclass(frozen=True, slots=True)
class Scan:
    """How far a buffer of concatenated batches is valid: the valid batches' headers, the byte
    length of the valid prefix, and the error that stopped the scan (None if it reached the end)."""

    headers: list[BatchHeader]
    valid_end: int
    error: CorruptBatch | None


def scan(
    buf: bytes | bytearray | memoryview,
    start: int = 0,
    next_offset: int | None = None,
    min_epoch: int | None = None,
    compressed_ok: bool = False,
) -> Scan:
    """Walk batches from `start` until the end or the first damaged batch (torn-tail recovery).

    With `next_offset`, each batch must also begin exactly where the previous one ended in
    offsets (the first at `next_offset`), and with `min_epoch` its epoch must not go below the
    previous one's (the first's not below `min_epoch`): the CRC does not cover the base offset
    or the leader epoch, so these checks are what catches damage there. Either stops the scan
    like damage does.
    """
    headers: list[BatchHeader] = []
    pos = start
    end = len(buf)
    while pos < end:
        try:
            header = read_header(buf, pos, compressed_ok)
        except CorruptBatch as e:
            return Scan(headers, pos, e)
        reason = None
        if next_offset is not None and header.base_offset != next_offset:
            reason = f"base offset {header.base_offset} where {next_offset} was expected"
        elif min_epoch is not None and header.epoch < min_epoch:
            reason = f"epoch {header.epoch} below the previous batch's {min_epoch}"
        if reason is not None:
            return Scan(headers, pos, CorruptBatch(reason, pos, header.base_offset))
        headers.append(header)
        next_offset = header.next_offset if next_offset is not None else None
        min_epoch = header.epoch if min_epoch is not None else None
        pos = header.end_position
    return Scan(headers, pos, None)


def record_timestamps(buf: bytes, header: BatchHeader) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of an uncompressed batch (LogAppendTime: the batch's max
    timestamp for every record); raises CorruptBatch on bad framing or a compressed batch."""
    if header.compression:
        raise CorruptBatch("record timestamps of a compressed batch", header.position, header.base_offset)
    if header.timestamp_type == 1:
        return [(header.base_offset + d, header.max_timestamp) for d in range(header.count)]
    out: list[tuple[int, int]] = []
    pos = header.position + HEADER_SIZE
    try:
        for _ in range(header.count):
            length, pos = _read_varint(buf, pos)
            record_end = pos + length
            ts_delta, p = _read_varint(buf, pos + 1)
            offset_delta, _ = _read_varint(buf, p)
            out.append((header.base_offset + offset_delta, header.append_time_ms + ts_delta))
            pos = record_end
    except (IndexError, ValueError) as e:
        raise CorruptBatch(f"bad record framing: {e}", header.position, header.base_offset) from None
    if pos != header.end_position:
        raise CorruptBatch("record lengths disagree with the batch length", header.position, header.base_offset)
    return out


def valid_length(buf: bytes | bytearray | memoryview) -> int:
    """Length of the longest prefix of `buf` made of whole, valid batches."""
    return scan(buf).valid_end
