"""One segment of a partition log: the `.log` file (node.storage.segment.Segment) with its offset
and time indexes, the batches' positions found through the sparse index and a walk of headers."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlab.node.storage.batches import LOG_OVERHEAD, BatchHeader
from kraftlab.node.storage.partition.index import OffsetIndex, TimeIndex
from kraftlab.node.storage.partition.layout import index_path, log_path, time_index_path
from kraftlab.node.storage.segment import Segment

# base offset, batch length, leader epoch, magic, crc, attributes, last offset delta, base ts, max ts
_HEAD = struct.Struct(">qiibIhiqq")
_WALK_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Located:
    """A batch found by a walk: its position, size, first and last offset, epoch and max timestamp."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    epoch: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, create: bool = False) -> None:
        self.base_offset = base_offset
        self.file = Segment(log_path(directory, base_offset), base_offset, create=create)
        self.index = OffsetIndex(index_path(directory, base_offset), base_offset)
        self.time_index = TimeIndex(time_index_path(directory, base_offset), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.first_append_ms: int | None = None
        self._since_entry = 0

    @property
    def size(self) -> int:
        return self.file.size

    @property
    def empty(self) -> bool:
        return self.file.size == 0

    def rebuild(self, headers: Sequence[BatchHeader], now_ms: int) -> None:
        """Recovery: the segment holds exactly `headers`; rebuild both indexes if they disagree."""
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        since = 0
        max_ts = -1
        for i, h in enumerate(headers):
            if i > 0 and since > self.index_interval_bytes:
                offsets.append((h.last_offset - self.base_offset, h.position))
                since = 0
            since += h.size
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                if not times or max_ts > times[-1][0]:
                    times.append((max_ts, h.last_offset - self.base_offset))
        # The index is sparse, so any increasing set of true entries serves: keep a file whose
        # entries all point at real batch starts, rebuild the rest.
        starts = {h.position: h for h in headers}
        sound = all(
            p in starts and starts[p].base_offset <= self.base_offset + k <= starts[p].last_offset
            for k, p in self.index.entries()
        )
        if not sound:
            self.index.reset(offsets)
        if self.time_index.entries() != times[: len(self.time_index)] or not sound:
            self.time_index.reset(times)
        self._since_entry = since
        self.max_timestamp = max_ts
        self.next_offset = headers[-1].next_offset if headers else self.base_offset
        self.first_append_ms = now_ms if headers else None

    def append(self, data: bytes, headers: Sequence[BatchHeader], now_ms: int) -> None:
        """Append validated batches (`headers` located in `data`) at the end of the file."""
        start = self.file.size
        self.file.append(data)
        for h in headers:
            if self._since_entry > self.index_interval_bytes:
                self.index.append(h.last_offset, start + h.position)
                self._since_entry = 0
            self._since_entry += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.time_index.append(h.max_timestamp, h.last_offset)
        if headers:
            self.next_offset = headers[-1].next_offset
            if self.first_append_ms is None:
                self.first_append_ms = now_ms

    def walk(self, position: int, end: int | None = None) -> list[Located]:
        """The batches from `position` (a batch start) to `end` (default: the end of the file)."""
        end = self.file.size if end is None else min(end, self.file.size)
        out: list[Located] = []
        while position < end:
            chunk = self.file.read(position, min(_WALK_CHUNK, end - position))
            pos = 0
            while pos + _HEAD.size <= len(chunk):
                base, length, epoch, _m, _c, _a, last_delta, _b, max_ts = _HEAD.unpack_from(chunk, pos)
                size = length + LOG_OVERHEAD
                out.append(Located(position + pos, size, base, base + last_delta, epoch, max_ts))
                pos += size
            if pos == 0:  # a header that does not fit in what remains: read it alone
                head = self.file.read(position, _HEAD.size)
                if len(head) < _HEAD.size:
                    break
                base, length, epoch, _m, _c, _a, last_delta, _b, max_ts = _HEAD.unpack(head)
                size = length + LOG_OVERHEAD
                out.append(Located(position, size, base, base + last_delta, epoch, max_ts))
                pos = size
            position += pos
        return out

    def find(self, offset: int) -> Located | None:
        """The first batch whose last offset is >= `offset` (None past the segment's end)."""
        if offset >= self.next_offset:
            return None
        position = self.index.lookup(offset)
        while True:
            batches = self.walk(position, position + _WALK_CHUNK)
            if not batches:
                return None
            for b in batches:
                if b.last_offset >= offset:
                    return b
            position = batches[-1].position + batches[-1].size

    def read(self, start: Located, max_bytes: int, max_offset: int, min_one: bool) -> bytes:
        """Whole batches from `start` while they end at or before `max_offset` (exclusive) and fit
        in `max_bytes` (the first one always, when `min_one`)."""
        if start.next_offset > max_offset:
            return b""
        if start.size > max_bytes:
            return self.file.read(start.position, start.size) if min_one else b""
        end = start.position
        for b in self.walk(start.position, start.position + max_bytes):
            if b.next_offset > max_offset or b.position + b.size - start.position > max_bytes:
                break
            end = b.position + b.size
        return self.file.read(start.position, end - start.position)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; the segment's new next offset."""
        found = self.find(offset)
        if found is None:
            return self.next_offset
        self.file.truncate(found.position)
        self.index.truncate_from_position(found.position)
        self.time_index.truncate_from_offset(found.base_offset)
        self.next_offset = found.base_offset
        self.max_timestamp = max((b.max_timestamp for b in self.walk(0)), default=-1)
        self._since_entry = self.index_interval_bytes + 1 if found.position else 0
        if self.file.size == 0:
            self.first_append_ms = None
        return self.next_offset

    def flush(self) -> None:
        self.file.flush()
        self.index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self.file.close()
        self.index.close()
        self.time_index.close()

    def delete(self) -> None:
        self.file.delete()
        self.index.delete()
        self.time_index.delete()
