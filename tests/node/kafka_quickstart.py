"""A cluster as Kafka's quickstart runs one on a single host: one `server.properties` per process
with Kafka's keys only (as Kafka's config/kraft/{controller,broker}.properties write them, keys it
has no use for included), formatted with the storage tool, started with `kraft-node start`.
Every process is killed by `close()` whatever happened."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraftlab.node.admin import AdminError, describe_cluster_now, describe_quorum_now
from kraftlab.node.journal import read_journal
from kraftlab.testing.kraftnode import KRAFT_NODE, free_ports


def quickstart_properties(node_id: int, roles: str, log_dir: Path, voters: str, port: int) -> str:
    lines = [
        "# Licensed to the Apache Software Foundation (ASF) ... as Kafka's quickstart ships it",
        f"process.roles={roles}",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        "controller.listener.names=CONTROLLER",
        f"log.dirs={log_dir}",
        "num.partitions=1",
        "num.network.threads=3",
        "socket.send.buffer.bytes=102400",
        "offsets.topic.replication.factor=1",
        "log.retention.hours=168",
    ]
    if roles == "controller":
        lines.append(f"listeners=CONTROLLER://localhost:{port}")
    else:
        lines += [
            f"listeners=PLAINTEXT://localhost:{port}",
            "inter.broker.listener.name=PLAINTEXT",
            f"advertised.listeners=PLAINTEXT://localhost:{port}",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        ]
    return "\n".join(lines) + "\n"


class QuickstartCluster:
    def __init__(self, base: Path, controllers: int, brokers: int) -> None:
        self.base = base
        self.controllers = list(range(1, controllers + 1))
        self.brokers = list(range(controllers + 1, controllers + brokers + 1))
        self.ports = dict(zip(self.controllers + self.brokers, free_ports(controllers + brokers), strict=True))
        voters = ",".join(f"{i}@localhost:{self.ports[i]}" for i in self.controllers)
        self.cluster_id = subprocess.run([KRAFT_NODE, "random-uuid"], capture_output=True, text=True,
                                         check=True).stdout.strip()
        self.configs: dict[int, Path] = {}
        for i in self.controllers + self.brokers:
            roles = self.roles(i)
            self.configs[i] = base / f"{roles}-{i}.properties"
            self.configs[i].write_text(quickstart_properties(i, roles, self.log_dir(i), voters, self.ports[i]))
            subprocess.run([KRAFT_NODE, "format", "--config", str(self.configs[i]), "--cluster-id", self.cluster_id],
                           capture_output=True, text=True, check=True)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def roles(self, i: int) -> str:
        return "controller" if i in self.controllers else "broker"

    def log_dir(self, i: int) -> Path:
        return self.base / f"kraft-{self.roles(i)}-logs-{i}"

    def journal(self, i: int) -> list[dict[str, Any]]:
        return read_journal(self.log_dir(i) / "journal.jsonl")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{self.ports[b]}" for b in self.brokers)

    def start(self) -> None:
        for i, path in self.configs.items():
            with open(self.base / f"node-{i}.log", "wb") as log:
                self.procs[i] = subprocess.Popen([KRAFT_NODE, "start", "--config", str(path)], stdout=log,
                                                 stderr=subprocess.STDOUT, start_new_session=True)

    def close(self) -> None:
        for p in self.procs.values():
            p.kill()
            p.wait(30)

    def __enter__(self) -> QuickstartCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def leader(self) -> int | None:
        for c in self.controllers:  # only the leader answers DescribeQuorum
            found = _ask(lambda c=c: describe_quorum_now("localhost", self.ports[c]), "leader")
            if found is not None:
                return int(found)
        return None

    def unfenced(self, via: int | None = None) -> list[int]:
        port = self.ports[via or self.brokers[0]]
        return _ask(lambda: sorted(b["id"] for b in describe_cluster_now("localhost", port)["brokers"]), None) or []

    def wait_healthy(self, timeout: float = 90.0) -> int:
        """The leader, once there is one and every broker is unfenced; fails at once if a process exits."""
        leader: int | None = None
        unfenced: list[int] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (leader is None or unfenced != self.brokers):
            exited = {i: p.returncode for i, p in self.procs.items() if p.poll() is not None}
            assert not exited, f"exited: {exited}; " + (self.base / f"node-{min(exited)}.log").read_text()[-2000:]
            leader = leader or self.leader()
            unfenced = self.unfenced()
            time.sleep(0.1)
        tails = {i: self.journal(i)[-3:] for i in self.procs}
        assert leader in self.controllers, f"no quorum leader; journals end: {tails}"
        assert unfenced == self.brokers, f"brokers unfenced: {unfenced}; journals end: {tails}"
        return leader


def _ask(query: Callable[[], Any], key: str | None) -> Any:
    try:
        out = query()
    except AdminError:
        return None
    return out.get(key) if key is not None else out
