"""One log segment file, with its un-fsynced tail either in the OS page cache or, in the test-only
`lose_unflushed` mode, in process memory (so that SIGKILL loses exactly what was never flushed)."""

from __future__ import annotations

import os
from pathlib import Path


class Segment:
    """Bytes `[0, size)` of a segment: `[0, written)` handed to the OS, of which `[0, durable)` are
    fsynced, and `pending` (lose_unflushed mode only) not yet handed to the OS."""

    __slots__ = ("base_offset", "durable", "fd", "lose_unflushed", "path", "pending", "written")

    def __init__(self, path: Path, base_offset: int, lose_unflushed: bool, create: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.lose_unflushed = lose_unflushed
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        self.written = os.fstat(self.fd).st_size
        self.durable = 0 if create else self.written
        self.pending = bytearray()

    @property
    def size(self) -> int:
        return self.written + len(self.pending)

    @property
    def dirty(self) -> bool:
        return bool(self.pending) or self.durable != self.written

    def read_all(self) -> bytes:
        return self.read(0, self.size)

    def append(self, data: bytes) -> None:
        if self.lose_unflushed:
            self.pending += data
        else:
            self._write(data)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.written)
            self.written += n
            view = view[n:]

    def read(self, position: int, length: int) -> bytes:
        end = min(position + length, self.size)
        parts: list[bytes] = []
        if position < self.written:
            want = min(end, self.written) - position
            chunk = os.pread(self.fd, want, position)
            while len(chunk) < want:  # short reads are legal; loop until done
                more = os.pread(self.fd, want - len(chunk), position + len(chunk))
                if not more:
                    raise OSError(f"{self.path}: file shorter than expected ({position + len(chunk)} < {end})")
                chunk += more
            parts.append(chunk)
        if end > self.written:
            parts.append(bytes(self.pending[max(position - self.written, 0) : end - self.written]))
        return b"".join(parts)

    def flush(self) -> None:
        self.hand_to_os()
        if self.durable != self.written:
            # fdatasync: the data and the metadata needed to read it back (the size), not the times
            os.fdatasync(self.fd)
            self.durable = self.written

    def hand_to_os(self) -> None:
        """Write the pending bytes (lose_unflushed mode) to the OS: an fsync then covers them."""
        if self.pending:
            data = bytes(self.pending)
            self.pending.clear()
            self._write(data)

    def truncate(self, size: int) -> None:
        """Cut the segment to `size` bytes; a cut into OS-visible bytes is fsynced at once."""
        if size >= self.written:
            del self.pending[size - self.written :]
            return
        self.pending.clear()
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.written = size
        self.durable = size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
