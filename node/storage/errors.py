"""Exceptions raised by on-disk storage: one base class, one subclass per kind of damage or misuse."""

from __future__ import annotations

from kraftlab.node.raft.ports import LogCorruption


class StorageError(Exception):
    """Base class of every error node.storage raises on purpose."""


class CorruptBatch(StorageError, ValueError):
    """A record batch failed validation (size, magic, CRC, record framing). Also a ValueError:
    bad input, as the in-memory stores report it.

    `position` is the byte position of the batch in the buffer or file it was read from;
    `offset` its base offset when the header was readable enough to tell, else None.
    """

    def __init__(self, reason: str, position: int, offset: int | None = None, path: str | None = None) -> None:
        self.reason = reason
        self.position = position
        self.offset = offset
        self.path = path
        where = f"{path}:" if path else ""
        at = f" (base offset {offset})" if offset is not None else ""
        super().__init__(f"corrupt record batch at {where}{position}{at}: {reason}")

    def in_file(self, path: str, position_delta: int = 0) -> CorruptBatch:
        """The same error, located in `path` at a position shifted by `position_delta`."""
        return CorruptBatch(self.reason, self.position + position_delta, self.offset, path)


class CorruptStateFile(StorageError):
    """A small state file (quorum-state, hw-checkpoint, meta.properties) exists but cannot be parsed.

    Never treated as empty: a node that lost its vote or its high-water mark must not start as if new.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class CorruptSnapshot(StorageError, ValueError):
    """A snapshot file failed validation (CRC, header/footer, trailing bytes). Also a ValueError,
    which is what node.sim's in-memory store raises for the same failure."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"corrupt snapshot {path}: {reason}")


class CommittedDataDamaged(LogCorruption):
    """The log is damaged or missing records below the checkpointed high-water mark (or the
    checkpoint itself is unreadable): the node must stop rather than serve it.

    A `ports.LogCorruption`, carrying what a `corruption` journal event needs: `path` (file or
    directory), `offset` (the first offset that cannot be served, -1 if unknown), `reason`, `hw`.
    """

    def __init__(self, message: str, path: str, offset: int, reason: str, hw: int) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        self.hw = hw
        super().__init__(message)
