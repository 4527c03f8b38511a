"""The swarm over the cluster: the topology and the Raft timeouts a seed draws when the run leaves
them open (deterministic per seed; among the shapes the hosts allow; the fetch timeout longer than
the election timeout; an explicit option, a --config key or a replayed schedule winning), recorded in
test.json and results.json, what the runner deploys, and the nemesis sized to the drawn timeouts."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from kraftlab import runner
from kraftlab.config_swarm import TABLE, draw_config
from kraftlab.control.fake import FakeHost
from kraftlab.control.lab import Lab
from kraftlab.deploy import TOPOLOGIES, Deployment
from kraftlab.nemesis.context import ACTIVE_WAIT_S
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.schedule import Schedule, save
from kraftlab.recovery import recovery_bound
from kraftlab.report import run_shape
from kraftlab.runner import BadArguments, node_timing, resolve_topology, run_test
from kraftlab.runner import TestOptions as Options
from kraftlab.testargs import add_test_arguments, options_from
from kraftlab.topology_swarm import WEIGHTS, draw_topology, fits, topology_of


def test_the_draw_is_a_function_of_the_seed() -> None:
    assert [draw_topology(s, 5) for s in range(50)] == [draw_topology(s, 5) for s in range(50)]
    assert len({draw_topology(s, 5) for s in range(50)}) == 3


def test_the_draw_follows_the_weights() -> None:
    counts = Counter(draw_topology(s, 5) for s in range(4000))
    for topology, weight in WEIGHTS:
        assert abs(counts[topology] / 4000 - weight) < 0.03, counts


def test_only_shapes_the_hosts_allow_are_drawn() -> None:
    assert not fits("dedicated", 3) and fits("dedicated", 4) and fits("combined", 3)
    assert {draw_topology(s, 3) for s in range(200)} == {"combined", "combined+brokers"}


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_test_arguments(p)
    return p.parse_args(list(argv))


def test_the_cli_leaves_the_topology_open_unless_named() -> None:
    assert options_from(_parse("--seed", "3")).topology is None
    assert options_from(_parse("--seed", "3", "--topology", "dedicated")).topology == "dedicated"


def test_an_explicit_topology_wins() -> None:
    for topology in TOPOLOGIES:
        assert resolve_topology(Options(seed=1, topology=topology), 5) == (topology, False)
    assert resolve_topology(Options(seed=1, topology=None), 5) == (draw_topology(1, 5), True)


def test_a_replayed_schedule_keeps_the_shape_it_ran_on(tmp_path: Path) -> None:
    nodes = [f"n{i}" for i in range(1, 6)]
    assert topology_of(nodes, nodes, nodes) == "combined"
    assert topology_of(nodes, nodes[:3], nodes) == "combined+brokers"
    dedicated = Schedule(seed=9, interval=None, duration=60.0, packages=["kill"], nodes=nodes,
                         controllers=nodes[:3], brokers=nodes[3:])
    assert topology_of(dedicated.nodes, dedicated.controllers, dedicated.brokers) == "dedicated"
    save(dedicated, tmp_path)
    seed = next(s for s in range(100) if draw_topology(s, 5) != "dedicated")
    opts = Options(seed=seed, topology=None, replay_nemesis=str(tmp_path))
    assert resolve_topology(opts, 5) == ("dedicated", False)


class _Stop(Exception):
    """Ends the run right after the deployment is planned (nothing to start on fake hosts)."""


def _plan_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Deployment]:
    """Runs on five fake hosts that stop once the deployment is planned; the plans made."""
    monkeypatch.setenv("KRAFTLAB_STATE_DIR", str(tmp_path / "labs"))
    lab = Lab("swarmlab", "netns", [FakeHost(f"n{i}", f"10.9.0.{10 + i}", f"/w/n{i}") for i in range(1, 6)])
    monkeypatch.setattr(runner, "_open_lab", lambda opts: (lab, False))
    planned: list[Deployment] = []

    def deploy(self: Deployment, wait: float) -> None:
        planned.append(self)
        raise _Stop("planned")

    monkeypatch.setattr(Deployment, "deploy", deploy)
    return planned


def test_the_runner_deploys_the_drawn_five_voter_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = _plan_only(tmp_path, monkeypatch)
    seed = next(s for s in range(100) if draw_topology(s, 5) == "combined")
    code, run = run_test(Options(workload="registry", nemesis="none", seed=seed, topology=None,
                                     store=tmp_path / "store", time_limit=1.0))
    assert code == 255  # the run "crashed" where the test stopped it
    assert [s.name for s in planned[0].state.specs if s.controller] == ["n1", "n2", "n3", "n4", "n5"]
    test = json.loads(run.test_json.read_text())
    assert test["topology"] == "combined" and test["drawn"] == {"topology": "combined"}
    assert all("controller" in roles for roles in test["nodes_roles"].values())
    assert json.loads(run.results.read_text())["cluster"] == {"topology": "combined", "drawn": {"topology": "combined"}}
    assert run_shape(test) == "topology combined (drawn)"
    assert "topology combined (drawn)" in run.report.read_text()


ELECTION, FETCH, BACKOFF = ("controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
                            "controller.quorum.election.backoff.max.ms")


def test_the_config_draw_is_a_function_of_the_seed_from_the_table() -> None:
    draws = [draw_config(s, {}) for s in range(300)]
    assert draws == [draw_config(s, {}) for s in range(300)]
    for d in draws:
        assert set(d) == {row.key for row in TABLE}
        assert all(d[row.key] in row.values for row in TABLE)
    for row in TABLE:  # every value of every row is reached
        assert {d[row.key] for d in draws} == set(row.values)


def test_the_fetch_timeout_stays_longer_than_the_election_timeout() -> None:
    assert all(int(d[FETCH]) > int(d[ELECTION]) for d in (draw_config(s, {}) for s in range(500)))
    # against a key the user fixed, both ways
    assert all(int(draw_config(s, {FETCH: "1000"})[ELECTION]) < 1000 for s in range(200))
    assert all(int(draw_config(s, {ELECTION: "1000"})[FETCH]) > 1000 for s in range(200))


def test_the_users_keys_win_and_leave_the_other_draws_alone() -> None:
    for s in range(100):
        mine = draw_config(s, {BACKOFF: "777"})
        assert BACKOFF not in mine
        assert mine == {k: v for k, v in draw_config(s, {}).items() if k != BACKOFF}


def test_the_cli_draws_the_config_unless_told_not_to() -> None:
    opts = options_from(_parse("--seed", "3", "--config", f"{ELECTION}=700"))
    assert opts.config_swarm and opts.config == {ELECTION: "700"}
    assert not options_from(_parse("--no-config-swarm")).config_swarm
    assert not Options().config_swarm  # programmatic runs (the zoo's recipes) keep the node's defaults


def test_the_nemesis_and_recovery_read_the_drawn_timeouts() -> None:
    seed = next(s for s in range(100) if draw_config(s, {})[FETCH] == "3000")
    drawn = draw_config(seed, {})
    timing = node_timing(drawn)
    assert timing.fetch_s == 3.0 and timing.election_s == int(drawn[ELECTION]) / 1000
    assert timing.election_wait_s == timing.fetch_s + timing.election_s
    assert recovery_bound(timing) > recovery_bound(node_timing({FETCH: "1000", ELECTION: "300"}))
    # a leader-aimed fault waits out an election at these timeouts, not at the defaults
    control = FakeNodeControl(leader=None)
    nemesis = Nemesis("swarmlab", control, active_wait_s=timing.election_wait_s)
    now = [0.0]
    nemesis.ctx.sleep = lambda seconds: now.__setitem__(0, now[0] + seconds)
    nemesis.ctx.clock = lambda: now[0]
    failed = nemesis.invoke("start-partition", {"topology": "isolate-controller"})
    assert failed.type == "fail" and timing.election_wait_s <= now[0] <= timing.election_wait_s + 0.2 + 1e-6
    assert timing.election_wait_s > ACTIVE_WAIT_S


def test_the_runner_deploys_and_records_the_drawn_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = _plan_only(tmp_path, monkeypatch)
    seed = 5
    code, run = run_test(Options(workload="registry", nemesis="none", seed=seed, topology="combined",
                                 config_swarm=True, config={BACKOFF: "777"}, store=tmp_path / "store",
                                 time_limit=1.0))
    drawn = draw_config(seed, {BACKOFF: "777"})
    assert code == 255 and planned[0].state.overrides == {**drawn, BACKOFF: "777"}
    test = json.loads(run.test_json.read_text())
    assert test["drawn"] == {"config": drawn} and test["config"] == {**drawn, BACKOFF: "777"}
    assert f"{ELECTION}={drawn[ELECTION]} (drawn)" in run_shape(test)
    assert BACKOFF not in run_shape(test)


def test_a_replay_runs_on_the_shape_and_timeouts_its_schedule_was_drawn_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = _plan_only(tmp_path, monkeypatch)
    nodes = [f"n{i}" for i in range(1, 6)]
    replayed = tmp_path / "replayed"
    save(Schedule(seed=9, interval=None, duration=60.0, packages=["kill"], nodes=nodes, controllers=nodes[:3],
                  brokers=nodes[3:]), replayed)
    code, run = run_test(Options(workload="registry", seed=1, topology=None, config_swarm=True,
                                 replay_nemesis=str(replayed), store=tmp_path / "store", time_limit=1.0))
    assert code == 255 and planned[0].state.topology == "dedicated"
    test = json.loads(run.test_json.read_text())
    assert test["drawn"] == {"config": draw_config(9, {})} and test["topology"] == "dedicated"
    (replayed / "nemesis-schedule.json").write_text("{not json")
    with pytest.raises(BadArguments, match="--replay-nemesis"):
        run_test(Options(seed=1, config_swarm=True, replay_nemesis=str(replayed), store=tmp_path / "store"))
