"""Kafka's leader-epoch cache: the start offset of every epoch present in a log, for endOffsetForEpoch."""

from __future__ import annotations

from bisect import bisect_right

from kraftlab.node.raft.ports import OffsetAndEpoch


class EpochCache:
    """(epoch, start offset) pairs in increasing order of both, rebuilt from the batches on open."""

    def __init__(self) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def latest(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that a batch of `epoch` begins at `start_offset` (epochs never go back in a log)."""
        if not self._epochs or epoch > self._epochs[-1]:
            self._epochs.append(epoch)
            self._starts.append(start_offset)
        elif epoch < self._epochs[-1]:
            raise ValueError(
                f"epoch {epoch} at offset {start_offset} is below the log's latest epoch {self._epochs[-1]}"
            )

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()

    def truncate_from_start(self, start_offset: int, log_end: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly before it, clip the first kept one."""
        if start_offset >= log_end:
            self._epochs.clear()
            self._starts.clear()
            return
        keep = max(bisect_right(self._starts, start_offset) - 1, 0)
        del self._epochs[:keep]
        del self._starts[:keep]
        if self._starts and self._starts[0] < start_offset:
            self._starts[0] = start_offset

    def epoch_at(self, offset: int, default: int) -> int:
        """The epoch of the record at `offset` (`default` if it precedes every entry)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else default

    def end_offset_for(self, epoch: int, log_end: int, fallback: OffsetAndEpoch) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` present, with the exclusive end offset of its records;
        `fallback` (the log start and the epoch before it) when no such epoch is present."""
        i = bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return fallback
        end = self._starts[i + 1] if i + 1 < len(self._starts) else log_end
        return OffsetAndEpoch(end, self._epochs[i])
