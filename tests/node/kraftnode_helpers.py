"""Helpers for the node process tests: free loopback ports, server.properties for loopback clusters."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from pathlib import Path

from node import metrics as mx
from node.clock import SkewedClock
from node.journal import MemoryJournal
from node.raft import messages as m
from node.raft.config import RaftConfig
from node.raft.core import RaftCore
from node.raft.node import RaftNode
from node.server import CommitLog, RaftDriver
from node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


def free_ports(n: int) -> list[int]:
    """n distinct free loopback TCP ports (bound together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_properties(node_id: int, base: Path, voters: dict[int, int], **extra: str) -> dict[str, str]:
    """server.properties of a controller on loopback; `voters` maps id → controller port."""
    port = voters[node_id]
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(voters.items())),
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(base / f"n{node_id}" / "meta"),
        "log.dirs": str(base / f"n{node_id}" / "data"),
        "kraftlab.metrics.port": "0",
    }
    props.update(extra)
    return props


FAST = RaftConfig(election_timeout_ms=150, fetch_timeout_ms=300, election_backoff_max_ms=100,
                  request_timeout_ms=300, retry_backoff_ms=10, append_linger_ms=2, fetch_max_wait_ms=50)


class Cluster:
    """Drivers wired by an in-process router; a 'down' node neither sends nor receives."""

    def __init__(self, n: int, seed: int = 1) -> None:
        self.clock = SkewedClock(None)
        self.ids = list(range(1, n + 1))
        self.down: set[int] = set()
        self.machines: dict[int, CommitLog] = {}
        self.journals: dict[int, MemoryJournal] = {}
        self.metrics: dict[int, mx.Registry] = {}
        self.drivers: dict[int, RaftDriver] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.logs = {i: MemoryLog() for i in self.ids}
        self.quorum = {i: MemoryQuorumStateStore() for i in self.ids}
        self.snaps = {i: MemorySnapshotStore() for i in self.ids}
        self.rng = random.Random(seed)
        for i in self.ids:
            self.boot(i)

    def boot(self, i: int) -> None:
        core = RaftCore(FAST, i, self.ids, self.logs[i], self.quorum[i], self.snaps[i],
                        random.Random(self.rng.random()))
        self.machines[i] = CommitLog()
        self.journals[i] = MemoryJournal(self.clock, i)
        self.metrics[i] = mx.Registry()
        self.drivers[i] = RaftDriver(RaftNode(core, self.machines[i]), self.clock, self.journals[i],
                                     self.metrics[i], self.router(i), lambda hw: None)

    def router(self, src: int) -> Callable[[m.Envelope], None]:
        def send(env: m.Envelope) -> None:
            if not m.is_request(env.message) or src in self.down or env.dst in self.down:
                return
            task = asyncio.get_running_loop().create_task(self.exchange(env))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        return send

    async def exchange(self, env: m.Envelope) -> None:
        try:
            resp = await self.drivers[env.dst].request(env.src, env.message, 1.0)
        except TimeoutError:
            return
        if env.src not in self.down and env.dst not in self.down:
            self.drivers[env.src].handle(m.Envelope(env.dst, env.src, resp, env.ref))

    def start(self) -> None:
        for i in self.ids:
            self.drivers[i].start()

    def kill(self, i: int) -> None:
        self.down.add(i)
        self.drivers[i].stopped.set()
        self.drivers[i].cancel_timer()

    async def leader(self, timeout: float = 5.0, exclude: set[int] | None = None) -> int:
        async with asyncio.timeout(timeout):
            while True:
                for i, d in self.drivers.items():
                    if i not in self.down and d.core.is_leader and i not in (exclude or set()):
                        return i
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        for i in self.ids:
            self.drivers[i].stopped.set()
            self.drivers[i].cancel_timer()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
