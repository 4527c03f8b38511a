"""One controller operation in progress: the future image it changes and the records it emits.

Handlers read and change the controller's uncommitted "future" image through a `Write`: every
emitted record is replayed into that image at once (so later decisions of the same operation
see it) and collected, to be appended to the log. An *atomic* write is appended as one batch
(all or nothing: CreateTopics' Topic + Partition records; its size is bounded by the handler); a
non-atomic one (fencing, heartbeats, elections: each record valid on its own) is split into
batches of at most `MAX_RECORDS_PER_BATCH` records and `MAX_BATCH_BYTES` bytes, as Kafka's
QuorumController does, so that fencing a broker of 100,000 partitions never writes one giant
batch. If an append fails, the controller throws the whole future image away, so a half-done
operation never survives on the controller (batches already appended stand or fall with the log).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.node.controller.ports import ControllerConfig
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import MetadataRecord
from kraftlab.node.raft.ports import Record

MAX_RECORDS_PER_BATCH = 10_000
"""Kafka's QuorumController.MAX_RECORDS_PER_BATCH (also its cap on the records of one user operation)."""
MAX_BATCH_BYTES = 1 << 20
"""A batch fits in one Fetch response of the default fetch size."""


@dataclass
class Write:
    image: MetadataImage
    config: ControllerConfig
    now_ms: int
    next_offset: int
    """Offset the first emitted record will get (broker epochs are record offsets)."""
    rng: random.Random
    atomic: bool = True
    """One batch (all or nothing) when True; split into bounded batches when False."""
    records: list[MetadataRecord] = field(default_factory=list)
    events: list[JournalEvent] = field(default_factory=list)
    """Journal events of decisions taken now (fence/unfence), whatever happens to the response."""
    principal: str = "User:ANONYMOUS"
    """Who asked (the request's principal; a broker's forward carries its client's in an Envelope)."""
    wall_ms: int = 0
    """The wall clock (ms since the epoch), for what Kafka timestamps: delegation tokens."""

    def emit(self, record: MetadataRecord) -> None:
        self.image.apply(record)
        self.records.append(record)

    def offset_of_next_record(self) -> int:
        return self.next_offset + len(self.records)

    def new_topic_id(self) -> uuid.UUID:
        while True:
            tid = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if tid not in self.image.topics:
                return tid

    def fence_event(self, broker: int, action: str, reason: str, epoch: int, **extra: int) -> None:
        self.events.append(
            JournalEvent("fence", {"broker": broker, "action": action, "reason": reason, "epoch": epoch,
                                   "at_ms": self.now_ms, **extra})
        )


def split_batches(
    records: Sequence[Record], max_records: int = MAX_RECORDS_PER_BATCH, max_bytes: int = MAX_BATCH_BYTES
) -> list[list[Record]]:
    """Consecutive chunks of `records`, each of at most `max_records` records and (unless a single
    record is larger) `max_bytes` bytes of keys and values."""
    chunks: list[list[Record]] = []
    chunk: list[Record] = []
    size = 0
    for r in records:
        n = len(r.key or b"") + len(r.value or b"")
        if chunk and (len(chunk) >= max_records or size + n > max_bytes):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        chunks.append(chunk)
    return chunks


@dataclass
class Outcome:
    """A handler's answer: the response's field values (see messages.build), and the fields of
    its `decision` journal events, `error` included (journalled when the response is released)."""

    values: dict[str, Any]
    decisions: list[dict[str, Any]] = field(default_factory=list)

