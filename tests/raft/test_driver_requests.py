"""The driver's request path: a request the core answers within its step is answered at once (a done
future: no task, no timer), one it does not answer times out and leaves nothing behind."""

from __future__ import annotations

import asyncio
import random

import pytest

from kraftlab.node import metrics as mx
from kraftlab.node.clock import SkewedClock
from kraftlab.node.journal import MemoryJournal
from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


def make_driver() -> RaftDriver:
    core = RaftCore(
        RaftConfig(), 1, [1, 2, 3], MemoryLog(), MemoryQuorumStateStore(), MemorySnapshotStore(), random.Random(1)
    )
    clock = SkewedClock(None)
    return RaftDriver(RaftNode(core, CounterMachine()), clock, MemoryJournal(clock, 1), mx.Registry(), lambda e: None)


def test_a_request_answered_within_its_step_is_a_done_future() -> None:
    async def run() -> None:
        driver = make_driver()
        driver.start()
        try:
            future = driver.submit(2, m.VoteRequest(1, 2, 0, 0, pre_vote=True), 1.0)
            assert future.done() and not driver._inbound
            answer = future.result()
            assert isinstance(answer, m.VoteResponse) and answer.granted and answer.pre_vote
        finally:
            driver.cancel_timer()
            driver.close()

    asyncio.run(run())


def test_an_unanswered_request_times_out_and_is_released() -> None:
    async def run() -> None:
        driver = make_driver()
        driver.start()
        try:
            stray = m.VoteResponse(m.Errors.NONE, 1, None, True)  # answers nothing: the core stays silent
            future = driver.submit(2, stray, 0.05)
            assert not future.done() and len(driver._inbound) == 1
            with pytest.raises(TimeoutError):
                await future
            assert not driver._inbound
        finally:
            driver.cancel_timer()
            driver.close()

    asyncio.run(run())
