"""Committed-metadata replay: the part of the Raft StateMachine that controllers and brokers share.

`CommittedReplay` applies committed batches (never twice, control batches skipped) and loaded
snapshots to a `MetadataImage`, records the `apply` journal events (offset, record type, CRC and
the record's bytes, so a checker can decode and replay the committed log on its own) and `image`
events (the image's semantic digest after each snapshot load and every so many records, which a
checker compares with its own replay), and produces snapshot records of the committed image. The
controller and the broker each wrap one and add their own reactions per batch.
"""

from __future__ import annotations

import base64
import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import Any

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode,
    from_log_record,
    to_log_record,
    type_name,
)
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record

IMAGE_EVERY_RECORDS = 50
"""Applied records between two `image` journal events (more for large images)."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection while a large image is built: its objects all live on, and the
    collector would scan the growing heap again and again (loading 100,000 partitions took three
    times as long). Reference counting still frees garbage; the collector resumes afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CommittedReplay:
    """The committed image of one node, with the offset (exclusive) and epoch it reflects."""

    def __init__(self, journal_applies: bool = True) -> None:
        self.image = MetadataImage()
        self.next_offset = 0
        self.last_epoch = 0
        self.last_snapshot: OffsetAndEpoch | None = None
        self.new_bytes = 0
        """Bytes of metadata records applied since the last snapshot (metadata.snapshot.max.new.record.bytes)."""
        self.journal_applies = journal_applies
        self.events: list[JournalEvent] = []
        self._since_image = 0

    def take_events(self) -> list[JournalEvent]:
        out, self.events = self.events, []
        return out

    def load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        with gc_paused():
            self.image = MetadataImage.from_records(decode(r.value) for r in records if r.value is not None)
        self.next_offset = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        self.last_snapshot = snapshot_id
        self.new_bytes = 0
        self._journal_image("snapshot-load")

    def _journal_image(self, reason: str) -> None:
        """An `image` event: the semantic digest of the image at `next_offset` (exclusive)."""
        self._since_image = 0
        if self.journal_applies:
            digest, sections, entries = self.image.image_digests()
            self.events.append(JournalEvent("image", {"offset": self.next_offset, "digest": digest,
                                                      "sections": sections, "entries": entries, "reason": reason}))

    def _image_interval(self) -> int:
        """Records between periodic `image` events: at least IMAGE_EVERY_RECORDS, more for a large
        image, so digesting it costs a bounded share of the replay."""
        return max(IMAGE_EVERY_RECORDS, self.image.partition_count() // 4)

    def apply_batch(self, batch: Batch) -> bool:
        """Apply one committed batch; False if it was already applied (below `next_offset`)."""
        if batch.next_offset <= self.next_offset:
            return False
        if not batch.control:
            for i, rec in enumerate(batch.records):
                offset = batch.base_offset + i
                if offset < self.next_offset:
                    continue
                metadata = from_log_record(rec)
                if metadata is None:
                    continue
                self.image.apply(metadata)
                self.new_bytes += len(rec.value or b"")
                self._since_image += 1
                if self.journal_applies:
                    self.events.append(
                        JournalEvent("apply", {"offset": offset, "type": type_name(metadata), "crc": rec.crc(),
                                               "batch_end": batch.next_offset, **_left(self.image, metadata),
                                               "value": base64.b64encode(rec.value or b"").decode()})
                    )
        self.next_offset = batch.next_offset
        self.last_epoch = batch.epoch
        if self._since_image >= self._image_interval():
            self._journal_image("periodic")
        return True

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        if self.next_offset == 0 or (self.last_snapshot is not None and self.last_snapshot.offset >= self.next_offset):
            return None
        snapshot_id = OffsetAndEpoch(self.next_offset, self.last_epoch)
        self.last_snapshot = snapshot_id
        self.new_bytes = 0
        return snapshot_id, [to_log_record(r) for r in self.image.iter_records()]


def _left(image: MetadataImage, record: MetadataRecord) -> dict[str, Any]:
    """What an applied record left in the image, for the fencing checker: a partition's ISR and
    leader after a partition record (with the topic id: a deleted topic's name can come back), the
    topic id a topic removal drops, a broker's id after a fence or unfence, and after any other broker
    record (registration, unregistration, registration change) its id and whether it is fenced now
    (absent: unregistered)."""
    if isinstance(record, PartitionRecord | PartitionChangeRecord):
        topic = image.topics.get(record.topic_id)
        p = topic.partitions.get(record.partition_id) if topic is not None else None
        if topic is not None and p is not None:
            return {"topic": topic.name, "topic_id": str(record.topic_id), "partition": record.partition_id,
                    "isr": list(p.isr), "leader": p.leader}
    elif isinstance(record, RemoveTopicRecord):
        return {"topic_id": str(record.topic_id)}
    elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
        return {"broker": record.id}
    elif isinstance(record, RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord):
        b = image.brokers.get(record.broker_id)
        return {"broker": record.broker_id, **({"fenced": b.fenced} if b is not None else {})}
    return {}
