"""Metadata log retention: the pure decision (node.raft.retention), the core keeping the log behind
its snapshots and answering Fetches from it, and a restart over retained segments on disk."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from raft_harness import KEEP_NO_LOG, Harness, events, sent
from test_transitions import elect

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Batch, LogSegment, OffsetAndEpoch, Record
from kraftlab.node.raft.retention import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_MS,
    UNLIMITED,
    Deletion,
    RetentionPolicy,
    retained_log_start,
)
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.snapshots import DiskSnapshotStore

DAY = 24 * 3600 * 1000
# Four segments of 100 bytes: [0,10) [10,20) [20,30) [30,35), appended a day apart.
SEGMENTS = [LogSegment(b, min(b + 10, 35), 100, b // 10 * DAY) for b in (0, 10, 20, 30)]


def test_kafkas_defaults() -> None:
    assert (DEFAULT_MAX_BYTES, DEFAULT_MAX_MS) == (104857600, 604800000)
    assert RetentionPolicy() == RetentionPolicy(DEFAULT_MAX_BYTES, DEFAULT_MAX_MS)


@pytest.mark.parametrize("field", ["max_bytes", "max_ms"])
def test_only_minus_one_means_no_limit(field: str) -> None:
    RetentionPolicy(**{field: UNLIMITED})
    RetentionPolicy(**{field: 0})
    with pytest.raises(ValueError, match=r"must be -1 \(no limit\) or >= 0, got -2"):
        RetentionPolicy(**{field: -2})


def test_nothing_goes_under_the_limits() -> None:
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(), 3 * DAY) is None
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(450, UNLIMITED), 3 * DAY) is None  # 400 + 50: not over


def test_bytes_over_the_limit_delete_the_oldest_segments_until_under_it() -> None:
    # 400 of log + 50 of snapshot, limit 300: two segments go (250 left)
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(300, UNLIMITED), 0) == Deletion(20, "bytes")
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(349, UNLIMITED), 0) == Deletion(20, "bytes")
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(350, UNLIMITED), 0) == Deletion(10, "bytes")


def test_only_segments_wholly_below_the_snapshot_go() -> None:
    # limit 0: everything over it, but the snapshot at 25 covers only [0,10) and [10,20)
    assert retained_log_start(SEGMENTS, 25, 50, RetentionPolicy(0, 0), 10 * DAY) == Deletion(20, "bytes")
    assert retained_log_start(SEGMENTS, 9, 50, RetentionPolicy(0, 0), 10 * DAY) is None
    assert retained_log_start(SEGMENTS, 35, 50, RetentionPolicy(0, 0), 10 * DAY) == Deletion(35, "bytes")


def test_segments_older_than_the_time_limit_go() -> None:
    now = 3 * DAY + 1
    # the segments' ages: 3, 2, 1 and 0 days (+1 ms); the snapshot at 30 covers the first three
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(UNLIMITED, 0), now) == Deletion(30, "ms")
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(UNLIMITED, 2 * DAY), now) == Deletion(20, "ms")
    assert retained_log_start(SEGMENTS, 30, 50, RetentionPolicy(UNLIMITED, 3 * DAY + 1), now) is None


def test_the_empty_active_segment_stays() -> None:
    segments = [LogSegment(0, 10, 100, 0), LogSegment(10, 10, 0, -1)]
    assert retained_log_start(segments, 10, 50, RetentionPolicy(0, UNLIMITED), 0) == Deletion(10, "bytes")


# ---- the core ---------------------------------------------------------------------------


def snapshotted_leader(make_core, retention: RetentionPolicy) -> tuple[Harness, int]:  # type: ignore[no-untyped-def]
    """Node 1 leads epoch 1, its log [0,4) committed (a LeaderChange and three records, one batch
    each), and it snapshots at 4."""
    h = make_core(config=RaftConfig(append_linger_ms=0, retention=retention))
    now = elect(h)
    for i in range(3):
        h.core.append([Record(None, b"v%d" % i)], now)
    h.deliver(2, m.FetchRequest(1, 2, 4, 1, 0), now + 1)
    assert h.core.high_watermark == 4
    h.step(h.core.create_snapshot(OffsetAndEpoch(4, 1), [Record(b"k", b"s")], now + 2))
    return h, now + 3


def test_by_default_the_log_behind_a_snapshot_is_kept_and_served(make_core) -> None:  # type: ignore[no-untyped-def]
    h, now = snapshotted_leader(make_core, RetentionPolicy())
    assert h.log.start_offset() == 0 and h.snapshots.ids() == [OffsetAndEpoch(4, 1)]
    assert not events(h.outputs[-1], "retention")
    (reply,) = sent(h.deliver(3, m.FetchRequest(1, 3, 1, 1, 0), now), m.FetchResponse)
    assert reply.message.snapshot_id is None and reply.message.batches[0].base_offset == 1
    # A replica whose last epoch the log never held is cut back by a diverging epoch, not sent the snapshot.
    (reply,) = sent(h.deliver(3, m.FetchRequest(1, 3, 3, 0, 0), now), m.FetchResponse)
    assert reply.message.snapshot_id is None and reply.message.diverging_epoch == OffsetAndEpoch(0, 0)


def test_without_retention_the_same_fetches_get_the_snapshot(make_core) -> None:  # type: ignore[no-untyped-def]
    h, now = snapshotted_leader(make_core, KEEP_NO_LOG)
    assert h.log.start_offset() == 4
    (event,) = events(h.outputs[-1], "retention")
    assert event | {"ev": "retention"} == {"ev": "retention", "log_start": 4, "from": 0, "reason": "bytes"} | event
    for fetch in (m.FetchRequest(1, 3, 1, 1, 0), m.FetchRequest(1, 3, 3, 0, 0)):
        (reply,) = sent(h.deliver(3, fetch, now), m.FetchResponse)
        assert reply.message.snapshot_id == OffsetAndEpoch(4, 1) and not reply.message.batches


def test_a_log_start_no_snapshot_ends_at_tells_no_divergence(make_core) -> None:  # type: ignore[no-untyped-def]
    """A log kept from 10 (epoch unknown: 0, as storage reopens it) behind a snapshot at 12: a replica
    whose last epoch (1) the log does not hold gets the snapshot, not a diverging epoch at 10 that
    could cut it below its committed offset."""
    log, snapshots = MemoryLog(), MemorySnapshotStore()
    log.reset_to_snapshot(OffsetAndEpoch(10, 0))
    log.append([Batch(10, 2, (Record(None, b"a"), Record(None, b"b"))), Batch(12, 2, (Record(None, b"c"),))])
    log.flush()
    snapshots.write(OffsetAndEpoch(12, 2), [Record(b"k", b"v")], 0)
    h = make_core(log=log, snapshots=snapshots)
    now = elect(h)
    epoch = h.core.epoch
    (reply,) = sent(h.deliver(3, m.FetchRequest(epoch, 3, 11, 1, 0), now), m.FetchResponse)
    assert reply.message.diverging_epoch is None and reply.message.snapshot_id == OffsetAndEpoch(12, 2)
    # while a replica that continues the kept log is served from it
    (reply,) = sent(h.deliver(3, m.FetchRequest(epoch, 3, 12, 2, 0), now), m.FetchResponse)
    assert reply.message.snapshot_id is None and reply.message.batches[0].base_offset == 12


def test_restart_over_segments_kept_behind_the_snapshot(tmp_path: Path) -> None:
    """On disk, with segments of one batch: the log is kept behind the snapshot, and a restart loads
    the snapshot and replays only the records after it (as Kafka reads the log from its snapshot)."""
    policy = RetentionPolicy(max_bytes=600, max_ms=UNLIMITED)  # a few segments (and the snapshot)
    config = RaftConfig(append_linger_ms=0, retention=policy)

    def open_node(machine: CounterMachine, seed: int, every: int) -> tuple[RaftNode, DiskLog, DiskSnapshotStore]:
        snapshots = DiskSnapshotStore(tmp_path)
        log = DiskLog.open(tmp_path, segment_bytes=1, snapshot_id=snapshots.latest())
        core = RaftCore(config, 1, (1,), log, quorum, snapshots, random.Random(seed), journal=True)
        return RaftNode(core, machine, snapshot_every_records=every), log, snapshots

    quorum = MemoryQuorumStateStore()
    machine = CounterMachine()
    node, log, snapshots = open_node(machine, 0, 4)
    node.start(0)
    retained = []
    for i in range(30):
        out = node.append([Record(None, b"record %d" % i)], i + 1)[1]
        retained += events(out, "retention")
    latest = snapshots.latest()
    assert latest is not None and retained and 0 < log.start_offset() < latest.offset
    start, end, count, digest = log.start_offset(), log.end_offset(), machine.count, machine.digest
    log.close()

    again = CounterMachine()
    node, log, snapshots = open_node(again, 1, 0)  # (no new snapshot while replaying)
    assert (log.start_offset(), log.end_offset()) == (start, end)
    node.start(100)
    assert again.snapshot_offset == latest.offset
    assert (again.count, again.digest) == (count, digest)  # nothing below the snapshot applied twice
    log.close()
