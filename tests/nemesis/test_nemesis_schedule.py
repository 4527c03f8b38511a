"""Schedules: package parsing, seeded determinism, alternation, save/load, replay through a runner."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import Recorded
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlab.control.host import CommandResult
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.runner import ScheduleRunner
from kraftlab.nemesis.schedule import PACKAGES, STOPS, ScheduleError, generate, load, parse_packages, save

NODES = ["n1", "n2", "n3", "n4", "n5"]
KW = {"nodes": NODES, "controllers": NODES[:3], "brokers": NODES[3:]}


def test_parse_packages() -> None:
    assert parse_packages("none") == [] == parse_packages("")
    assert parse_packages("all") == list(PACKAGES)
    assert parse_packages("kill, partition,kill") == ["kill", "partition"]
    with pytest.raises(ScheduleError, match="unknown nemesis bogus"):
        parse_packages("partition,bogus")


def test_same_seed_same_schedule_other_seed_other() -> None:
    a = generate(PACKAGES, seed=7, interval=5, duration=300, **KW)
    b = generate(PACKAGES, seed=7, interval=5, duration=300, **KW)
    c = generate(PACKAGES, seed=8, interval=5, duration=300, **KW)
    assert a.to_json() == b.to_json()
    assert a.steps != c.steps
    assert len(a.steps) == 59 and a.steps[0].at == 5.0 and a.steps[-1].at == 295.0


def test_each_package_alternates_start_and_stop() -> None:
    sched = generate(PACKAGES, seed=3, interval=1, duration=400, **KW)
    for package in PACKAGES:
        fs = [s.f for s in sched.steps if s.package == package]
        assert fs, package
        stops = [f == STOPS[package][0] for f in fs]
        assert stops == [i % 2 == 1 for i in range(len(fs))], package


def test_choices_are_concrete_except_the_active_controller() -> None:
    sched = generate(["kill", "pause", "partition"], seed=11, interval=1, duration=200, **KW)
    for step in sched.steps:
        if step.f in ("kill", "graceful-stop", "pause"):
            assert ("nodes" in step.value) != (step.value.get("target") == "controller"), step
        if step.f == "start-partition":
            assert isinstance(step.value["seed"], int)


def test_none_is_empty() -> None:
    assert generate([], seed=1, interval=1, duration=100, **KW).steps == []


def test_save_load_round_trip(tmp_path: Path) -> None:
    sched = generate(PACKAGES, seed=5, interval=2, duration=60, **KW)
    path = save(sched, tmp_path / "run")
    assert json.loads(path.read_text())["version"] == 1
    assert load(tmp_path / "run").to_json() == sched.to_json()
    with pytest.raises(ScheduleError, match="no nemesis schedule"):
        load(tmp_path / "nowhere")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ScheduleError):
        load(tmp_path / "bad.json")


def replay(tmp_path: Path, seed: int) -> list[dict]:
    control = FakeNodeControl()
    sched = generate(PACKAGES, seed=seed, interval=0.001, duration=0.08, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=[n for n in control.nodes()
                                                                 if n not in control.controllers()])
    save(sched, tmp_path)
    recorded = Recorded()
    nemesis = Nemesis("r", control, recorder=recorded, seed=99, local_boot_id="x")
    ScheduleRunner(nemesis, load(tmp_path)).run()
    assert nemesis.status() == {}
    assert all(f.state == "running" for f in control.nodes_by_name.values())
    return [{k: op[k] for k in ("type", "f", "value")} for op in recorded]


def test_replay_repeats_the_same_ops_and_heals_at_the_end(tmp_path: Path) -> None:
    first = replay(tmp_path / "a", 21)
    second = replay(tmp_path / "b", 21)
    assert first == second
    assert len(first) > 20
    assert {op["f"] for op in first} >= {"start-partition", "stop-partition"}


def test_runner_stops_early_and_heals() -> None:
    control = FakeNodeControl()
    sched = generate(["kill"], seed=1, interval=0.05, duration=60, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=control.brokers())
    nemesis = Nemesis("s", control, seed=1)
    runner = ScheduleRunner(nemesis, sched)
    runner.start()
    time.sleep(0.3)
    runner.stop()
    assert 1 <= len(runner.done) < len(sched.steps)
    assert nemesis.status() == {}
    assert all(f.state == "running" for f in control.nodes_by_name.values())


def test_session_saves_the_schedule_records_into_the_history_and_replays(tmp_path: Path) -> None:
    from kraftlab.checker.history import read_jsonl
    from kraftlab.nemesis.fault import WINDOWS
    from kraftlab.nemesis.ports import MemoryLedger
    from kraftlab.nemesis.session import history_recorder, prepare_run
    from kraftlab.workloads.history import HistoryWriter

    def one_run(run_dir: Path, replay_from: Path | None) -> list[tuple[str, str, object]]:
        run_dir.mkdir(parents=True)
        writer = HistoryWriter(run_dir / "history.jsonl")
        run = prepare_run("sess", FakeNodeControl(), packages="partition,kill,clock", interval=0.01, duration=0.3,
                          seed=17, run_dir=run_dir, recorder=history_recorder(writer), replay_from=replay_from,
                          ledger=MemoryLedger())
        assert run.schedule_path == run_dir / "nemesis-schedule.json"
        run.start()
        run.runner._thread.join(10)  # type: ignore[union-attr]
        run.stop()
        writer.close()
        ops = [e.to_json() for e in read_jsonl(run_dir / "history.jsonl").events]
        assert ops and all(op["process"] == "nemesis" for op in ops)
        assert [op["index"] for op in ops] == list(range(len(ops)))
        assert run.nemesis.status() == {}
        timeless = [{k: v for k, v in op["value"].items() if k != "anchor_mono_ns"} for op in ops]  # when, not what
        return [(op["type"], op["f"], value) for op, value in zip(ops, timeless, strict=True)]

    first = one_run(tmp_path / "a", None)
    again = one_run(tmp_path / "b", tmp_path / "a")
    assert first == again
    assert {f for _, f, _ in first if f in WINDOWS} and set(WINDOWS.values()) >= {f for _, f, _ in first
                                                                                 if f not in WINDOWS}


@settings(max_examples=int(os.environ.get("NEMESIS_SCHEDULE_EXAMPLES", "40")))
@given(st.integers(0, 2**31), st.lists(st.sampled_from(PACKAGES), min_size=1, unique=True), st.booleans())
def test_any_schedule_then_heal_all_restores_everything(seed: int, packages: list[str], combined: bool) -> None:
    control = FakeNodeControl(combined=combined)
    for node in control.nodes():  # disk damage answers as the real script would
        control.host(node).on("python3 -c", CommandResult(node, "", 0, '{"action": "x"}\n', ""))
    sched = generate(packages, seed=seed, interval=1, duration=40, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=control.brokers())
    nemesis = Nemesis("h", control, seed=seed, local_boot_id="me")
    try:
        for step in sched.steps:
            nemesis.invoke(step.f, step.value)
    finally:
        nemesis.close()
        healed = nemesis.heal_all()
    assert all(c.type == "ok" for c in healed), healed
    assert nemesis.status() == {} and nemesis.heal_all() == []
    assert all(f.state == "running" for f in control.nodes_by_name.values())
    for node in control.nodes():
        network = [c for c in control.host(node).commands if "KRAFTLAB-h" in c or "tc qdisc" in c]
        if any("KRAFTLAB-h " in c or "KRAFTLAB-h -" in c for c in network):
            last = [c for c in network if "KRAFTLAB-h " in c or ":KRAFTLAB-h " in c][-1]
            assert last.startswith("iptables -w 10 -F KRAFTLAB-h "), last


def test_generated_disk_faults_lose_stable_storage_only_on_broker_only_nodes() -> None:
    sched = generate(["disk"], seed=2, interval=1, duration=400, **KW)
    starts = [s.value for s in sched.steps if s.f == "start-disk"]
    assert {v["damage"] for v in starts} == {"truncate-tail", "flip-bits", "delete-quorum-state", "wipe"}
    for v in starts:
        if v["damage"] in ("wipe", "delete-quorum-state"):
            assert set(v["nodes"]) <= {"n4", "n5"}, v
    combined = generate(["disk"], seed=2, interval=1, duration=100, nodes=NODES, controllers=NODES, brokers=NODES)
    assert {s.value["damage"] for s in combined.steps if s.f == "start-disk"} <= {"truncate-tail", "flip-bits"}
