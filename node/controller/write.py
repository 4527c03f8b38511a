"""One controller operation in progress: the future image it changes and the records it emits.

Handlers read and change the controller's uncommitted "future" image through a `Write`: every
emitted record is replayed into that image at once (so later decisions of the same operation
see it) and collected, to be appended to the log as one batch. If the append fails, the
controller throws the whole future image away, so a half-done operation never survives.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from node.controller.ports import ControllerConfig
from node.metadata.image import MetadataImage
from node.metadata.journal import JournalEvent
from node.metadata.records import MetadataRecord


@dataclass
class Write:
    image: MetadataImage
    config: ControllerConfig
    now_ms: int
    next_offset: int
    """Offset the first emitted record will get (broker epochs are record offsets)."""
    rng: random.Random
    records: list[MetadataRecord] = field(default_factory=list)
    events: list[JournalEvent] = field(default_factory=list)
    """Journal events of decisions taken now (fence/unfence), whatever happens to the response."""

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

    def fence_event(self, broker: int, action: str, reason: str, epoch: int) -> None:
        self.events.append(
            JournalEvent("fence", {"broker": broker, "action": action, "reason": reason, "epoch": epoch})
        )


@dataclass
class Outcome:
    """A handler's answer: the response's field values (see messages.build), and the fields of
    its `decision` journal events, `error` included (journalled when the response is released)."""

    values: dict[str, Any]
    decisions: list[dict[str, Any]] = field(default_factory=list)

