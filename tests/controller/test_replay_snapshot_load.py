"""Snapshot loading: the image equals the one snapshotted, and garbage collection is paused only
while it is built (the caller's setting comes back, even when the snapshot is bad)."""

from __future__ import annotations

import gc

import pytest
from controller_harness import Harness

from kraftlab.node.metadata.records import RecordFormatError
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.ports import OffsetAndEpoch, Record


def test_load_snapshot_rebuilds_the_image_and_restores_gc() -> None:
    h = Harness()
    h.start_brokers(1, 2)
    h.create("a", partitions=3, rf=2)
    snapshot = h.active().snapshot_records()
    assert snapshot is not None
    sid, records = snapshot
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
