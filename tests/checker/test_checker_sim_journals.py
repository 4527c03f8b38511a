"""Integration: journals the real Raft core writes in the deterministic simulator (partitions,
crashes, wiped disks; a dynamic quorum's voter changes) satisfy every Raft invariant and the
journal contract, a journal tampered to commit a different record on one node is caught, and so
is a core that journals less or other than the contract says. Guards the journal format shared
with node/ (docs/contracts.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import kraftlab.node.sim.cluster as sim
from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import check_raft
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation


class JournalingSimulation(sim.Simulation):  # type: ignore[misc,name-defined]
    """Collects every node's journal events (and a `start` per process start, as the server does);
    the journals are judged whole by the checker, so what the simulator's own journal judge
    (node.sim.journal_truth) finds is kept in `untrue`, not raised."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: list[dict[str, Any]] = []
        self.untrue: set[str] = set()
        self.journal_truth.fail = lambda name, detail: self.untrue.add(name)

    def _dispatch(self, node: Any, out: Any, now: int) -> None:
        self.entries += [{"ts": now, "mono": now * 1_000_000, "node": node.node_id, **ev} for ev in out.events]
        super()._dispatch(node, out, now)

    def start_node(self, node: Any, now: int) -> None:
        self.entries.append({"ts": now, "mono": now * 1_000_000, "node": node.node_id, "ev": "start",
                             "roles": ["controller"], "voters": self.voter_ids, "log_start": node.log.start_offset(),
                             "log_end": node.log.end_offset(), "hw": 0})
        super().start_node(node, now)


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    s = JournalingSimulation(sim.SimParams(seed=3, voters=3, observers=1, faults=("partition", "crash", "wipe"),
                                           journal=True))
    s.run()
    assert not s.untrue
    return s.entries


def test_simulated_cluster_satisfies_the_raft_invariants(entries: list[dict[str, Any]]) -> None:
    res = check_raft(journals_from(entries, "sim"))
    assert res["valid"] is True, res["anomalies"][:3]
    assert res["stats"]["committed_offsets"] > 100 and res["stats"]["epochs_with_leader"] >= 2


def test_a_tampered_append_is_caught(entries: list[dict[str, Any]]) -> None:
    bad = copy.deepcopy(entries)
    target = next(e for e in bad if e["ev"] == "append" and not e["leader"] and e["base"] > 10)
    target["crcs"] = [c ^ 1 for c in target["crcs"]]
    res = check_raft(journals_from(bad, "sim"))
    assert res["valid"] is False
    assert "CommittedPrefixAgreement" in {a["type"] for a in res["anomalies"]}


# ------------------------------------------------------------------ the journal contract (dynamic quorums)

CONTRACT = ("JournalFields", "VotersAtStart", "VoterChangeSequence")


class JournalingMembershipSimulation(MembershipSimulation):
    """The membership simulator, collecting every core's journal events (and what its own rules
    find, instead of stopping there: the journals are judged whole)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: list[dict[str, Any]] = []
        self.found: set[str] = set()
        self.invariants.fail = lambda name, detail: self.found.add(name)  # type: ignore[method-assign]

    def _dispatch(self, node: Any, out: Any, now: int) -> None:
        self.entries += [{"ts": now, "mono": now * 1_000_000, "node": node.node_id, **ev} for ev in out.events]
        super()._dispatch(node, out, now)


def _membership_journals(core_class: type[RaftCore] = RaftCore) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    params = MembershipParams(SimParams(seed=2, voters=5, faults=("crash", "partition"), journal=True), initial=2,
                              change_every_ms=300)
    s = JournalingMembershipSimulation(params, core_class=core_class)
    s.run()
    assert core_class is not RaftCore or not s.found, s.found
    return s.entries, check_raft(journals_from(s.entries, "sim"))


def test_a_dynamic_quorums_journals_keep_the_journal_contract() -> None:
    entries, res = _membership_journals()
    kinds = {(e["ev"], e.get("action")) for e in entries}
    assert {("voters", None), ("voter_change", "requested"), ("voter_change", "committed")} <= kinds
    assert res["valid"] is True, res["anomalies"][:3]
    assert all(res["rules"][r]["valid"] is True for r in CONTRACT)


class ForgetsTheSetItStartsWith(RaftCore):
    """A node that journals the voter set in force only when it changes, not at start."""

    def _journal_voters(self, reason: str) -> None:
        if reason == "start":
            self._journalled_voters = (self.voter_history.last_offset, self.voter_history.latest)
            return
        super()._journal_voters(reason)


class SilentOnRequests(RaftCore):
    """A leader that journals a voter change only once it appends it, not when it takes the request."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev != "voter_change" or fields.get("action") != "requested":
            super()._event(ev, **fields)


