"""End to end: workloads against 3 real `kraft-node` processes (combined broker+controller roles)
on loopback: topics for ~10 s (its history must check valid with the `topics` model) and, marked
slow, mixed for ~20 s."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wl_harness import stale_alters, verdicts

from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.workloads.catalog import build
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import ProcessIds, run_phase
from kraftlab.workloads.versions import metadata_request

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
RECOVERY_S = 3.0
KRAFT_NODE = str(Path(sys.executable).with_name("kraft-node"))


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def properties(i: int, base: Path, ports: dict[int, tuple[int, int]]) -> str:
    broker, controller = ports[i]
    voters = ",".join(f"{j}@127.0.0.1:{c}" for j, (_, c) in sorted(ports.items()))
    props = {
        "process.roles": "broker,controller", "node.id": str(i), "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker}", "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "metadata.log.dir": str(base / f"n{i}" / "meta"), "log.dirs": str(base / f"n{i}" / "data"),
        "kraftlab.journal.file": str(base / f"n{i}" / "journal.jsonl"), "kraftlab.metrics.port": "0",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


async def visible_brokers(addr: tuple[str, int]) -> int:
    async with ProtocolClient(*addr, request_timeout=1.0, connect_timeout=1.0) as c:
        resp = await c.send(metadata_request(1, []))  # v1: served by every broker
        return len(resp.brokers)


def wait_ready(ports: dict[int, tuple[int, int]], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = []
        for broker, _ in ports.values():
            try:
                counts.append(asyncio.run(visible_brokers(("127.0.0.1", broker))))
            except Exception:
                counts.append(0)
        if all(n == len(ports) for n in counts):
            return
        time.sleep(0.3)
    raise TimeoutError(f"brokers not all unfenced within {timeout}s")


@contextlib.contextmanager
def real_cluster(base: Path) -> Iterator[dict[str, Any]]:
    """3 formatted, started, ready `kraft-node` processes; their cluster dict. Killed on exit."""
    ports_flat = free_ports(6)
    ports = {i: (ports_flat[2 * i - 2], ports_flat[2 * i - 1]) for i in (1, 2, 3)}
    cluster_id = subprocess.run([KRAFT_NODE, "random-uuid"], check=True, capture_output=True, text=True).stdout.strip()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in ports:
            cfg = base / f"n{i}.properties"
            cfg.write_text(properties(i, base, ports))
            subprocess.run([KRAFT_NODE, "format", "--config", str(cfg), "--cluster-id", cluster_id], check=True,
                           capture_output=True)
            with open(base / f"n{i}.log", "ab") as log:
                procs.append(subprocess.Popen([KRAFT_NODE, "start", "--config", str(cfg)], stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        wait_ready(ports)
        yield {f"n{i}": {"id": i, "broker": f"127.0.0.1:{b}", "controller": f"127.0.0.1:{c}"}
               for i, (b, c) in ports.items()}
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(10)


def drive(name: str, spec: dict[str, Any], seconds: float, out_dir: Path) -> tuple[list[dict[str, Any]], Any]:
    """Main phase, a recovery wait (as the runner does), final reads; the history's lines."""
    w = build(name, spec, rate=40.0, concurrency=6, time_limit=seconds, request_timeout=5.0)
    out = io.StringIO()
    history = HistoryWriter(stream=out)
    pids = ProcessIds()

    async def go() -> None:
        nodes = sorted(spec)
        await run_phase(w.main, w.factory, history, pids, nodes=nodes, concurrency=6, rng=random.Random(11),
                        op_timeout=8.0)
        await asyncio.sleep(RECOVERY_S)
        await run_phase(w.final, w.factory, history, pids, nodes=nodes, concurrency=3, rng=random.Random(12),
                        op_timeout=8.0)

    asyncio.run(go())
    (out_dir / "history.jsonl").write_text(out.getvalue())
    return [json.loads(x) for x in out.getvalue().splitlines()], w


def test_topics_workload_against_real_nodes(tmp_path: Path) -> None:
    with real_cluster(tmp_path) as spec:
        lines, w = drive("topics", spec, 10.0, tmp_path)
    done = [x for x in lines if x["type"] != "invoke"]
    oks = {f: sum(1 for x in done if x["f"] == f and x["type"] == "ok") for f in ("create", "delete", "list")}
    assert oks["create"] > 5 and oks["delete"] > 2 and oks["list"] > 3, oks
    final_procs = {x["process"] for x in lines if x["type"] == "invoke" and x["value"].get("final")}
    finals = [x for x in done if x["process"] in final_procs]
    assert [x["type"] for x in finals] == ["ok"] * 3, finals
    assert len({json.dumps(x["value"]) for x in finals}) == 1, finals  # every broker caught up
    assert verdicts(lines, w.models) == {"topics": True}


@pytest.mark.slow
def test_mixed_workload_against_real_nodes(tmp_path: Path) -> None:
    with real_cluster(tmp_path) as spec:
        lines, _ = drive("mixed", spec, 20.0, tmp_path)
    done = Counter((x["workload"], x["f"]) for x in lines if x["type"] == "ok")
    for key in [("topics", "create"), ("registry", "register"), ("registry", "heartbeat"), ("isr", "alter")]:
        assert done[key] > 0, done
    assert stale_alters(lines) == []
    # the isr model: see test_isr.test_isr_model_accepts_a_correct_cluster
    assert verdicts(lines, ("topics", "registry")) == {"topics": True, "registry": True}
