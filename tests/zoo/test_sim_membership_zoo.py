"""The simulator part of the bug zoo for the membership bugs (KIP-853): each is caught by the
generic dynamic-quorum simulation (voters added, removed and replaced under faults) within a
bounded seed search, and the clean core under the same runs is caught by nothing."""

from __future__ import annotations

import pytest

from kraftlab.node.bugs import BY_NAME
from kraftlab.node.sim.membership_zoo import MEMBERSHIP_SCENARIOS, hunt, run_once

MAX_SEEDS = 30


@pytest.mark.parametrize("bug", sorted(MEMBERSHIP_SCENARIOS))
def test_membership_bug_is_caught(bug: str) -> None:
    outcome = hunt(bug, first_seed=0, max_seeds=MAX_SEEDS)
    assert outcome.caught_by is not None, f"{bug} not caught in seeds 0..{MAX_SEEDS - 1}"


def test_clean_core_is_caught_by_nothing() -> None:
    for scenario in set(MEMBERSHIP_SCENARIOS.values()):
        for seed in range(6):
            outcome = run_once(None, seed, scenario)
            assert outcome.caught_by is None, outcome.detail


def test_a_membership_hunt_is_reproducible() -> None:
    a = hunt("removed-leader-keeps-leading", max_seeds=MAX_SEEDS)
    b = run_once("removed-leader-keeps-leading", a.seed)
    assert a.caught_by == "RemovedLeaderResigns"
    assert (a.caught_by, a.sim_ms, a.detail) == (b.caught_by, b.sim_ms, b.detail)


def test_membership_bugs_run_end_to_end_only_with_the_membership_nemesis() -> None:
    """A membership bug is end to end exactly when the zoo has a plan for it, and that plan changes
    voters (the membership nemesis); the others are caught in the simulator only."""
    from kraftlab.zoo import PLANS

    assert all(BY_NAME[bug].layer == "raft" for bug in MEMBERSHIP_SCENARIOS)
    end_to_end = {bug for bug in MEMBERSHIP_SCENARIOS if BY_NAME[bug].end_to_end}
    assert end_to_end == {bug for bug in MEMBERSHIP_SCENARIOS if bug in PLANS}
    assert end_to_end and all("membership" in PLANS[bug].nemesis.split(",") for bug in end_to_end)


def test_a_hw_reached_under_a_later_voter_set_is_no_false_alarm() -> None:
    # Seed 5043: a leader kept the HW it had as a follower, reached under the set appended at
    # that HW ({1,3,5}), and appended another ({3,5}) since; neither the set at the HW nor the
    # latest has a majority holding it, the set it was reached under does.
    scenario = MEMBERSHIP_SCENARIOS["voters-at-commit"]
    assert run_once(None, 5043, scenario).caught_by is None