class SaysNotWhichVoteItGrants(RaftCore):
    """A node whose vote lines leave out whether the vote was a pre-vote (SingleVote counts only real ones)."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev == "vote":
            fields.pop("pre_vote", None)
        super()._event(ev, **fields)


class AppendsTheSetItHad(RaftCore):
    """A leader whose voter change journals the set it had, not the set it appends."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev == "voter_change" and fields.get("action") == "appended":
            fields["voters"] = list(self.voter_set.ids)
        super()._event(ev, **fields)


class RefusesForNothing(RaftCore):
    """A leader that answers every other voter change REQUEST_TIMED_OUT whatever its state."""

    busy = False

    def _change_refusal(self) -> tuple[m.Errors, str] | None:
        self.busy = not self.busy
        return (m.Errors.REQUEST_TIMED_OUT, "busy") if self.busy else super()._change_refusal()


@pytest.mark.parametrize(
    ("core_class", "rule"),
    [(RefusesForNothing, "VoterChangeSequence"),
     (ForgetsTheSetItStartsWith, "VotersAtStart"), (SilentOnRequests, "VoterChangeSequence"),
     (SaysNotWhichVoteItGrants, "JournalFields"), (AppendsTheSetItHad, "VoterChangeSequence")],
)
def test_a_journal_that_breaks_its_contract_is_a_finding(core_class: type[RaftCore], rule: str) -> None:
    _, res = _membership_journals(core_class)
    assert res["valid"] is False
    assert rule in {a["type"] for a in res["anomalies"]}


class SkipsThePreVote(RaftCore):
    """A voter whose election timeout makes it a candidate at once, without KIP-996's pre-vote."""

    def _poll_unattached(self, state: Any, now: int) -> None:
        if now >= state.deadline and self.is_voter:
            self._become_candidate(now)
            return
        super()._poll_unattached(state, now)


class SkipsAnEpoch(RaftCore):
    """A candidate that bumps its epoch by two."""

    def _become_candidate(self, now: int) -> None:
        self.quorum_state.state.epoch += 1
        super()._become_candidate(now)


@pytest.mark.parametrize("core_class", [SkipsThePreVote, SkipsAnEpoch])
def test_role_lines_outside_kip_595_and_996_are_a_finding(core_class: type[RaftCore]) -> None:
    s = JournalingSimulation(sim.SimParams(seed=3, voters=3, faults=("partition", "crash"), journal=True),
                             core_class=core_class)
    s.run()
    res = check_raft(journals_from(s.entries, "sim"), only=["RoleLines"])
    assert res["valid"] is False and {a["type"] for a in res["anomalies"]} == {"RoleLines"}


class SilentTruncations(RaftCore):
    """A node that cuts its diverging tail without journalling it."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev != "truncate":
            super()._event(ev, **fields)


class SilentCatchUp(RaftCore):
    """A follower that journals only every other batch it appends."""

    skipped = False

    def _event(self, ev: str, **fields: Any) -> None:
        if ev == "append" and not fields.get("leader"):
            self.skipped = not self.skipped
            if self.skipped:
                return
        super()._event(ev, **fields)


class StartsBackwards(RaftCore):
    """A node whose start line gives its log's start and end the wrong way round."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev == "start":
            fields["log_start"], fields["log_end"] = fields["log_end"], fields["log_start"]
        super()._event(ev, **fields)


class HighWatermarkOfThePastEpoch(RaftCore):
    """A node whose high-water mark lines name the epoch before its own."""

    def _event(self, ev: str, **fields: Any) -> None:
        if ev == "hw":
            fields["epoch"] -= 1
        super()._event(ev, **fields)


@pytest.mark.parametrize(
    ("core_class", "rule"),
    [(SilentTruncations, "LogContinuity"), (SilentCatchUp, "LogContinuity"), (StartsBackwards, "LogContinuity"),
     (HighWatermarkOfThePastEpoch, "LinesInTheirState")],
)
def test_a_log_the_journal_misstates_is_a_finding(core_class: type[RaftCore], rule: str) -> None:
    s = JournalingSimulation(sim.SimParams(seed=3, voters=3, faults=("partition", "crash"), journal=True),
                             core_class=core_class)
    s.run()
    res = check_raft(journals_from(s.entries, "sim"), only=[rule])
    assert res["valid"] is False and {a["type"] for a in res["anomalies"]} == {rule}
    assert s.untrue, "the simulator's journal judge saw the same lie"
