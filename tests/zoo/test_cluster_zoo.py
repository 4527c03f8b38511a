"""The simulator part of the bug zoo for the controller and broker bugs: each is caught on the
whole-cluster simulation (real Raft, controllers and brokers) within a bounded seed search, and
the clean cluster under the same scenario is caught by nothing."""

from __future__ import annotations

import pytest

from kraftlab.node.bugs import BUGS
from kraftlab.node.sim.membership_zoo import MEMBERSHIP_SCENARIOS
from kraftlab.node.sim.zoo import RAFT_SCENARIOS
from kraftlab.zoo.cluster_sim import CLUSTER_SCENARIOS, hunt_cluster, run_cluster_once

MAX_SEEDS = 10


@pytest.mark.parametrize("bug", sorted(CLUSTER_SCENARIOS))
def test_cluster_bug_is_caught(bug: str) -> None:
    outcome = hunt_cluster(bug, first_seed=0, max_seeds=MAX_SEEDS)
    assert outcome.caught_by is not None, f"{bug} not caught in seeds 0..{MAX_SEEDS - 1}"


@pytest.mark.parametrize("bug", sorted(CLUSTER_SCENARIOS))
def test_clean_cluster_is_caught_by_nothing(bug: str) -> None:
    for seed in range(2):
        outcome = run_cluster_once(None, seed, CLUSTER_SCENARIOS[bug])
        assert outcome.caught_by is None, outcome.detail


def test_every_bug_has_a_simulation() -> None:
    simulated = {b.name for b in BUGS if b.simulated}  # the data-path ones: tests/broker/test_replication_zoo.py
    assert simulated == set(RAFT_SCENARIOS) | set(CLUSTER_SCENARIOS) | set(MEMBERSHIP_SCENARIOS)
    assert not set(RAFT_SCENARIOS) & set(CLUSTER_SCENARIOS)
    assert not (set(RAFT_SCENARIOS) | set(CLUSTER_SCENARIOS)) & set(MEMBERSHIP_SCENARIOS)
