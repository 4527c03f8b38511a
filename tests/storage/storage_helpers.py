"""Builders shared by the storage tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

from kraftlab.node.raft.ports import Batch, Record


def make_batch(base: int, epoch: int, n: int = 2, control: bool = False, size: int = 20) -> Batch:
    """A batch of `n` records whose content derives from their offsets (so mix-ups show)."""
    records = tuple(Record(f"k{base + i}".encode(), bytes([(base + i) % 251]) * size) for i in range(n))
    return Batch(base, epoch, records, control, 1_700_000_000_000 + base)


def batches(start: int, epochs: list[int], n: int = 2) -> list[Batch]:
    """Consecutive batches from `start`, one per entry of `epochs`, `n` records each."""
    out = []
    for epoch in epochs:
        out.append(make_batch(start, epoch, n))
        start += n
    return out
