"""Schedules: package parsing, seeded determinism, alternation, save/load, replay through a runner."""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlab.control.host import CommandResult
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.package import FLAP_GAP_S, Cluster, Timing
from kraftlab.nemesis.packages import PACKAGES, WINDOWS
from kraftlab.nemesis.partition import FLAP_SHAPES, draw_flapping
from kraftlab.nemesis.ports import MemoryRecorder
from kraftlab.nemesis.runner import ScheduleRunner
from kraftlab.nemesis.schedule import Schedule, ScheduleError, Step, generate, load, parse_packages, save

TINY = Timing(election_s=0.001, fetch_s=0.001, request_s=0.001, session_s=0.002, heartbeat_s=0.001,
              self_fence_s=0.004)
"""Timeouts so short that whole schedules fit in a fraction of a second (for runner tests)."""
NODES = ["n1", "n2", "n3", "n4", "n5"]
KW = {"nodes": NODES, "controllers": NODES[:3], "brokers": NODES}
ALL = list(PACKAGES)


def test_parse_packages() -> None:
    assert parse_packages("none") == [] == parse_packages("")
    assert parse_packages("all") == ALL
    assert parse_packages("kill, partition,kill") == ["kill", "partition"]
    with pytest.raises(ScheduleError, match="unknown nemesis bogus"):
        parse_packages("partition,bogus")


def test_same_seed_same_schedule_other_seed_other() -> None:
    a = generate(ALL, seed=7, duration=300, **KW)
    b = generate(ALL, seed=7, duration=300, **KW)
    c = generate(ALL, seed=8, duration=300, **KW)
    assert a.to_json() == b.to_json()
    assert a.steps != c.steps


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31))
def test_all_packages_for_60_s_give_at_least_six_windows_that_close_in_order(seed: int) -> None:
    sched = generate(ALL, seed=seed, duration=60, **KW)
    windows = sched.windows()
    assert len(windows) >= 6
    assert len({s.window for s, _ in windows}) == len(windows)
    lanes: dict[str, float] = {}
    for start, stop in windows:
        assert Timing().election_s <= start.at < 60 and start.purpose
        package = PACKAGES[start.package]
        if stop is None:
            lanes[start.package] = 60.0  # held until the final heal: the lane's last window
            continue
        assert stop.package == start.package and stop.f == package.windows[start.f]
        assert start.at < stop.at < 60
        assert lanes.get(start.package, 0.0) <= start.at, "a package's windows never overlap each other"
        lanes[start.package] = stop.at


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31))
def test_swarm_keeps_a_recorded_subset_with_a_package_that_moves_leadership(seed: int) -> None:
    sched = generate(ALL, seed=seed, duration=60, **KW)
    assert 2 <= len(sched.swarm) <= len(ALL)
    assert any(PACKAGES[p].moves_leadership for p in sched.swarm)
    assert {s.package for s in sched.steps} <= set(sched.swarm)
    cluster = Cluster(tuple(NODES), tuple(NODES[:3]), tuple(NODES))
    for package, enabled in sched.swarm.items():
        modes = {m for m, _ in PACKAGES[package].modes(cluster)}
        assert enabled and set(enabled) <= modes | set(PACKAGES[package].flags)
        aimed = set(PACKAGES[package].leader_modes) & modes
        assert not aimed or aimed & set(enabled), f"{package} kept without a mode aimed at the active controller"
    whole = generate(ALL, seed=seed, duration=60, use_swarm=False, **KW)
    assert whole.swarm == {} and {s.package for s in whole.steps} >= {"partition", "kill", "pause"}


def test_overlapping_windows_of_different_packages() -> None:
    sched = generate(ALL, seed=3, duration=120, use_swarm=False, **KW)
    spans = [(s.at, e.at if e else 120.0, s.package) for s, e in sched.windows()]
    assert any(a0 < b1 and b0 < a1 and pa != pb for a0, a1, pa in spans for b0, b1, pb in spans)


def test_windows_are_sized_to_the_node_timeouts() -> None:
    for timing in (Timing(), Timing(fetch_s=4.0, election_s=2.0, session_s=18.0, self_fence_s=36.0)):
        sched = generate(["partition", "kill", "pause"], seed=5, duration=2000, timing=timing, use_swarm=False, **KW)
        assert sched.timing == timing.to_json()
        for start, stop in sched.windows():
            if stop is None:
                continue
            length = stop.at - start.at
            topology = start.value.get("topology")
            if (start.purpose or "").startswith("flapping"):
                # a flap outlasts a follower's fetch timeout and an election, not always check-quorum
                lo, hi = timing.fetch_s + timing.election_s, timing.failover_s + timing.election_s
                assert lo - 0.01 <= length <= hi + 0.01, (start, length)
            elif topology in ("isolate-controller", "leader-with-brokers", "voters-apart-from-leader"):
                assert length >= timing.failover_s - 0.01, (start, length)
            if topology == "isolate-node":
                assert length >= timing.fence_s - 0.01
            if start.f in ("kill", "graceful-stop") and start.value.get("chosen_as") in ("all", "majority-voters"):
                assert length <= 3.0, "no whole-cluster or quorum-wide stop longer than a few seconds"
            if start.f == "pause" and start.value.get("chosen_as") in ("all", "majority-voters"):
                # past the fetch timeout, so the woken timers expire together, and no longer stop than that
                assert timing.fetch_s < length <= timing.fetch_s + 1.0 + 0.01, (start, length)


