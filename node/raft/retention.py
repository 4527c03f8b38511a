"""Metadata log retention: which log segments a snapshot lets the node delete, and when.

Kafka keeps the metadata log behind its snapshots until `metadata.max.retention.bytes` (the log
and its snapshots together; default 100 MiB) or `metadata.max.retention.ms` (default 7 days) is
exceeded, and only then deletes what a snapshot covers (KafkaMetadataLog's cleaning). A follower
whose fetch position is still in the kept log is answered with records, or with a diverging epoch
that cuts its tail, rather than with a snapshot — the path a deposed leader takes when it comes
back.

The rule here, a pure decision: walk the segments oldest first; a segment may go only if it lies
wholly below the latest snapshot's end offset, and goes only while the retention limit is exceeded
(the bytes of the kept segments plus the snapshot's above `max_bytes`, or its newest batch older
than `max_ms`). -1 means no limit, as Kafka reads it. The core applies the decision whenever it
writes a snapshot (Kafka's cleaner runs on a 60-s timer; at the node's snapshot rate this is at
least as often).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kraftlab.node.raft.ports import LogSegment

DEFAULT_MAX_BYTES = 100 * 1024 * 1024  # Kafka's metadata.max.retention.bytes
DEFAULT_MAX_MS = 7 * 24 * 60 * 60 * 1000  # Kafka's metadata.max.retention.ms (log.retention.ms's default)
UNLIMITED = -1
MAX_BYTES_KEY = "metadata.max.retention.bytes"
MAX_MS_KEY = "metadata.max.retention.ms"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """`metadata.max.retention.bytes` and `metadata.max.retention.ms`; -1: no limit."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_ms: int = DEFAULT_MAX_MS

    def __post_init__(self) -> None:
        for key, value in ((MAX_BYTES_KEY, self.max_bytes), (MAX_MS_KEY, self.max_ms)):
            if value < UNLIMITED:
                raise ValueError(f"{key}: must be -1 (no limit) or >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class Deletion:
    """Delete every segment ending at or before `log_start` (the new log start offset)."""

    log_start: int
    reason: str  # "bytes" or "ms": the limit the first deleted segment exceeded


def retained_log_start(
    segments: Sequence[LogSegment],
    snapshot_offset: int,
    snapshot_bytes: int,
    policy: RetentionPolicy,
    now_ms: int,
) -> Deletion | None:
    """Which prefix of the log (its `segments`, oldest first) the retention `policy` deletes, given
    the latest snapshot's end offset and size; None when nothing goes."""
    total = snapshot_bytes + sum(s.size_bytes for s in segments)
    start: int | None = None
    reason = ""
    for seg in segments:
        if seg.end_offset > snapshot_offset or seg.end_offset <= seg.base_offset:
            break  # not wholly covered by the snapshot (or empty: the active segment)
        why = _exceeded(policy, total, seg, now_ms)
        if why is None:
            break
        start, total = seg.end_offset, total - seg.size_bytes
        reason = reason or why
    return None if start is None else Deletion(start, reason)


def _exceeded(policy: RetentionPolicy, total_bytes: int, seg: LogSegment, now_ms: int) -> str | None:
    if policy.max_bytes != UNLIMITED and total_bytes > policy.max_bytes:
        return "bytes"
    if policy.max_ms != UNLIMITED and now_ms - seg.last_append_ms > policy.max_ms:
        return "ms"
    return None
