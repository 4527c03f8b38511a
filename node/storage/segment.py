"""One log segment file: bytes handed to the OS at append, made durable by `flush` (fdatasync).

What a power loss would take (the written but un-fsynced tail) is lost for real when the data
directory is on the disk-fault filesystem (kraftlab.nemesis.diskfs): the node has no switch for it."""

from __future__ import annotations

import os
from pathlib import Path


class Segment:
    """Bytes `[0, written)` of a segment, handed to the OS, of which `[0, durable)` are fsynced."""

    __slots__ = ("base_offset", "durable", "fd", "last_append_ms", "path", "written")

    def __init__(self, path: Path, base_offset: int, create: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        self.written = os.fstat(self.fd).st_size
        self.durable = 0 if create else self.written
        self.last_append_ms = -1
        """The append time of the newest batch written to it (its owner keeps it; retention reads it)."""

    @property
    def size(self) -> int:
        return self.written

    @property
    def dirty(self) -> bool:
        return self.durable != self.written

    def read_all(self) -> bytes:
        return self.read(0, self.size)

    def append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.written)
            self.written += n
            view = view[n:]

    def read(self, position: int, length: int) -> bytes:
        end = min(position + length, self.written)
        if position >= end:
            return b""
        want = end - position
        chunk = os.pread(self.fd, want, position)
        while len(chunk) < want:  # short reads are legal; loop until done
            more = os.pread(self.fd, want - len(chunk), position + len(chunk))
            if not more:
                raise OSError(f"{self.path}: file shorter than expected ({position + len(chunk)} < {end})")
            chunk += more
        return chunk

    def flush(self) -> None:
        if self.durable != self.written:
            # fdatasync: the data and the metadata needed to read it back (the size), not the times
            os.fdatasync(self.fd)
            self.durable = self.written

    def truncate(self, size: int) -> None:
        """Cut the segment to `size` bytes; a cut into OS-visible bytes is fsynced at once."""
        if size >= self.written:
            return
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