def test_pauses_reach_a_majority_of_voters_and_every_node() -> None:
    """Woken together, paused voters' timers expire at once: the simultaneous candidacies a single
    pause never makes (a generic run saw no contested election)."""
    sched = generate(["pause"], seed=7, duration=2000, use_swarm=False, **KW)
    chosen = {s.value.get("chosen_as") for s in sched.steps if s.f == "pause"}
    assert {"majority-voters", "all"} <= chosen, chosen


def test_choices_are_concrete_except_the_active_controller() -> None:
    sched = generate(["kill", "pause", "partition", "clock"], seed=11, duration=200, use_swarm=False, **KW)
    for step in sched.steps:
        if step.opens and step.f in ("kill", "graceful-stop", "pause", "clock-bump", "clock-rate", "clock-strobe"):
            assert ("nodes" in step.value) != (step.value.get("target") == "controller"), step
        if step.f == "start-partition":
            assert isinstance(step.value["seed"], int)


def test_none_is_empty() -> None:
    assert generate([], seed=1, duration=100, **KW).steps == []


def test_save_load_round_trip_and_the_version_1_format(tmp_path: Path) -> None:
    sched = generate(ALL, seed=5, duration=60, **KW)
    path = save(sched, tmp_path / "run")
    assert json.loads(path.read_text())["version"] == 2
    assert load(tmp_path / "run").to_json() == sched.to_json()
    with pytest.raises(ScheduleError, match="no nemesis schedule"):
        load(tmp_path / "nowhere")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ScheduleError):
        load(tmp_path / "bad.json")
    (tmp_path / "v9.json").write_text('{"version": 9}')
    with pytest.raises(ScheduleError, match="unsupported schedule version 9"):
        load(tmp_path / "v9.json")
    old = {"version": 1, "seed": 3, "interval": 10.0, "duration": 60.0, "packages": ["kill"], "nodes": NODES,
           "controllers": NODES[:3], "brokers": NODES[3:],
           "steps": [{"at": 10.0, "package": "kill", "f": "kill", "value": {"nodes": ["n2"]}},
                     {"at": 20.0, "package": "kill", "f": "restart", "value": {}}]}
    (tmp_path / "v1.json").write_text(json.dumps(old))
    v1 = load(tmp_path / "v1.json")
    assert [(s.at, s.f, s.window) for s in v1.steps] == [(10.0, "kill", None), (20.0, "restart", None)]


def test_a_window_stop_undoes_exactly_the_nodes_its_start_resolved() -> None:
    control = FakeNodeControl()
    sched = Schedule(1, None, 0.2, ["kill"], control.nodes(), control.controllers(), control.brokers(), [
        Step(0.0, "kill", "kill", {"target": "controller"}, 0, "why"),
        Step(0.0, "kill", "kill", {"nodes": ["n5"]}, 1, "why"),
        Step(0.05, "kill", "restart", {}, 0),
    ])
    nemesis = Nemesis("w", control, seed=1)
    runner = ScheduleRunner(nemesis, sched)
    runner.start()
    time.sleep(0.12)
    active = control.active_controller()
    states = {n: f.state for n, f in control.nodes_by_name.items()}
    assert states["n5"] != "running", "window 1 is held until the end of the run"
    restarts = [c for c in runner.done if c.f == "restart"]
    assert restarts and restarts[0].value["nodes"] == [active or restarts[0].value["nodes"][0]]
    runner.stop()
    assert all(f.state == "running" for f in control.nodes_by_name.values())
    assert nemesis.status() == {}


def replay(tmp_path: Path, seed: int) -> list[dict]:
    control = FakeNodeControl()
    sched = generate(ALL, seed=seed, interval=0.001, duration=0.08, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=control.brokers(), timing=TINY)
    save(sched, tmp_path)
    recorded = MemoryRecorder()
    nemesis = Nemesis("r", control, recorder=recorded, seed=99)
    ScheduleRunner(nemesis, load(tmp_path)).run()
    assert nemesis.status() == {}
    assert all(f.state == "running" for f in control.nodes_by_name.values())
    def timeless(value: object) -> object:  # when a rate was set is not what was done
        return {k: v for k, v in value.items() if k != "anchor_mono_ns"} if isinstance(value, dict) else value

    return [{"type": op["type"], "f": op["f"], "value": timeless(op["value"])} for op in recorded]


