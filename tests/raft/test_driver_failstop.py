"""Fail-stop: a state machine that cannot apply the committed log stops the node (journal `fatal`
with stopped:true, `failed` set, `stopped` set): the core is never driven again, so the node does not
vote or lead on a replica it cannot apply. Other unexpected step errors keep the old behaviour."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from kraftlab.node import metrics as mx
from kraftlab.node.clock import SkewedClock
from kraftlab.node.journal import MemoryJournal
from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


class ReplayError(Exception):
    """What a broken replay raises (any exception type must do)."""


class BrokenMachine(CounterMachine):
    """Applies control batches; raises on the first data record (a replay bug)."""

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        if any(not b.control for b in batches):
            raise ReplayError("cannot replay record")
        super().handle_commit(batches)


def make(machine: CounterMachine) -> tuple[RaftDriver, MemoryJournal, list[m.Envelope]]:
    core = RaftCore(
        RaftConfig(), 1, [1, 2, 3], MemoryLog(), MemoryQuorumStateStore(), MemorySnapshotStore(), random.Random(1)
    )
    clock = SkewedClock(None)
    journal = MemoryJournal(clock, 1)
    sent: list[m.Envelope] = []
    driver = RaftDriver(RaftNode(core, machine), clock, journal, mx.Registry(), sent.append)
    return driver, journal, sent


def follow_and_commit(driver: RaftDriver, sent: list[m.Envelope]) -> None:
    """Node 1 follows leader 2 in epoch 1 and fetches one data batch that the response commits."""
    driver.submit(2, m.BeginQuorumEpochRequest(1, 2), 1.0)
    fetch = next(e for e in reversed(sent) if isinstance(e.message, m.FetchRequest))
    batches = (
        Batch(0, 1, (Record(b"k", b"v"),), False, 0),
    )
    driver.handle(m.Envelope(2, 1, m.FetchResponse(m.Errors.NONE, 1, 2, 1, 0, batches), fetch.ref))


def test_a_state_machine_error_stops_the_node_and_it_never_votes() -> None:
    async def run() -> None:
        driver, journal, sent = make(BrokenMachine())
        driver.start()
        try:
            with pytest.raises(ReplayError):
                follow_and_commit(driver, sent)
            assert isinstance(driver.failed, ReplayError) and driver.stopped.is_set()
            fatal = [e for e in journal.entries if e["ev"] == "fatal"]
            assert len(fatal) == 1 and fatal[0]["stopped"] is True and "ReplayError" in fatal[0]["error"]
            before = len(sent)
            with pytest.raises(ConnectionRefusedError):
                driver.submit(3, m.VoteRequest(2, 3, 1, 1, pre_vote=False), 1.0)
            with pytest.raises(RuntimeError):
                driver.tick()
            assert len(sent) == before
            assert not [e for e in journal.entries if e["ev"] == "vote"]
        finally:
            driver.cancel_timer()
            driver.close()

    asyncio.run(run())


def test_a_healthy_machine_applies_the_same_commit_and_keeps_running() -> None:
    async def run() -> None:
        machine = CounterMachine()
        driver, journal, sent = make(machine)
        driver.start()
        try:
            follow_and_commit(driver, sent)
            assert driver.failed is None and not driver.stopped.is_set()
            assert machine.count == 1 and driver.core.applied_offset == 1
            assert not [e for e in journal.entries if e["ev"] == "fatal"]
        finally:
            driver.cancel_timer()
            driver.close()

    asyncio.run(run())
