"""Workload op semantics against an in-memory fake cluster: ok/fail/info mapping, retirement of
processes after info, one op in flight per process, and a complete, well-formed history."""

from __future__ import annotations

import asyncio
import io
import json
import random

import pytest

from kraftlab.workloads.client import Invocation
from kraftlab.workloads.fake import FakeCluster, FakeFactory
from kraftlab.workloads.generator import EachNodeOnce, FnGen, Limit, Mix, Stagger, TimeLimit
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import ProcessIds, run_phase

NODES = ["n1", "n2", "n3"]


def topic_gen() -> Mix:
    names = [f"t{i}" for i in range(4)]
    return Mix([
        FnGen(lambda ctx: Invocation("create", ctx.rng.choice(names))),
        FnGen(lambda ctx: Invocation("delete", ctx.rng.choice(names))),
        FnGen(lambda ctx: Invocation("list")),
    ])


def run(gen, cluster: FakeCluster, *, concurrency=4, timeout=0.05, factory=None):
    out = io.StringIO()
    h = HistoryWriter(stream=out)
    factory = factory or FakeFactory(cluster)
    stats = asyncio.run(run_phase(gen, factory, h, ProcessIds(), nodes=NODES, concurrency=concurrency,
                                  rng=random.Random(7), op_timeout=timeout))
    ops = [json.loads(line) for line in out.getvalue().splitlines()]
    return ops, stats, factory


def check_well_formed(ops: list[dict]) -> None:
    """Every invoke is completed by the same process before it invokes again; retired processes
    never come back; indexes are dense."""
    assert [o["index"] for o in ops] == list(range(len(ops)))
    pending: dict[int, dict] = {}
    retired: set[int] = set()
    for o in ops:
        p = o["process"]
        assert p not in retired, f"retired process {p} issued {o}"
        if o["type"] == "invoke":
            assert p not in pending, f"process {p} invoked twice without completing"
            pending[p] = o
        else:
            inv = pending.pop(p)
            assert inv["f"] == o["f"]
            if o["type"] == "info":
                retired.add(p)
    assert not pending


def test_clean_cluster_gives_ok_and_fail_only() -> None:
    cluster = FakeCluster()
    ops, stats, _ = run(Limit(topic_gen(), 200), cluster)
    check_well_formed(ops)
    assert stats.info == 0 and stats.ok + stats.fail == 200
    # create-if-absent: TOPIC_ALREADY_EXISTS is a fail with the error recorded
    errs = {o["error"] for o in ops if o["type"] == "fail"}
    assert errs <= {"TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_OR_PARTITION"} and errs


def test_refusals_are_fail_and_hangs_and_lost_connections_are_info() -> None:
    cluster = FakeCluster(rng=random.Random(3), p_refuse=0.2, p_hang=0.1, p_lost=0.1)
    ops, stats, factory = run(Limit(topic_gen(), 300), cluster, concurrency=5, timeout=0.02)
    check_well_formed(ops)
    assert stats.info > 0 and stats.fail > 0 and stats.ok > 0
    infos = [o for o in ops if o["type"] == "info"]
    assert {o["error"] for o in infos} >= {"timeout"}
    assert any(o["error"].startswith("ConnectionResetError") for o in infos)
    assert any(o["error"] == "NOT_CONTROLLER" for o in ops if o["type"] == "fail")
    # every info retired its process: each info belongs to a distinct process, and the workers
    # went on as new processes (all but those whose generator ran out right after)
    processes = {o["process"] for o in ops}
    assert len({o["process"] for o in infos}) == stats.info
    assert stats.info <= len(processes) <= 5 + stats.info
    # a fresh client is opened for each new process
    assert len(factory.opened) == len(processes)


def test_unreachable_node_fails_without_retiring() -> None:
    cluster = FakeCluster()
    factory = FakeFactory(cluster, unreachable={"n2"})
    ops, stats, _ = run(Limit(topic_gen(), 60), cluster, concurrency=3, factory=factory)
    check_well_formed(ops)
    n2 = [o for o in ops if o["node"] == "n2" and o["type"] != "invoke"]
    assert n2 and all(o["type"] == "fail" and o["error"].startswith("connect:") for o in n2)
    assert stats.info == 0


def test_time_limit_and_stagger_bound_the_phase() -> None:
    cluster = FakeCluster()
    ops, stats, _ = run(TimeLimit(Stagger(topic_gen(), 0.01), 0.3), cluster, concurrency=2)
    check_well_formed(ops)
    # about 2 workers × 0.3 s / 0.01 s = 60 ops; allow wide slack for a loaded machine
    assert 5 <= stats.ok + stats.fail <= 200
    assert ops[-1]["time"] < 2e9


def test_each_node_once_reads_every_node() -> None:
    cluster = FakeCluster(topics={"a"})
    ops, _, _ = run(EachNodeOnce(lambda node: Invocation("list")), cluster, concurrency=3)
    done = [o for o in ops if o["type"] == "ok"]
    assert sorted(o["node"] for o in done) == NODES
    assert all(o["value"] == ["a"] for o in done)


def test_history_file_streams_and_survives_a_torn_tail(tmp_path) -> None:
    from kraftlab.checker.history import HistoryError
    from kraftlab.checker.history import load_jsonl_tolerant as load_history

    path = tmp_path / "history.jsonl"
    h = HistoryWriter(path)
    h.record(0, "invoke", "create", "t1", node="n1", workload="topics")
    h.record(0, "ok", "create", "t1", node="n1", workload="topics")
    # readable while still open (flushed per op)
    events, notes = load_history(path)
    assert [e.type for e in events.events] == ["invoke", "ok"] and not notes
    assert events.events[0].extra == {"workload": "topics"}
    h.close()
    with open(path, "a") as f:
        f.write('{"index": 2, "time": 5, "proc')  # a runner killed mid-line
    events, notes = load_history(path)
    assert len(events.events) == 2 and "torn last line" in notes[0]
    with open(path, "a") as f:
        f.write('\n{"index": 3}\n')
    with pytest.raises(HistoryError, match=r"history.jsonl:3: not JSON"):
        load_history(path)


def test_process_numbers_never_repeat_across_phases() -> None:
    cluster = FakeCluster(rng=random.Random(5), p_lost=0.3)
    out = io.StringIO()
    h = HistoryWriter(stream=out)
    procs = ProcessIds()

    async def phase(seed: int) -> None:
        await run_phase(Limit(topic_gen(), 50), FakeFactory(cluster), h, procs, nodes=NODES,
                        concurrency=3, rng=random.Random(seed), op_timeout=0.05)

    asyncio.run(phase(1))
    first = [json.loads(x) for x in out.getvalue().splitlines()]
    asyncio.run(phase(2))
    ops = [json.loads(x) for x in out.getvalue().splitlines()]
    check_well_formed(ops)
    second = ops[len(first):]
    assert {o["process"] for o in first}.isdisjoint({o["process"] for o in second})
    assert sum(1 for o in first if o["type"] == "info") > 0
