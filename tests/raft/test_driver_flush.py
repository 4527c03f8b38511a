"""The real-time driver's deferred leader flush over a real DiskLog: the leader's appends are fsynced on
the flush thread, and nothing is committed (or acknowledged) before its own flush covers it."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from kraftlab.node import metrics as mx
from kraftlab.node.clock import SkewedClock
from kraftlab.node.journal import MemoryJournal
from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Record
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.storage.log import DiskLog


def test_single_voter_commits_only_what_its_flush_thread_made_durable(tmp_path: Path) -> None:
    log = DiskLog.open(tmp_path)
    core = RaftCore(
        RaftConfig(append_linger_ms=0),
        1,
        [1],
        log,
        MemoryQuorumStateStore(),
        MemorySnapshotStore(),
        random.Random(1),
    )
    clock = SkewedClock(None)
    journal = MemoryJournal(clock, 1)
    seen: list[tuple[int, int, int]] = []  # (HW, durable end, end) after every step

    async def run() -> None:
        driver = RaftDriver(RaftNode(core, CounterMachine()), clock, journal, mx.Registry(), lambda env: None)
        driver.after_step = lambda now: seen.append((core.high_watermark, log.flushed_end_offset(), log.end_offset()))
        assert core.deferred_flush
        try:
            driver.start()
            bases = await asyncio.gather(*(driver.append_and_wait([Record(None, b"v%d" % i)], 5.0) for i in range(20)))
            assert sorted(bases) == bases and len(set(bases)) == 20
            assert core.high_watermark == log.end_offset() == log.flushed_end_offset() == bases[-1] + 1
        finally:
            driver.close()

    try:
        asyncio.run(run())
    finally:
        log.close()
    assert all(hw <= durable for hw, durable, _ in seen)  # one voter: the HW is its own durable end
    assert any(durable < end for _, durable, end in seen)  # appends were left to the flush thread
    durable = 0  # one voter: every journalled hw is backed by a flush journalled before it
    for e in journal.entries:
        if e["ev"] == "flush":
            durable = e["end"]
        elif e["ev"] == "hw":
            assert e["hw"] <= durable, e
    flushes = [e["end"] for e in journal.entries if e["ev"] == "flush"]
    assert flushes and flushes == sorted(flushes) and flushes[-1] == core.high_watermark
    # fewer flushes than appends when appends arrive during a flush (one fsync covers them all)
    appends = [e for e in journal.entries if e["ev"] == "append"]
    assert len(flushes) <= len(appends)
    reopened = DiskLog.open(tmp_path)
    try:
        assert reopened.end_offset() == core.high_watermark  # durable: a crash now would lose nothing
    finally:
        reopened.close()
