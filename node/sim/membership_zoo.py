"""The membership bugs of the zoo in the simulator: the real Raft core with one planted KIP-853
bug (node.bugs) in the dynamic-quorum simulator (node.sim.membership), voters added, removed and
replaced under faults, seed after seed until an invariant catches it.

Nothing here knows the bugs: every run is the generic membership simulation, judged by its
invariants (the simulator's, LeaderCompleteness, OneChangeAtATime, MajoritiesIntersect,
ReplacedDiskNeverVotes, RemovedLeaderResigns). The clean core under the same runs is caught by
nothing. A run is a pure function of (bug, seed).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.core import core_class_with
from kraftlab.node.sim import zoo
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation
from kraftlab.node.sim.zoo import SimOutcome, judge


@dataclass(frozen=True, slots=True)
class MembershipScenario:
    """The generic membership run a bug is hunted with: faults, nodes, bootstrap voters."""

    faults: tuple[str, ...] = ("crash", "partition")
    nodes: int = 5
    initial: int = 3
    change_every_ms: int = 700
    replace_chance: float = 0.15
    """How often the administrator replaces a voter's disk in a settled quorum (see MembershipParams)."""


MEMBERSHIP_SCENARIOS: dict[str, MembershipScenario] = {
    "voters-at-commit": MembershipScenario(),
    "concurrent-voter-changes": MembershipScenario(),
    "removed-leader-keeps-leading": MembershipScenario(),
    # A replaced disk votes only in the short window before the administrator removes its stale
    # voter: replacing disks more often finds it in ~1 run in 2 rather than 1 in 4 (40 seeds each).
    "replaced-disk-keeps-vote": MembershipScenario(replace_chance=0.4),
}
"""Bugs whose switch lives in the Raft core's membership code (KIP-853)."""


def run_once(bug: str | None, seed: int, scenario: MembershipScenario | None = None) -> SimOutcome:
    """One seeded membership run with `bug` planted (None: the clean control)."""
    if scenario is None:
        if bug is None:
            raise ValueError("a control run needs the scenario it controls")
        scenario = MEMBERSHIP_SCENARIOS[bug]
    bugs = BugSet.of(bug) if bug else NO_BUGS
    params = MembershipParams(
        SimParams(seed=seed, voters=scenario.nodes, faults=scenario.faults, journal=True),  # judged as journalled
        initial=scenario.initial,
        change_every_ms=scenario.change_every_ms,
        replace_chance=scenario.replace_chance,
    )
    return judge(bug, seed, MembershipSimulation(params, core_class=core_class_with(bugs)))


def hunt(bug: str, first_seed: int = 0, max_seeds: int = 40) -> SimOutcome:
    """Seeds `first_seed`, `first_seed + 1`, … until the bug is caught; the last outcome otherwise."""
    return zoo.hunt(bug, first_seed, max_seeds, run=run_once)


__all__ = ["MEMBERSHIP_SCENARIOS", "MembershipScenario", "hunt", "run_once"]
