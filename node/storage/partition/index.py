"""A segment's offset index (`.index`) and time index (`.timeindex`) in Kafka's byte format.

Offset index entries are 8 bytes: the offset relative to the segment's base (int32) and the byte
position of a batch (int32). Time index entries are 12 bytes: a timestamp (int64) and a relative
offset (int32). Both are sparse (an entry per `index.interval.bytes` appended) and sorted; a
lookup gives the last entry at or before the target, from which the segment is walked. Entries
are kept in memory and appended to the file; a torn or zero-filled (Kafka preallocates) tail is
ignored on load, and the segment's recovery rebuilds both from its batches when they disagree.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _EntryFile:
    """A file of fixed-size big-endian entries, mirrored by two sorted in-memory lists."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.keys: list[int] = []
        self.values: list[int] = []
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._dirty = False
        data = self._read_file()
        size = self.ENTRY.size
        for i in range(len(data) // size):
            key, value = self.ENTRY.unpack_from(data, i * size)
            if not self._accept(key, value):
                break
            self.keys.append(key)
            self.values.append(value)
        if len(data) != len(self.keys) * size:  # a torn or preallocated tail: cut it
            os.ftruncate(self.fd, len(self.keys) * size)
            self._dirty = True

    def _read_file(self) -> bytes:
        size = os.fstat(self.fd).st_size
        chunks = []
        pos = 0
        while pos < size:
            chunk = os.pread(self.fd, size - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)

    def _accept(self, key: int, value: int) -> bool:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.keys)

    def _append(self, key: int, value: int) -> None:
        os.pwrite(self.fd, self.ENTRY.pack(key, value), len(self.keys) * self.ENTRY.size)
        self.keys.append(key)
        self.values.append(value)
        self._dirty = True

    def _keep(self, n: int) -> None:
        if n < len(self.keys):
            del self.keys[n:]
            del self.values[n:]
            os.ftruncate(self.fd, n * self.ENTRY.size)
            self._dirty = True

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace every entry (recovery's rebuild)."""
        self._keep(0)
        for key, value in entries:
            self._append(key, value)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.keys, self.values, strict=True))

    def flush(self) -> None:
        if self._dirty:
            os.fdatasync(self.fd)
            self._dirty = False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_EntryFile):
    """Relative offset -> byte position of the batch holding it (keys: relative offsets)."""

    ENTRY = _OFFSET_ENTRY

    def _accept(self, key: int, value: int) -> bool:
        if self.keys and (key <= self.keys[-1] or value <= self.values[-1]):
            return False  # not increasing: the preallocated zeros, or damage
        return key >= 0 and value >= 0

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """The position of the last indexed batch at or before `offset` (0: the segment's start)."""
        i = bisect_right(self.keys, offset - self.base_offset) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_from_position(self, position: int) -> None:
        """Forget entries pointing at or past `position` (the segment was cut there)."""
        self._keep(bisect_right(self.values, position - 1))


class TimeIndex(_EntryFile):
    """Timestamp -> relative offset of the first batch whose max timestamp reached it (keys: timestamps)."""

    ENTRY = _TIME_ENTRY

    def _accept(self, key: int, value: int) -> bool:
        if self.keys and (key <= self.keys[-1] or value < self.values[-1]):
            return False
        return value >= 0 and not (self.keys and key == 0 and value == 0)

    def append(self, timestamp: int, offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """An offset at or before the first record whose timestamp is >= `timestamp`: the offset
        of the last entry with a smaller timestamp (the segment's base when none is)."""
        i = bisect_right(self.keys, timestamp - 1) - 1
        return self.base_offset + self.values[i] if i >= 0 else self.base_offset

    def truncate_from_offset(self, offset: int) -> None:
        """Forget entries for offsets at or after `offset`."""
        rel = offset - self.base_offset
        n = len(self.values)
        while n and self.values[n - 1] >= rel:
            n -= 1
        self._keep(n)
