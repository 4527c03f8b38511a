"""The seams between the sans-IO Raft core and storage.

The core reads and mutates the replicated log, the quorum-state store and the snapshot store
only through these protocols. Two implementations exist for each: in memory (`node.sim`, with
crash loss of everything not yet flushed) and on disk (`node.storage`). Every call is
synchronous and deterministic; the core decides *when* to flush (voters flush before they
acknowledge; the quorum-state is durable when `write` returns).

Offsets are Kafka offsets: a log holds `[start_offset, end_offset)`; a snapshot id's `offset`
is the *exclusive* end offset of the log prefix it replaces (KIP-630), its `epoch` the epoch of
the last record it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, order=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the metadata log: a metadata record frame, or a control record."""

    key: bytes | None
    value: bytes | None

    def crc(self) -> int:
        """CRC32C of key and value: what node journals report per offset (batch-independent)."""
        return record_crc(self.key, self.value)


def record_crc(key: bytes | None, value: bytes | None) -> int:
    import crc32c  # here, not at the top: the package looks its own version up on import (about 40 ms),
    # which every `kraft-node` command (`--help` too) would pay through node.admin → storage.errors

    c = crc32c.crc32c(key or b"")
    return crc32c.crc32c(value or b"", c)


@dataclass(frozen=True, slots=True)
class Batch:
    """One Kafka record batch of the metadata log.

    `epoch` is the partition leader epoch of the leader that wrote it; `control` marks a
    control batch (LeaderChangeMessage, snapshot header/footer); `append_time_ms` is the
    leader's wall clock at append (the batch's base timestamp).
    """

    base_offset: int
    epoch: int
    records: tuple[Record, ...]
    control: bool = False
    append_time_ms: int = 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


@dataclass(frozen=True, slots=True)
class LogSegment:
    """One segment of the log as retention sees it: offsets `[base_offset, end_offset)`, its bytes,
    and the append time of its newest batch (the leader's clock, as `Batch.append_time_ms`)."""

    base_offset: int
    end_offset: int
    size_bytes: int
    last_append_ms: int


class LogCorruption(Exception):
    """Raised when storage finds damage it must not serve (for example below the high-water mark)."""


class ReplicatedLog(Protocol):
    """The metadata log of one node (Kafka's ReplicatedLog, reduced to what the core needs)."""

    def start_offset(self) -> int:
        """First offset held in the log (the latest snapshot's end offset once the prefix is gone)."""
        ...

    def end_offset(self) -> int:
        """Log end offset (exclusive): the offset the next appended record gets."""
        ...

    def last_epoch(self) -> int:
        """Epoch of the last batch, or of the latest snapshot when the log holds none; 0 if empty."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's endOffsetForEpoch: the largest epoch <= `epoch` present and the (exclusive) end
        offset of that epoch's records; falls back to the snapshot id, or (0, 0) when empty."""
        ...

    def append(self, batches: Sequence[Batch]) -> None:
        """Append batches whose base offsets continue the log exactly; not durable until `flush`."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        """Batches from `start_offset` (which must be a batch boundary within the log), at least
        one batch if any exists there, then up to about `max_bytes`."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after `offset` (never below the high-water mark, which
        the core guarantees)."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable."""
        ...

    def flushed_end_offset(self) -> int:
        """End offset of the durable prefix."""
        ...

    def reset_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop the whole log and start it at the snapshot's end offset (a follower that just
        fetched a snapshot it could not reach by log)."""
        ...

    def segments(self) -> list[LogSegment]:
        """The log's segments (batches, for a log held in memory), oldest first."""
        ...

    def delete_before(self, offset: int) -> None:
        """Delete whole segments/batches that end at or before `offset` (which a snapshot covers):
        the log then starts at the first segment kept."""
        ...


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """What the `quorum-state` file holds: KIP-595's persisted election state."""

    leader_epoch: int
    leader_id: int | None
    voted_id: int | None
    voters: tuple[int, ...]


class QuorumStateStore(Protocol):
    def read(self) -> QuorumStateData | None:
        """The last durably written state, or None for a node that never wrote one."""
        ...

    def write(self, state: QuorumStateData) -> None:
        """Durable when this returns (tmp file, fsync, rename, fsync of the directory)."""
        ...


class SnapshotStore(Protocol):
    """Snapshots are files of record batches: a header control record, the state machine's
    records, a footer control record. On the wire (FetchSnapshot) they move as raw bytes."""

    def latest(self) -> OffsetAndEpoch | None: ...

    def ids(self) -> list[OffsetAndEpoch]:
        """Frozen (complete) snapshots, oldest first."""
        ...

    def write(
        self,
        snapshot_id: OffsetAndEpoch,
        records: Sequence[Record],
        append_time_ms: int,
        control_records: Sequence[Record] = (),
    ) -> None:
        """Write a complete snapshot (header, records in batches, footer) durably and freeze it;
        `control_records` (KIP-853's KRaftVersion and KRaftVoters) follow the header."""
        ...

    def size(self, snapshot_id: OffsetAndEpoch) -> int: ...

    def read_bytes(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes: ...

    def write_bytes(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Receive a chunk of a snapshot being fetched; positions arrive in order. A chunk at
        position 0 restarts the fetch (drops any partial data of that snapshot id)."""
        ...

    def freeze(self, snapshot_id: OffsetAndEpoch) -> None:
        """Validate (CRCs, header/footer) and make a fetched snapshot complete and durable; a
        snapshot failing validation raises ValueError and its partial data is dropped."""
        ...

    def read_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        """The state machine's records of a frozen snapshot (header and footer excluded)."""
        ...

    def read_control_records(self, snapshot_id: OffsetAndEpoch) -> list[Record]:
        """The membership control records written after the header of a frozen snapshot (none for
        a static quorum's)."""
        ...

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> None:
        """Delete every snapshot older than `snapshot_id`, and any partial one."""
        ...


class StateMachine(Protocol):
    """What sits on top of Raft (the controller, the broker's metadata replay) — Kafka's
    RaftClient.Listener. The core's driver calls these in log order, from one thread, with
    committed data only. Callbacks are pure state changes: no I/O and no wall clock."""

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        """Replace all state by the snapshot's (on start, or when a follower fetched one)."""
        ...

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        """Batches below the new high-water mark, in order, never twice; control batches
        included (a state machine skips what it does not understand)."""
        ...

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        """A new epoch began. When `local_is_leader`, the node may call the core's `append` once
        `handle_commit` has caught up to the leader's own LeaderChangeMessage."""
        ...

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        """The committed state as records, with the (exclusive end offset, epoch) it covers,
        or None when nothing was applied since the last snapshot."""
        ...
