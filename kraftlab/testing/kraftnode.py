"""Node clusters for tests and benchmarks: free loopback ports, server.properties for loopback clusters,
in-process Raft drivers and real `kraft-node start` processes."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kraftlab.node import metrics as mx
from kraftlab.node.cli import CommandFailed, append_test_records, describe_quorum
from kraftlab.node.clock import SkewedClock
from kraftlab.node.config import config_from_properties, render_properties
from kraftlab.node.journal import MemoryJournal
from kraftlab.node.process.commit_log import CommitLog
from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestError
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id


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


def node_properties(
    node_id: int, base: Path, voters: dict[int, int], *, dynamic: bool = False, **extra: str
) -> dict[str, str]:
    """server.properties of a controller on loopback; `voters` maps id → controller port: the static
    voters, or with `dynamic` (KIP-853) only the bootstrap servers to find the quorum through."""
    port = voters[node_id]
    quorum = (
        {"controller.quorum.bootstrap.servers": ",".join(f"127.0.0.1:{p}" for _, p in sorted(voters.items()))}
        if dynamic
        else {"controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(voters.items()))}
    )
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        **quorum,
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(base / f"n{node_id}" / "meta"),
        "log.dirs": str(base / f"n{node_id}" / "data"),
        "kraftlab.metrics.port": "0",
    }
    props.update(extra)
    return props


def broker_properties(
    node_id: int, base: Path, voters: dict[int, int], port: int, *, dynamic: bool = False, **extra: str
) -> dict[str, str]:
    """server.properties of a broker-only node on loopback (a Raft observer with a PLAINTEXT listener)."""
    props = node_properties(min(voters), base, voters, dynamic=dynamic, **extra)
    props.update(
        {
            "process.roles": "broker",
            "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "metadata.log.dir": str(base / f"n{node_id}" / "meta"),
            "log.dirs": str(base / f"n{node_id}" / "data"),
        }
    )
    return props


FAST = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    election_backoff_max_ms=100,
    request_timeout_ms=300,
    retry_backoff_ms=10,
    append_linger_ms=2,
    fetch_max_wait_ms=50,
)


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
        core = RaftCore(
            FAST, i, self.ids, self.logs[i], self.quorum[i], self.snaps[i], random.Random(self.rng.random())
        )
        self.machines[i] = CommitLog()
        self.journals[i] = MemoryJournal(self.clock, i)
        self.metrics[i] = mx.Registry()
        self.drivers[i] = RaftDriver(
            RaftNode(core, self.machines[i]), self.clock, self.journals[i], self.metrics[i], self.router(i)
        )

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


KRAFT_NODE = str(Path(sys.executable).with_name("kraft-node"))


class ProcessCluster:
    """Real `kraft-node start` processes of an all-controller cluster on loopback (used by the e2e
    tests and bench/bench_node.py). Every process is killed by `close()`, whatever happened."""

    def __init__(
        self,
        base: Path,
        n: int = 3,
        brokers: int = 0,
        config: Mapping[str, str] | None = None,
        dynamic: bool = False,
    ) -> None:
        """`n` controllers and `brokers` brokers under `base`; `config`: extra server.properties of
        every node. A static quorum's `n` controllers are its voters, all formatted here; a `dynamic`
        one (KIP-853) finds its quorum through the controllers' bootstrap servers, and each
        controller is formatted by `format` with its own flag (--standalone, --initial-controllers,
        --no-initial-controllers)."""
        self.base = base
        self.dynamic = dynamic
        base.mkdir(parents=True, exist_ok=True)
        self.ids = list(range(1, n + 1))
        self.broker_ids = list(range(n + 1, n + brokers + 1))
        ports = free_ports(n + brokers)
        self.ports = dict(zip(self.ids, ports[:n], strict=True))
        self.broker_ports = dict(zip(self.broker_ids, ports[n:], strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.configs: dict[int, Path] = {}
        self.cluster_id = random_cluster_id()
        extra = {"kraftlab.unsafe.test.mode": "true", **(config or {})}
        for i in self.ids + self.broker_ids:
            if i in self.ports:
                props = node_properties(i, base, self.ports, dynamic=dynamic, **extra)
            else:
                props = broker_properties(i, base, self.ports, self.broker_ports[i], dynamic=dynamic, **extra)
            path = base / f"n{i}.properties"
            path.write_text(render_properties(props))
            self.configs[i] = path
            if not (dynamic and i in self.ports):
                format_dirs(config_from_properties(props).all_log_dirs, self.cluster_id, i)

    def format(self, i: int, *flags: str) -> None:
        """`kraft-node format` of controller `i` of a dynamic quorum with Kafka's flags."""
        from kraftlab.node.cli import main

        if main(["format", "--config", str(self.configs[i]), "--cluster-id", self.cluster_id, *flags]) != 0:
            raise RuntimeError(f"kraft-node format {' '.join(flags)} of node {i} failed")

    def initial_controllers(self, ids: list[int]) -> str:
        """`--initial-controllers` text naming controllers `ids` with new directory ids (KIP-853)."""
        from kraftlab.node.kafka_uuid import uuid_to_kafka
        from kraftlab.node.storage.meta_properties import random_directory_id

        return ",".join(f"{i}@127.0.0.1:{self.ports[i]}:{uuid_to_kafka(random_directory_id())}" for i in ids)

    def directory_id(self, i: int) -> str:
        """Node `i`'s metadata log directory id (Kafka's base64 text), as its meta.properties says."""
        from kraftlab.node.kafka_uuid import uuid_to_kafka
        from kraftlab.node.storage.meta_properties import read_meta_properties

        directory = read_meta_properties(self.meta_dir(i)).directory_id
        if directory is None:
            raise RuntimeError(f"node {i} has no directory.id")
        return uuid_to_kafka(directory)

    @property
    def controller_bootstrap(self) -> str:
        """The controllers' listeners, as `--bootstrap-controller`."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def bootstrap(self) -> str:
        """The brokers' listeners, as a client's bootstrap.servers."""
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports.values())

    def journal(self, i: int) -> Path:
        return self.base / f"n{i}" / "meta" / "journal.jsonl"

    def meta_dir(self, i: int) -> Path:
        return self.base / f"n{i}" / "meta"

    def start(self, i: int) -> None:
        log = open(self.base / f"n{i}.log", "ab")  # noqa: SIM115 (the child keeps it)
        try:
            self.procs[i] = subprocess.Popen(
                [KRAFT_NODE, "start", "--config", str(self.configs[i])],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def start_all(self) -> None:
        for i in self.ids + self.broker_ids:
            self.start(i)

    def kill(self, i: int, sig: int = signal.SIGKILL, timeout: float = 10.0) -> int | None:
        proc = self.procs.pop(i, None)
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout)

    def close(self) -> None:
        for i in list(self.procs):
            self.kill(i, signal.SIGKILL)

    def alive(self) -> list[int]:
        """Live voters (brokers are not asked about the quorum)."""
        return [i for i, p in self.procs.items() if p.poll() is None and i in self.ports]

    def quorum(self, i: int, timeout: float = 1.0) -> dict[str, object] | None:
        try:
            return asyncio.run(describe_quorum(("127.0.0.1", self.ports[i]), timeout))
        except CommandFailed:
            return None

    def wait_leader(self, timeout: float = 60.0, exclude: int | None = None) -> tuple[int, int]:
        """(leader id, epoch) once a live node names a live leader other than `exclude`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i in self.alive():
                q = self.quorum(i)
                leader = q.get("leader") if q else None
                if isinstance(leader, int) and leader != exclude and leader in self.alive():
                    lq = self.quorum(leader)
                    epoch = lq.get("epoch") if lq else None
                    if lq and lq.get("leader") == leader and isinstance(epoch, int):
                        return leader, epoch
            time.sleep(0.05)
        raise TimeoutError(f"no leader within {timeout}s (alive: {self.alive()})")

    async def append(self, i: int, values: list[bytes], timeout: float = 5.0) -> tuple[str, int]:
        async with ProtocolClient(
            "127.0.0.1", self.ports[i], request_timeout=timeout, connect_timeout=timeout
        ) as client:
            return await append_test_records(client, values, int(timeout * 1000))

    def append_committed(self, values: list[bytes], timeout: float = 20.0) -> int:
        """Append through whichever node leads, retrying until acknowledged; returns the base offset."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError, RequestError, OSError):
                leader, _ = self.wait_leader(max(0.1, deadline - time.monotonic()))
                error, base = asyncio.run(self.append(leader, values))
                if error == "NONE":
                    return base
            time.sleep(0.05)
        raise TimeoutError(f"append not acknowledged within {timeout}s")


def read_log_values(meta_dir: Path) -> list[bytes | None]:
    """The tags of every test record (key set, null value) in a stopped node's metadata log, in order."""
    disk = DiskLog.open(meta_dir)
    try:
        out: list[bytes | None] = []
        offset = disk.start_offset()
        while offset < disk.end_offset():
            batches = disk.read(offset, 1 << 20)
            for b in batches:
                if not b.control:
                    out.extend(r.key for r in b.records if r.value is None and r.key is not None)
            offset = batches[-1].next_offset
        return out
    finally:
        disk.close()


async def until_leader(server: Any, task: asyncio.Task[Any], timeout: float = 30.0) -> None:
    """Wait until an in-process NodeServer's Raft core leads; its run task ending first fails the test
    with that task's result (or exception)."""
    async with asyncio.timeout(timeout):
        while server.driver is None or not server.driver.core.is_leader:
            assert not task.done(), task.result()
            await asyncio.sleep(0.02)
