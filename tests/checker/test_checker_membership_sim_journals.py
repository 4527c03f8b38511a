"""The Raft journal checker over the membership simulator's journals (KIP-853: voters added,
removed and replaced under crashes and partitions): the clean core's journals are valid, and each
membership bug of the zoo, planted in the core, is caught from the journals alone as the simulator
catches it — with the simulator's own invariants switched off, so the checker judges a whole run."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import check_raft
from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.core import core_class_with
from kraftlab.node.raft.output import RaftSafetyError
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation
from kraftlab.node.sim.membership_zoo import MEMBERSHIP_SCENARIOS, MembershipScenario


class JournalingMembershipSimulation(MembershipSimulation):
    """Collects every core's journal events as one kernel's nodes journal them (`rmono`: the
    simulator's clock, ordered as the events happened; one `boot_id`), and records what the
    simulator's invariants find instead of stopping there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: list[dict[str, Any]] = []
        self.found: set[str] = set()
        self.invariants.fail = self._found  # type: ignore[method-assign]
        self.witness.fail = self._found

    def _found(self, name: str, detail: str) -> None:
        self.found.add(name)

    def _dispatch(self, node: Any, out: Any, now: int) -> None:
        for ev in out.events:
            entry = {"ts": now, "mono": now * 1_000_000, "rmono": now * 1_000_000 + len(self.entries),
                     "node": node.node_id, **ev}
            if ev["ev"] == "start":
                entry["boot_id"] = "simulator"
            self.entries.append(entry)
        super()._dispatch(node, out, now)


def _run(bug: str | None, seed: int) -> tuple[JournalingMembershipSimulation, dict[str, Any]]:
    scenario = MEMBERSHIP_SCENARIOS[bug] if bug else MembershipScenario()
    params = MembershipParams(SimParams(seed=seed, voters=scenario.nodes, faults=scenario.faults, journal=True),
                              initial=scenario.initial, change_every_ms=scenario.change_every_ms,
                              replace_chance=scenario.replace_chance)
    sim = JournalingMembershipSimulation(params, core_class=core_class_with(BugSet.of(bug) if bug else NO_BUGS))
    try:
        sim.run()
    except RaftSafetyError:  # a planted bug can stop a core: the journals up to there are judged
        assert bug is not None
    return sim, check_raft(journals_from(sim.entries, "sim"))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_membership_runs_are_valid(seed: int) -> None:
    sim, res = _run(None, seed)
    assert sim.found == set()
    assert res["valid"] is True, [a["explanation"] for a in res["anomalies"][:3]]
    assert sim.report.changes_committed >= 3 and any(e["ev"] == "voters" for e in sim.entries)


EXPECTED = {
    "voters-at-commit": "MajorityReachedHighWatermark",
    "concurrent-voter-changes": "OneChangeAtATime",
    "removed-leader-keeps-leading": "RemovedLeaderResigns",
    "replaced-disk-keeps-vote": "ReplacedDiskNeverVotes",
}


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_each_membership_bug_is_caught_from_the_journals(bug: str) -> None:
    caught = 0
    for seed in range(6):
        sim, res = _run(bug, seed)
        if EXPECTED[bug] in sim.found:
            assert EXPECTED[bug] in {a["type"] for a in res["anomalies"]}, (seed, sim.found)
            caught += 1
    assert caught >= 1
