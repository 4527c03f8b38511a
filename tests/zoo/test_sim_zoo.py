"""The simulator part of the bug zoo: every Raft-core bug is caught within a bounded seed search,
and the clean core under the same faults is caught by nothing."""

from __future__ import annotations

import pytest

from kraftlab.node.bugs import BUGS, BY_NAME, NO_BUGS, BugSet, UnknownBug
from kraftlab.node.raft.core import RaftCore, core_class_with
from kraftlab.node.sim.zoo import RAFT_SCENARIOS, hunt, run_once

MAX_SEEDS = 30


@pytest.mark.parametrize("bug", sorted(RAFT_SCENARIOS))
def test_raft_bug_is_caught(bug: str) -> None:
    outcome = hunt(bug, first_seed=0, max_seeds=MAX_SEEDS)
    assert outcome.caught_by is not None, f"{bug} not caught in seeds 0..{MAX_SEEDS - 1}"


@pytest.mark.parametrize("bug", sorted(RAFT_SCENARIOS))
def test_clean_core_is_caught_by_nothing(bug: str) -> None:
    for seed in range(4):
        outcome = run_once(None, seed, RAFT_SCENARIOS[bug])
        assert outcome.caught_by is None, outcome.detail


def test_a_hunt_is_reproducible() -> None:
    a = hunt("hw-before-truncate", max_seeds=MAX_SEEDS)
    b = run_once("hw-before-truncate", a.seed)
    assert (a.caught_by, a.sim_ms, a.detail) == (b.caught_by, b.sim_ms, b.detail)


def test_registry_names_every_bug_with_a_ticket() -> None:
    assert len(BUGS) == len(BY_NAME) == 25
    assert all(b.ticket and b.description and b.layer in {"raft", "storage", "controller", "broker"} for b in BUGS)


def test_bug_sets_refuse_unknown_names_and_default_to_none() -> None:
    with pytest.raises(UnknownBug):
        BugSet.of("no-such-bug")
    with pytest.raises(UnknownBug):
        NO_BUGS.on("no-such-bug")
    assert not NO_BUGS.on("ack-before-fsync")
    both = BugSet.of("ack-before-fsync, no-check-quorum")
    assert both.on("ack-before-fsync") and both.on("no-check-quorum") and not both.on("resume-old-epoch")
    assert RaftCore.bugs == NO_BUGS and core_class_with(NO_BUGS) is RaftCore
    assert core_class_with(both).bugs == both and RaftCore.bugs == NO_BUGS
