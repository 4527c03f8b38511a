"""End to end: the queue workload's confluent-kafka clients against real `kraft-node` processes on
loopback (3 controllers, 3 brokers): sends, polls and the final reads for ~8 s, and the history
checks valid with the queue checker — every acknowledged record read back at its offset, once.
The topic is the workload's own: replication factor 3, min.insync.replicas 2."""

from __future__ import annotations

import asyncio
import io
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.queue import check_queue
from kraftlab.testing.kraftnode import ProcessCluster
from kraftlab.workloads import versions
from kraftlab.workloads.catalog import build
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import ProcessIds, run_phase
from kraftlab.workloads.kafka import Cluster, TcpConnector
from kraftlab.workloads.probe import brokers_serve

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def wait_brokers(bootstrap: str, n: int, timeout: float = 60.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(admin.list_topics(timeout=1.0).brokers) == n:
                return
        except Exception:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{n} brokers not in the metadata within {timeout}s")


def test_queue_on_real_brokers_checks_valid(tmp_path: Path) -> None:
    nodes = ProcessCluster(tmp_path, n=3, brokers=3)
    try:
        nodes.start_all()
        wait_brokers(nodes.bootstrap, 3)
        spec: dict[str, dict[str, Any]] = {
            **{f"n{i}": {"id": i, "broker": None, "controller": f"127.0.0.1:{p}"} for i, p in nodes.ports.items()},
            **{f"n{i}": {"id": i, "broker": f"127.0.0.1:{p}", "controller": None}
               for i, p in nodes.broker_ports.items()}}
        assert brokers_serve(Cluster.parse(spec), TcpConnector(), versions.DATA_PLANE)
        w = build("queue", spec, rate=60.0, concurrency=6, time_limit=8.0, request_timeout=5.0)  # RF 3, min ISR 2
        out = io.StringIO()
        history = HistoryWriter(stream=out)
        pids = ProcessIds()

        async def go() -> None:
            await run_phase(w.main, w.factory, history, pids, nodes=w.brokers, concurrency=6,
                            rng=random.Random(7), op_timeout=6.0)
            await run_phase(w.final, w.factory, history, pids, nodes=w.brokers, concurrency=3,
                            rng=random.Random(8), op_timeout=6.0)

        asyncio.run(go())
    finally:
        nodes.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    events = [parse_jsonl_line(json.dumps(x), "<e2e>", i + 1, i) for i, x in enumerate(lines)]
    res = check_queue(History(events))
    acked = res["stats"]["sends"]["acknowledged"]
    finals = [x for x in lines if x["f"] == "poll" and x["type"] == "ok" and "high_water_marks" in (x["value"] or {})]
    assert acked >= 50 and len(finals) == 12, (res["stats"], [x for x in lines if x["type"] != "ok"][:10])
    assert res["valid"] is True, res["explanation"]
