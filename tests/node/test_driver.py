"""RaftDriver: the real-time driver of the core, tested in one event loop over in-memory storage.

The transport here is a direct in-process router (no sockets, no wire mapping), so these tests
check the driver itself: request/response routing by `ref`, timers, commit waiting, journal and
metrics — with the real core, real asyncio time and short timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno

import pytest

from kraftlab.node import metrics as mx
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import NotLeader
from kraftlab.node.raft.ports import Record
from kraftlab.testing.kraftnode import Cluster


def test_single_voter_commits_and_journals() -> None:
    async def run() -> None:
        c = Cluster(1)
        c.start()
        try:
            assert await c.leader() == 1
            base = await c.drivers[1].append_and_wait([Record(b"k", b"v1"), Record(b"k", b"v2")], 2.0)
            d = c.drivers[1]
            assert d.core.high_watermark >= base + 2
            assert c.machines[1].records == 2
            evs = [e["ev"] for e in c.journals[1].entries]
            assert evs[0] == "start" and "role" in evs and "append" in evs and "hw" in evs
            appended = [e for e in c.journals[1].entries if e["ev"] == "append" and not e["control"]]
            assert appended[0]["base"] == base and appended[0]["crcs"] == [
                Record(b"k", b"v1").crc(),
                Record(b"k", b"v2").crc(),
            ]
            assert all({"ts", "mono", "node"} <= e.keys() for e in c.journals[1].entries)
            g = c.metrics[1]
            assert g.value(mx.RAFT_LEADER) == 1 and g.value(mx.RAFT_EPOCH) == d.core.epoch
            assert g.value(mx.RAFT_HIGH_WATERMARK) == d.core.high_watermark
            assert g.value(mx.RAFT_ROLE, role="leader") == 1
            assert g.value(mx.RAFT_ELECTIONS) is not None and g.value(mx.RAFT_ELECTIONS) >= 1  # type: ignore
        finally:
            await c.close()

    asyncio.run(run())


def test_three_voters_failover_keeps_committed() -> None:
    async def run() -> None:
        c = Cluster(3, seed=7)
        c.start()
        try:
            first = await c.leader()
            committed = []
            for i in range(5):
                payload = f"a{i}".encode()
                await c.drivers[first].append_and_wait([Record(None, payload)], 2.0)
                committed.append(payload)
            follower = next(i for i in c.ids if i != first)
            with pytest.raises(NotLeader):
                c.drivers[follower].append([Record(None, b"x")])
            c.kill(first)
            second = await c.leader(exclude={first})
            assert c.drivers[second].core.epoch > c.drivers[first].core.epoch
            await c.drivers[second].append_and_wait([Record(None, b"after")], 2.0)
            committed.append(b"after")
            # every committed record is in the new leader's log, in order
            values = [r.value for b in c.logs[second].batches() if not b.control for r in b.records]
            assert values == committed
            for i in c.ids:
                if i != first:
                    assert any(e["ev"] == "vote" for e in c.journals[i].entries) or i == second
        finally:
            await c.close()

    asyncio.run(run())


def test_request_refused_before_start_and_times_out_when_core_stays_silent() -> None:
    async def run() -> None:
        c = Cluster(1)
        stray = m.VoteResponse(m.Errors.NONE, 1, None, True)
        try:
            with pytest.raises(ConnectionRefusedError):
                await c.drivers[1].request(2, stray, 0.05)
            c.start()
            # a response to a request never sent: the core ignores it, so no answer comes
            with pytest.raises(TimeoutError):
                await c.drivers[1].request(2, stray, 0.05)
            assert not c.drivers[1]._inbound  # the waiting slot is released
        finally:
            await c.close()

    asyncio.run(run())


def test_a_failing_tick_does_not_stop_the_timer() -> None:
    async def run() -> None:
        c = Cluster(1)
        node = c.drivers[1].node
        real_tick = node.tick
        calls: list[int] = []

        def flaky_tick(now: int):  # type: ignore[no-untyped-def]
            calls.append(now)
            if len(calls) == 1:
                raise ValueError("planted")
            return real_tick(now)

        node.tick = flaky_tick  # type: ignore[method-assign]
        c.start()
        try:
            async with asyncio.timeout(5):
                while len(calls) < 3:  # ticks go on after the one that raised
                    await asyncio.sleep(0.01)
            assert await c.leader() == 1
        finally:
            await c.close()

    asyncio.run(run())


def test_a_failed_write_stops_the_node_and_says_so() -> None:
    """EIO or ENOSPC from the metadata log's disk: the driver stops (Kafka halts on a failed metadata
    log dir) and journals `log_dir_failed`; nothing is appended or committed after it."""

    async def run() -> None:
        c = Cluster(1)
        c.start()
        try:
            assert await c.leader() == 1
            d = c.drivers[1]
            await d.append_and_wait([Record(b"k", b"v1")], 2.0)

            def no_space(batches: object) -> None:
                raise OSError(errno.ENOSPC, "No space left on device", "__cluster_metadata-0/0.log")

            c.logs[1].append = no_space  # type: ignore[method-assign]
            hw = d.core.high_watermark
            with pytest.raises(OSError):
                await d.append_and_wait([Record(b"k", b"v2")], 2.0)
            assert d.stopped.is_set() and isinstance(d.failed, OSError)
            failed = [e for e in c.journals[1].entries if e["ev"] == "log_dir_failed"]
            assert len(failed) == 1 and failed[0]["errno"] == "ENOSPC"
            assert failed[0]["path"] == "__cluster_metadata-0/0.log" and failed[0]["hw"] == hw
            with pytest.raises(RuntimeError, match="stopped"):
                await d.append_and_wait([Record(b"k", b"v3")], 2.0)
            d.fail_stop(OSError(errno.EIO, "Input/output error"))  # the first failure is the one kept
            assert isinstance(d.failed, OSError) and d.failed.errno == errno.ENOSPC
            assert sum(e["ev"] == "log_dir_failed" for e in c.journals[1].entries) == 1
        finally:
            await c.close()

    asyncio.run(run())


def test_the_high_water_mark_a_failing_step_reached_is_journalled() -> None:
    """A step that fails (here: the state machine's disk is full while it applies) loses its output, its
    `hw` event among it, but not what it did to the core: the machine may have applied up to that
    high-water mark, so the journal says so before `log_dir_failed` (else an apply looks uncommitted)."""

    async def run() -> None:
        c = Cluster(1)
        c.start()
        try:
            assert await c.leader() == 1
            d = c.drivers[1]
            await d.append_and_wait([Record(b"k", b"v1")], 2.0)
            journalled = max(e["hw"] for e in c.journals[1].entries if e["ev"] == "hw")

            def disk_full(batches: object) -> None:
                raise OSError(errno.ENOSPC, "No space left on device", "snapshot.checkpoint.part")

            c.machines[1].handle_commit = disk_full  # type: ignore[method-assign]
            with contextlib.suppress(OSError, RuntimeError, TimeoutError):
                await d.append_and_wait([Record(b"k", b"v2")], 2.0)
            assert d.stopped.is_set() and isinstance(d.failed, OSError)
            evs = [e for e in c.journals[1].entries if e["ev"] in ("hw", "log_dir_failed")]
            assert evs[-1]["ev"] == "log_dir_failed" and evs[-2]["ev"] == "hw"
            assert evs[-2]["hw"] == d.core.high_watermark > journalled
        finally:
            await c.close()

    asyncio.run(run())


def test_an_append_whose_step_resigns_fails_instead_of_completing_on_the_next_leaders_commit() -> None:
    """A leader paused past check-quorum (no tick ran) takes an append into its linger buffer, and
    the same step resigns and drops it: the append fails NotLeader, though the next leader's records
    are later committed at its offsets (before, it waited for the high-water mark and succeeded)."""

    async def run() -> None:
        c = Cluster(3)
        c.start()
        try:
            old = await c.leader()
            d = c.drivers[old]
            await d.append_and_wait([Record(b"k", b"v1")], 2.0)
            d.cancel_timer()  # paused: no tick, no message in or out
            c.down.add(old)
            new = await c.leader(exclude={old})
            await c.drivers[new].append_and_wait([Record(b"k", b"v2"), Record(b"k", b"v3")], 2.0)
            await asyncio.sleep(d.core.config.check_quorum_timeout_ms / 1000)  # surely past check-quorum
            assert d.core.is_leader  # it has not noticed yet
            c.down.discard(old)
            with pytest.raises(NotLeader):
                await d.append_and_wait([Record(b"k", b"lost")], 2.0)
            assert not d.core.is_leader
            assert all(r.value != b"lost" for b in c.logs[new].read(0, 1 << 20) for r in b.records)
        finally:
            await c.close()

    asyncio.run(run())