def test_replay_repeats_the_same_ops_and_heals_at_the_end(tmp_path: Path) -> None:
    first = replay(tmp_path / "a", 21)
    second = replay(tmp_path / "b", 21)
    assert first == second
    assert len(first) > 20
    assert {op["f"] for op in first} >= {"start-partition", "stop-partition"}


def test_runner_stops_early_and_heals() -> None:
    control = FakeNodeControl()
    sched = generate(["kill"], seed=1, interval=0.05, duration=60, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=control.brokers(), timing=TINY)
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
    from kraftlab.nemesis.ports import MemoryLedger
    from kraftlab.nemesis.session import history_recorder, prepare_run
    from kraftlab.workloads.history import HistoryWriter

    def one_run(run_dir: Path, replay_from: Path | None) -> list[tuple[str, str, object]]:
        run_dir.mkdir(parents=True)
        writer = HistoryWriter(run_dir / "history.jsonl")
        run = prepare_run("sess", FakeNodeControl(), packages="partition,kill,clock", interval=0.01, duration=0.3,
                          seed=17, run_dir=run_dir, recorder=history_recorder(writer), replay_from=replay_from,
                          ledger=MemoryLedger(), timing=TINY)
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
@given(st.integers(0, 2**31), st.lists(st.sampled_from(ALL), min_size=1, unique=True), st.booleans())
def test_any_schedule_then_heal_all_restores_everything(seed: int, packages: list[str], combined: bool) -> None:
    control = FakeNodeControl(combined=combined)
    for node in control.nodes():  # disk damage answers as the real script would
        control.host(node).on("python3 -c", CommandResult(node, "", 0, '{"action": "x"}\n', ""))
    sched = generate(packages, seed=seed, interval=1, duration=40, nodes=control.nodes(),
                     controllers=control.controllers(), brokers=control.brokers())
    nemesis = Nemesis("h", control, seed=seed)
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
    sched = generate(["disk"], seed=2, duration=1200, use_swarm=False, **KW)
    starts = [s.value for s in sched.steps if s.f == "start-disk"]
    assert {v["damage"] for v in starts} == {"truncate-tail", "flip-bits", "delete-quorum-state", "wipe",
                                            "truncate", "zero", "copy-chunk"}
    assert {v.get("zone") for v in starts} > {None, "active-segment", "snapshot"}  # by KRaft zone too
    assert any(v.get("helix") for v in starts)
    for v in starts:
        assert set(v["nodes"]) <= {"n4", "n5"}, v
    combined = generate(["disk"], seed=2, duration=100, nodes=NODES, controllers=NODES, brokers=NODES)
    assert {s.value["damage"] for s in combined.steps if s.f == "start-disk"} <= {"truncate-tail", "flip-bits"}


def test_flapping_changes_the_partition_shape_back_to_back() -> None:
    """A flapping series: three to six partitions of shapes from the seed's enabled ones, each closed
    and the next opened FLAP_GAP_S later, each a little past a fetch timeout and an election."""
    cluster = Cluster(tuple(NODES), tuple(NODES[:3]), tuple(NODES))
    timing = Timing()
    for seed in range(20):
        rng = random.Random(seed)
        first = draw_flapping(rng, cluster, timing, ["bridge", "majorities-ring"])
        series = (first, *first.then)
        assert 3 <= len(series) <= 6
        assert {d.value["topology"] for d in series} <= {"bridge", "majorities-ring"}
        assert all(timing.fetch_s + timing.election_s <= d.duration <= timing.failover_s + timing.election_s
                   for d in series)
    # with none of its shapes enabled it flaps between all of them
    first = draw_flapping(random.Random(1), cluster, timing, ["flapping"])
    assert {d.value["topology"] for d in (first, *first.then)} <= {m for m, _ in FLAP_SHAPES}

    sched = generate(["partition"], seed=0, duration=600, use_swarm=False, **KW)
    windows = [(s, e) for s, e in sched.windows() if (s.purpose or "").startswith("flapping")]
    assert windows, "a 10-minute schedule with every mode draws a flapping series"
    runs = [w for w in windows if w[0].purpose and w[0].purpose.startswith("flapping 1/")]
    for start, _ in runs:
        count = int(str(start.purpose).split("/")[1].split(":")[0])
        i = windows.index((start, _))
        series = windows[i:i + count]
        for (_, stop), (nxt, _) in itertools.pairwise(series):
            assert stop is not None and abs(nxt.at - stop.at - FLAP_GAP_S) < 0.002
    # replayed from its saved form, the series is the same steps
    assert Schedule.from_json(json.loads(json.dumps(sched.to_json()))).steps == sched.steps


def test_flapping_is_a_partition_mode_swarm_testing_keeps_or_drops() -> None:
    kept = [generate(["partition"], seed=s, duration=60, **KW).swarm.get("partition", []) for s in range(30)]
    with_flapping = sum("flapping" in modes for modes in kept)
    assert 0 < with_flapping < len(kept)
