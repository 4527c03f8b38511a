"""In-memory implementations of the three storage ports, with crash semantics.

`crash()` loses everything not flushed (log appends past the durable end, partial snapshots);
`wipe()` loses everything (a disk replaced). The quorum state is durable when `write` returns.
Used by the simulator and by unit tests of the core.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Sequence

import crc32c

from kraftlab.node.raft.ports import Batch, LogSegment, OffsetAndEpoch, QuorumStateData, Record

_APPROX_RECORD_BYTES = 64


class MemoryLog:
    """A ReplicatedLog held in a list of batches; `_flushed` is the durable end offset."""

    def __init__(self) -> None:
        self.wipe()

    def wipe(self) -> None:
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._start = 0
        self._start_epoch = 0
        self._flushed = 0
        self._end = 0

    def crash(self) -> None:
        """Lose every record past the durable end."""
        if self.end_offset() > self._flushed:
            self.truncate_to(self._flushed)

    def batches(self) -> list[Batch]:
        return list(self._batches)

    def start_offset(self) -> int:
        return self._start

    def end_offset(self) -> int:
        return self._end

    def _reset_end(self) -> None:
        self._end = self._batches[-1].next_offset if self._batches else self._start

    def last_epoch(self) -> int:
        return self._batches[-1].epoch if self._batches else self._start_epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        for batch in reversed(self._batches):
            if batch.epoch <= epoch:
                return OffsetAndEpoch(batch.next_offset, batch.epoch)
        return OffsetAndEpoch(self._start, self._start_epoch)  # as DiskLog: the log start and the epoch before it

    def append(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset != self.end_offset():
                raise ValueError(f"batch at {batch.base_offset} does not continue the log at {self.end_offset()}")
            if batch.epoch < self.last_epoch():
                raise ValueError(f"batch epoch {batch.epoch} below the log's last epoch {self.last_epoch()}")
            self._batches.append(batch)
            self._bases.append(batch.base_offset)
            self._end = batch.next_offset

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        i = bisect_left(self._bases, start_offset)
        if i == len(self._bases) or self._bases[i] != start_offset:
            if start_offset == self.end_offset():
                return []
            raise ValueError(f"offset {start_offset} is not a batch boundary in [{self._start}, {self.end_offset()})")
        out = [self._batches[i]]
        budget = max_bytes - len(out[0].records) * _APPROX_RECORD_BYTES
        for batch in self._batches[i + 1 :]:
            budget -= len(batch.records) * _APPROX_RECORD_BYTES
            if budget < 0:
                break
            out.append(batch)
        return out

    def truncate_to(self, offset: int) -> None:
        i = bisect_left(self._bases, offset)
        if i > 0 and self._batches[i - 1].next_offset > offset:
            cut = self._batches[i - 1]
            self._batches[i - 1] = Batch(
                cut.base_offset, cut.epoch, cut.records[: offset - cut.base_offset], cut.control, cut.append_time_ms
            )
        del self._batches[i:]
        del self._bases[i:]
        self._reset_end()
        self._flushed = min(self._flushed, self._end)

    def flush(self) -> None:
        self._flushed = self._end

    def flushed_end_offset(self) -> int:
        return self._flushed

    def reset_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self._batches.clear()
        self._bases.clear()
        self._start = snapshot_id.offset
        self._start_epoch = snapshot_id.epoch
        self._flushed = self._end = self._start

    def segments(self) -> list[LogSegment]:
        """One segment per batch, of about `_APPROX_RECORD_BYTES` a record."""
        return [
            LogSegment(b.base_offset, b.next_offset, len(b.records) * _APPROX_RECORD_BYTES, b.append_time_ms)
            for b in self._batches
        ]

    def delete_before(self, offset: int) -> None:
        i = 0
        while i < len(self._batches) and self._batches[i].next_offset <= offset:
            i += 1
        if i:
            self._start = self._batches[i - 1].next_offset
            self._start_epoch = self._batches[i - 1].epoch
            del self._batches[:i]
            del self._bases[:i]
            self._reset_end()


class MemoryQuorumStateStore:
    def __init__(self) -> None:
        self.state: QuorumStateData | None = None
        self.writes = 0

    def read(self) -> QuorumStateData | None:
        return self.state

    def write(self, state: QuorumStateData) -> None:
        self.state = state
        self.writes += 1

    def wipe(self) -> None:
        self.state = None


_LEN = struct.Struct(">i")
_CRC = struct.Struct(">I")


def encode_records(records: Sequence[Record]) -> bytes:
    """A small self-checking byte form for in-memory snapshots: CRC32C, then length-prefixed key/value pairs."""
    parts: list[bytes] = []
    for r in records:
        for part in (r.key, r.value):
            parts.append(_LEN.pack(-1 if part is None else len(part)))
            if part:
                parts.append(part)
    body = b"".join(parts)
    return _CRC.pack(crc32c.crc32c(body)) + body


def decode_records(data: bytes) -> list[Record]:
    if len(data) < 4 or _CRC.unpack_from(data)[0] != crc32c.crc32c(data[4:]):
        raise ValueError("snapshot bytes fail their CRC")
    out: list[Record] = []
    pos = 4
    fields: list[bytes | None] = []
    while pos < len(data):
        n = _LEN.unpack_from(data, pos)[0]
        pos += 4
        fields.append(None if n < 0 else data[pos : pos + n])
        pos += max(n, 0)
        if len(fields) == 2:
            out.append(Record(fields[0], fields[1]))
            fields = []
    return out


def _split(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """(control records, state machine records) of a decoded in-memory snapshot."""
    if not records or records[0].key is not None or len(records[0].value or b"") != _LEN.size:
        raise ValueError("snapshot bytes lack their control record count")
    n = _LEN.unpack(records[0].value or b"")[0]
    if not 0 <= n < len(records):
        raise ValueError(f"snapshot bytes claim {n} control records")
    return records[1 : 1 + n], records[1 + n :]


class MemorySnapshotStore:
    """A SnapshotStore of byte strings; partial (fetching) snapshots are lost by `crash()`."""

    def __init__(self) -> None:
        self.wipe()

    def wipe(self) -> None:
        self._frozen: dict[OffsetAndEpoch, bytes] = {}
        self._partial: dict[OffsetAndEpoch, bytearray] = {}
        self._latest: OffsetAndEpoch | None = None

    def crash(self) -> None:
        self._partial.clear()

    def latest(self) -> OffsetAndEpoch | None:
        return self._latest

    def _add(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._frozen[snapshot_id] = data
        if self._latest is None or snapshot_id > self._latest:
            self._latest = snapshot_id

    def ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._frozen)

    def write(
        self,
        snapshot_id: OffsetAndEpoch,
        records: Sequence[Record],
        append_time_ms: int,
        control_records: Sequence[Record] = (),
    ) -> None:
        # The first pair counts the control records that follow it (the header batch's share).
        count = Record(None, _LEN.pack(len(control_records)))
        self._add(snapshot_id, encode_records([count, *control_records, *records]))

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return len(self._frozen[snapshot_id])

    def read_bytes(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self._frozen[snapshot_id][position : position + max_bytes]

    def write_bytes(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        if position == 0:
            self._partial[snapshot_id] = bytearray()
        buf = self._partial.setdefault(snapshot_id, bytearray())
        if position != len(buf):
            raise ValueError(f"chunk at {position} does not continue the partial snapshot at {len(buf)}")
        buf.extend(data)

    def partial_size(self, snapshot_id: OffsetAndEpoch) -> int:
        """How many bytes of a snapshot being fetched the store holds (0: none)."""
        return len(self._partial.get(snapshot_id, b""))

    def freeze(self, snapshot_id: OffsetAndEpoch) -> None:
        data = bytes(self._partial.pop(snapshot_id, b""))
        _split(decode_records(data))  # validates
        self._add(snapshot_id, data)

    def read_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        return _split(decode_records(self._frozen[snapshot_id]))[1]

    def read_control_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        return _split(decode_records(self._frozen[snapshot_id]))[0]

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> None:
        for sid in [s for s in self._frozen if s < snapshot_id]:
            del self._frozen[sid]
        self._partial.clear()
