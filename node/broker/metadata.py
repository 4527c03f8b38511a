"""The broker's metadata replay: a Raft StateMachine over the committed metadata log.

A broker is a Raft observer; the driver delivers committed batches and snapshots here. The
image answers client Metadata/DescribeCluster requests; `highest_offset` is what heartbeats
report as CurrentMetadataOffset; the Raft leader is the active controller the broker sends
heartbeats and forwarded requests to.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record


class BrokerMetadata:
    def __init__(self, journal_applies: bool = True) -> None:
        self.replay = CommittedReplay(journal_applies=journal_applies)
        self.controller_id: int | None = None
        self.controller_epoch = 0

    @property
    def image(self) -> MetadataImage:
        return self.replay.image

    @property
    def highest_offset(self) -> int:
        """The highest committed offset applied here (-1 before anything)."""
        return self.replay.next_offset - 1

    def take_outputs(self) -> list[JournalEvent]:
        return self.replay.take_events()

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        self.replay.load_snapshot(snapshot_id, records)

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            self.replay.apply_batch(batch)

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        self.controller_id, self.controller_epoch = leader_id, epoch

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        return self.replay.snapshot_records()
