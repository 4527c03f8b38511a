"""End to end: three controllers and three brokers on ONE host, configured with Kafka's keys only
(the way Kafka's quickstart runs a local quorum: one `server.properties` per process, formatted
with the storage tool, then started) — a leader within a few seconds, every broker registered and
unfenced, no process exits, and none binds a port it was not given (no metrics port by default)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kraftnode_helpers import KRAFT_NODE, free_ports

from kraftlab.node.admin import AdminError, describe_cluster_now, describe_quorum_now
from kraftlab.node.journal import read_journal

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

LEADER_WITHIN_S = 10.0
"""'A few seconds' for a leader, counted from the last process started (election timeout 1 s)."""


def quickstart_properties(node_id: int, roles: str, base: Path, voters: str, port: int) -> str:
    """A `server.properties` as Kafka's config/kraft/{controller,broker}.properties write it, keys
    and comments alike (Kafka's own keys only, some the node has no use for)."""
    lines = [
        "# Licensed to the Apache Software Foundation (ASF) ... as Kafka's quickstart ships it",
        f"process.roles={roles}",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        "controller.listener.names=CONTROLLER",
        f"log.dirs={base / f'kraft-{roles}-logs-{node_id}'}",
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


def test_three_controllers_and_three_brokers_on_one_host(tmp_path: Path) -> None:
    controllers, brokers = [1, 2, 3], [4, 5, 6]
    ports = dict(zip(controllers + brokers, free_ports(6), strict=True))
    voters = ",".join(f"{i}@localhost:{ports[i]}" for i in controllers)
    cluster_id = subprocess.run([KRAFT_NODE, "random-uuid"], capture_output=True, text=True, check=True).stdout.strip()
    configs: dict[int, Path] = {}
    for i in controllers + brokers:
        roles = "controller" if i in controllers else "broker"
        configs[i] = tmp_path / f"{roles}-{i}.properties"
        configs[i].write_text(quickstart_properties(i, roles, tmp_path, voters, ports[i]))
        subprocess.run([KRAFT_NODE, "format", "--config", str(configs[i]), "--cluster-id", cluster_id],
                       capture_output=True, text=True, check=True)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    try:
        for i, path in configs.items():
            with open(tmp_path / f"node-{i}.log", "wb") as log:
                procs[i] = subprocess.Popen([KRAFT_NODE, "start", "--config", str(path)], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        leader: int | None = None
        unfenced: list[int] = []
        deadline = time.monotonic() + 90  # generous: on a loaded machine processes start slowly
        while time.monotonic() < deadline and (leader is None or unfenced != brokers):
            exited = {i: p.returncode for i, p in procs.items() if p.poll() is not None}
            assert not exited, f"exited: {exited}; " + (tmp_path / f"node-{min(exited)}.log").read_text()[-2000:]
            for c in controllers if leader is None else ():  # only the leader answers DescribeQuorum
                leader = leader or _ask(lambda c=c: describe_quorum_now("localhost", ports[c]), "leader")
            unfenced = _ask(lambda: sorted(b["id"] for b in describe_cluster_now("localhost", ports[4])["brokers"]),
                            None) or []
            time.sleep(0.1)
        journals = {i: read_journal(journal_of(tmp_path, i, controllers)) for i in configs}
        assert leader in controllers, f"no quorum leader; controllers' journals end: {_tails(journals, controllers)}"
        assert unfenced == brokers, f"brokers unfenced: {unfenced}; brokers' journals end: {_tails(journals, brokers)}"
        for b in brokers:  # each broker answers with the same view
            out = describe_cluster_now("localhost", ports[b])
            assert out["cluster_id"] == cluster_id and [x["id"] for x in out["brokers"]] == brokers
        assert all(p.poll() is None for p in procs.values())
    finally:
        for p in procs.values():
            p.kill()
            p.wait(30)
    # the first election, timed by the nodes' own clocks from the last controller's start
    starts = [next(e["ts"] for e in journals[i] if e["ev"] == "start") for i in controllers]
    elected = min(e["ts"] for i in controllers for e in journals[i] if e["ev"] == "role" and e["role"] == "leader")
    assert (elected - max(starts)) / 1000 <= LEADER_WITHIN_S, f"first leader {(elected - max(starts)) / 1000:.1f} s"
    for i in configs:  # no metrics endpoint unless configured (it would be journalled)
        assert not [e for e in journals[i] if e["ev"] == "metrics"]


def journal_of(base: Path, i: int, controllers: list[int]) -> Path:
    return base / f"kraft-{'controller' if i in controllers else 'broker'}-logs-{i}" / "journal.jsonl"


def _ask(query: Callable[[], Any], key: str | None) -> Any:
    try:
        out = query()
    except AdminError:
        return None
    return out.get(key) if key is not None else out


def _tails(journals: dict[int, list[dict[str, Any]]], nodes: list[int]) -> dict[int, list[dict[str, Any]]]:
    return {i: journals[i][-3:] for i in nodes}
