"""The seams of the partition replication core: the partition log it appends to and reads from
(`ReplicaLog`, which node.storage.partition's PartitionLog is) and the store of a broker's logs
(`LogStore`, which its LogManager is)."""

from __future__ import annotations

import uuid
from typing import Protocol

from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.storage.partition.config import LogConfig
from kraftlab.node.storage.partition.log import AppendInfo


class ReplicaLog(Protocol):
    config: LogConfig
    log_start_offset: int
    high_watermark: int

    @property
    def log_end_offset(self) -> int: ...

    def latest_epoch(self) -> int | None: ...

    def epoch_at(self, offset: int) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def update_high_watermark(self, hw: int) -> int: ...

    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: int) -> AppendInfo: ...

    def append_as_follower(self, records: bytes, now_ms: int) -> AppendInfo: ...

    def assign_epoch_start(self, epoch: int, offset: int) -> None: ...

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, min_one: bool = True) -> bytes: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None: ...

    def max_timestamp(self) -> tuple[int, int, int] | None: ...

    def truncate_to(self, offset: int) -> int: ...

    def truncate_fully_and_start_at(self, offset: int) -> int: ...


class LogStore(Protocol):
    def get(self, topic: str, partition: int) -> ReplicaLog | None: ...

    def get_or_create(self, topic: str, partition: int, topic_id: uuid.UUID | None, now_ms: int,
                      directory: uuid.UUID | None = None) -> ReplicaLog:
        """The partition's log, created if new: in the log directory whose id is `directory` (the
        controller's placement, PartitionRecord's Directories) when this store has it."""
        ...

    def delete(self, topic: str, partition: int) -> None: ...

    def reconfigure(self, topic: str) -> None:
        """The topic's configs changed: its logs take the new settings."""
        ...
