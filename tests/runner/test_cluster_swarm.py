"""The swarm over the cluster: the topology a seed draws when the run leaves it open (deterministic
per seed, among the shapes the hosts allow, an explicit or replayed topology winning), recorded in
test.json and results.json, and what the runner deploys."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from kraftlab import runner
from kraftlab.control.fake import FakeHost
from kraftlab.control.lab import Lab
from kraftlab.deploy import TOPOLOGIES, Deployment
from kraftlab.nemesis.schedule import Schedule, save
from kraftlab.report import run_shape
from kraftlab.runner import TestOptions as Options
from kraftlab.runner import resolve_topology, run_test
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


def test_the_runner_deploys_the_drawn_five_voter_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFTLAB_STATE_DIR", str(tmp_path / "labs"))
    lab = Lab("swarmlab", "netns", [FakeHost(f"n{i}", f"10.9.0.{10 + i}", f"/w/n{i}") for i in range(1, 6)])
    monkeypatch.setattr(runner, "_open_lab", lambda opts: (lab, False))
    planned: list[Deployment] = []

    def deploy(self: Deployment, wait: float) -> None:
        planned.append(self)
        raise _Stop("planned")

    monkeypatch.setattr(Deployment, "deploy", deploy)
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
