"""Log recovery on open: scan every segment, find the first torn, CRC-bad or discontinuous batch,
and say what must go. Pure decisions over bytes already read; `node.storage.log` applies them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.storage.batches import BatchHeader, scan


@dataclass(frozen=True, slots=True)
class Damage:
    """The first damage found: everything from `position` in `path` on (and every later segment) is dropped."""

    path: str
    position: int
    offset: int  # the first offset lost: the recovered log end
    reason: str
    dropped_bytes: int
    deleted_segments: tuple[str, ...]
    old_end_offset: int  # the highest end offset any readable batch at or after the damage claimed


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening the log found and did, for the caller's journal (`truncate`, `corruption`, `snapshot`)."""

    start_offset: int
    end_offset: int
    segments: int
    batches: int
    hw_checkpoint: int
    damage: Damage | None = None
    reset_to_snapshot: OffsetAndEpoch | None = None

    def journal_events(self) -> list[dict[str, object]]:
        """The node-journal events (docs/contracts.md) this recovery calls for, without ts/mono/node."""
        events: list[dict[str, object]] = [{"ev": "recovery", "hw_checkpoint": self.hw_checkpoint,
                                             "log_start": self.start_offset, "log_end": self.end_offset}]
        if self.damage is not None:
            d = self.damage
            events.append({"ev": "corruption", "path": d.path, "offset": d.offset, "reason": d.reason,
                           "below_hw": False})  # fmt: skip
            events.append({"ev": "truncate", "to": d.offset, "from": d.old_end_offset, "reason": "corrupt-tail"})
        if self.reset_to_snapshot is not None:
            events.append({"ev": "truncate", "to": self.reset_to_snapshot.offset, "from": self.end_offset,
                           "reason": "snapshot"})  # fmt: skip
        return events


@dataclass(slots=True)
class SegmentScan:
    base_offset: int
    path: Path
    data: bytes
    headers: list[BatchHeader] = field(default_factory=list)


def scan_segments(
    segments: Sequence[tuple[int, Path, bytes]], compressed_ok: bool = False
) -> tuple[list[SegmentScan], Damage | None]:
    """The segments to keep (each with its valid batches, the last one possibly cut short) and the
    first damage, given `(base offset, path, content)` sorted by base offset. `compressed_ok`:
    clients' compressed batches are valid (partition logs)."""
    kept: list[SegmentScan] = []
    expected = segments[0][0] if segments else 0
    epoch = 0
    for i, (base, path, data) in enumerate(segments):
        if base != expected:
            reason = f"segment starts at offset {base} but the previous one ends at {expected}"
            return kept, _damage(0, expected, reason, segments[i:], True, compressed_ok)
        result = scan(data, 0, expected, epoch, compressed_ok)
        seg = SegmentScan(base, path, data, result.headers)
        if result.headers:
            expected = result.headers[-1].next_offset
            epoch = result.headers[-1].epoch
        if result.error is not None:
            keep = result.valid_end > 0 or not kept  # an emptied segment survives only as the first one
            if keep:
                kept.append(seg)
            damage = _damage(result.valid_end, expected, result.error.reason, segments[i:], not keep, compressed_ok)
            return kept, damage
        kept.append(seg)
    return kept, None


def _damage(
    position: int,
    offset: int,
    reason: str,
    rest: Sequence[tuple[int, Path, bytes]],
    delete_first: bool,
    compressed_ok: bool = False,
) -> Damage:
    """Damage at `position` of the first of `rest`: the rest of that segment (all of it when
    `delete_first`) and every later segment go."""
    old_end = offset
    dropped = 0
    deleted: list[str] = []
    for j, (_, path, data) in enumerate(rest):
        tail = data[position:] if j == 0 else data
        dropped += len(tail)
        if j > 0 or delete_first:
            deleted.append(str(path))
        for h in scan(tail, compressed_ok=compressed_ok).headers:
            old_end = max(old_end, h.next_offset)
    return Damage(str(rest[0][1]), position, offset, reason, dropped, tuple(deleted), old_end)
