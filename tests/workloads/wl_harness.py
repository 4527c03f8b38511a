"""Runs a catalog workload against the in-memory Kafka fake and checks its history with the
checker's models (the selection a runner gives the linearizability checker)."""

from __future__ import annotations

import asyncio
import io
import json
import random
from typing import Any

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.judged import client_events
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.workloads.catalog import Workload, build
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import ProcessIds, run_phase


def run(name: str, fake: FakeKafka, *, seconds: float = 1.5, seed: int = 1, rate: float = 400.0,
        concurrency: int = 6, op_timeout: float = 1.0) -> tuple[list[dict[str, Any]], Workload]:
    """Main phase then final reads; the history's lines."""
    w = build(name, fake.spec(), rate=rate, concurrency=concurrency, time_limit=seconds, connector=fake.connector,
              session_timeout=fake.session_timeout_s)
    out = io.StringIO()
    history = HistoryWriter(stream=out)
    pids = ProcessIds()
    nodes = sorted(fake.spec())

    async def go() -> None:
        await run_phase(w.main, w.factory, history, pids, nodes=nodes, concurrency=concurrency,
                        rng=random.Random(seed), op_timeout=op_timeout)
        await run_phase(w.final, w.factory, history, pids, nodes=nodes, concurrency=concurrency,
                        rng=random.Random(seed + 1), op_timeout=op_timeout)

    asyncio.run(go())
    return [json.loads(line) for line in out.getvalue().splitlines()], w


def select(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history lines the linearizability checker judges (checker.judged), as lines."""
    events = [parse_jsonl_line(json.dumps(x), "<test>", i + 1, i) for i, x in enumerate(lines)]
    keep = {e.index for e in client_events(events)}
    return [x for i, x in enumerate(lines) if i in keep]


def verdicts(lines: list[dict[str, Any]], models: tuple[str, ...]) -> dict[str, Any]:
    """model name → the linearizability verdict of that workload's part of the history."""
    chosen = select(lines)
    out = {}
    for m in models:
        part = [x for x in chosen if x.get("workload") == m]
        events = [parse_jsonl_line(json.dumps(x), "<test>", i + 1, i) for i, x in enumerate(part)]
        out[m] = check_linearizable(History(events), build_model(m))["valid"]
    return out


def completions(lines: list[dict[str, Any]], f: str, type_: str | None = None) -> list[dict[str, Any]]:
    return [x for x in lines if x["f"] == f and x["type"] != "invoke" and (type_ is None or x["type"] == type_)]


def open_client(fake: FakeKafka, handlers: Any, node: str = "n1", process: int = 0) -> Any:
    """A Kafka client of `node` over the fake with these handlers."""
    from kraftlab.workloads.kafka import Cluster
    from kraftlab.workloads.session import KafkaClientFactory

    factory = KafkaClientFactory(Cluster.parse(fake.spec()), fake.connector, handlers)
    return asyncio.run(factory.open(node, process))


def invoke(client: Any, inv: Any, timeout: float = 2.0) -> Any:
    from kraftlab.workloads.interpreter import invoke_once

    return asyncio.run(invoke_once(client, inv, timeout))


def stale_alters(lines: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """A model-free check of AlterPartition's compare-and-set: (line of an ok alter, line of an
    earlier-completed ok alter of the same partition that had already moved the partition epoch
    past the one the first was sent with). Empty on a correct controller."""
    calls: dict[Any, dict[str, Any]] = {}
    done: list[tuple[int, int, tuple[str, int], int]] = []  # (invoke line, ok line, partition, epoch after)
    out = []
    for x in lines:
        if x["type"] == "invoke":
            calls[x["process"]] = x
            continue
        inv = calls.get(x["process"])
        if inv is None or x["f"] != "alter" or x["type"] != "ok":
            continue
        key = (inv["value"]["topic"], inv["value"]["partition"])
        sent = int(inv["value"]["partition_epoch"])
        out += [(x["index"], ok_line) for _, ok_line, k, after in done
                if k == key and ok_line < inv["index"] and after > sent]
        done.append((inv["index"], x["index"], key, int(x["value"]["partition_epoch"])))
    return out


def epoch_bumps(lines: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """A model-free check of re-sent registrations: (line of an ok register, line of a later ok
    register of the same broker and incarnation answered with another epoch), with no
    unregistration of that broker and no registration of another incarnation completed between
    them. Sound for the fake (its ops take effect before they complete); empty on a correct one."""
    calls: dict[Any, dict[str, Any]] = {}
    held: dict[int, tuple[str, int, int]] = {}  # broker → (incarnation, epoch, ok line)
    out = []
    for x in lines:
        if x["type"] == "invoke":
            calls[x["process"]] = x
            continue
        inv = calls.get(x["process"])
        if inv is None or x["f"] not in ("register", "unregister"):
            continue
        b, inc = int(inv["value"]["broker"]), inv["value"].get("incarnation")
        if x["f"] == "unregister" or (b in held and held[b][0] != inc):
            held.pop(b, None)
        if x["f"] == "register" and x["type"] == "ok":
            ep = int(x["value"]["epoch"])
            if b in held and held[b][1] != ep:
                out.append((held[b][2], x["index"]))
            held[b] = (inc, ep, x["index"])
    return out
