"""Snapshot loading: the image equals the one snapshotted, and garbage collection is paused only
while it is built (the caller's setting comes back, even when the snapshot is bad)."""

from __future__ import annotations

import gc

import pytest
from controller_harness import CLUSTER_ID, Harness

from kraftlab.node.controller import ControllerConfig, QuorumController
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import RecordFormatError
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.ports import OffsetAndEpoch, Record


def _snapshotted() -> tuple[Harness, tuple[OffsetAndEpoch, list[Record]]]:
    """A cluster with two brokers and a topic, and the active controller's snapshot of it."""
    h = Harness()
    h.start_brokers(1, 2)
    h.create("a", partitions=3, rf=2)
    snapshot = h.active().snapshot_records()
    assert snapshot is not None
    return h, snapshot


def test_load_snapshot_rebuilds_the_image_and_restores_gc() -> None:
    h, (sid, records) = _snapshotted()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            replay = CommittedReplay()
            replay.load_snapshot(sid, records)
            assert gc.isenabled() is enabled
            assert replay.image == h.active().committed_image and replay.next_offset == sid.offset
            with pytest.raises(RecordFormatError):
                CommittedReplay().load_snapshot(OffsetAndEpoch(1, 1), [Record(None, b"\x00\x63\x00")])
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


def test_a_controller_journals_the_snapshot_it_loads_in_the_step_it_loads_it() -> None:
    """Its `image` line (reason snapshot-load) comes out of the load itself, not with the next commit:
    a process that crashes before its next commit would otherwise never tell what its image became."""
    h, (sid, records) = _snapshotted()
    standby = QuorumController(ControllerConfig(node_id=9, cluster_id=CLUSTER_ID), h.q.writer(9))
    standby.handle_load_snapshot(sid, records)
    lines = [o for o in standby.take_outputs() if isinstance(o, JournalEvent) and o.ev == "image"]
    assert [(e.fields["offset"], e.fields["reason"]) for e in lines] == [(sid.offset, "snapshot-load")]
    assert lines[0].fields["digest"] == h.active().committed_image.image_digests()[0]
