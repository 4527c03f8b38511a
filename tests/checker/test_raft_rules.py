"""Each Raft rule judged alone: one hand-built journal per rule breaks that rule and no other, the
rule reports itself in the result's `rules` and can be run by itself; a crashing or overrunning
rule is unknown without hiding the others."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from checker_journals import JB, healthy_raft
from membership_journals import MEMBERSHIP_BREAKERS

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import INVARIANTS, check_raft
from kraftlab.checker.raft.replay import Replay
from kraftlab.checker.rules import NamedRule, judge


def _healthy_plus(*events: tuple[Any, ...]) -> Callable[[], JB]:
    def build() -> JB:
        j = healthy_raft()
        for node, ev, fields in events:
            j.add(node, ev, **fields)
        return j
    return build


def _leader_missing_a_committed_entry() -> JB:
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "append", base=0, epoch=1, crcs=[11], control=False, leader=True)
    j.add(2, "append", base=0, epoch=1, crcs=[11], control=False, leader=False)
    j.add(1, "hw", hw=1, epoch=1)
    j.add(3, "role", role="leader", epoch=2, leader=3, voted_for=3)
    return j


def _vote_forgotten() -> JB:
    j = healthy_raft()
    j.add(3, "vote", epoch=3, candidate=1, granted=True, pre_vote=False, reason="ok")
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=4, hw=3,
          stored_epoch=2, stored_vote=2)
    return j


def _stale_samples() -> list[tuple[Any, ...]]:
    ages = {"1": 5000, "3": 5000}
    return [(2, "quorum", {"epoch": 2, "fetch_age_ms": ages, "check_quorum_ms": 3000})] * 2


BREAKERS: dict[str, Callable[[], JB]] = {
    "SingleLeader": _healthy_plus(  # node 3 lost its quorum-state (its vote for 2 with it), then won epoch 2
        (3, "start", {"roles": ["controller"], "voters": [1, 2, 3], "log_start": 0, "log_end": 4, "hw": 3}),
        (3, "role", {"role": "leader", "epoch": 2, "leader": 3, "voted_for": 3})),
    "MonotonicEpoch": _healthy_plus((3, "role", {"role": "follower", "epoch": 1, "leader": 1, "voted_for": None})),
    "DurableVote": _vote_forgotten,
    "SingleVote": _healthy_plus((3, "vote", {"epoch": 2, "candidate": 1, "granted": True, "pre_vote": False,
                                             "reason": "ok"})),
    "CheckpointedHighWatermark": _healthy_plus((3, "recovery", {"hw_checkpoint": 9, "log_start": 0, "log_end": 4})),
    "MonotonicHighWatermark": _healthy_plus((3, "hw", {"hw": 2, "epoch": 2})),
    "MajorityReachedHighWatermark": _healthy_plus(
        (2, "append", {"base": 4, "epoch": 2, "crcs": [22], "control": False, "leader": True}),
        (2, "hw", {"hw": 5, "epoch": 2}),
        (1, "role", {"role": "follower", "epoch": 2, "leader": 2, "voted_for": 2}),
        (3, "role", {"role": "follower", "epoch": 2, "leader": 2, "voted_for": 2})),
    "CommittedPrefixAgreement": _healthy_plus((3, "truncate", {"to": 1, "from": 4, "reason": "diverging"})),
    # node 1 writes offset 3 in epoch 2 with an entry the leader of epoch 2 never wrote (above its HW)
    "LogMatching": _healthy_plus((1, "append", {"base": 3, "epoch": 2, "crcs": [99], "control": False,
                                                "leader": False})),
    "LeaderCompleteness": _leader_missing_a_committed_entry,
    "NoUncommittedApply": _healthy_plus((3, "apply", {"offset": 3, "type": "PartitionChangeRecord", "crc": 21})),
    "StaleLeader": _healthy_plus(*_stale_samples()),
    "AnsweredBeforeCommit": _healthy_plus((2, "decision", {"api": "CreateTopics", "error": "NONE", "offset": 9})),
    "NodeStoppedOnSafetyError": _healthy_plus((2, "fatal", {"error": "ValueError: x", "stopped": True, "epoch": 2,
                                                            "hw": 4, "applied": 3, "log_end": 4})),
    # node 3 stands as a candidate two epochs past its pre-vote (KIP-996: one epoch later)
    "RoleLines": _healthy_plus((3, "role", {"role": "prospective", "epoch": 2, "leader": 2, "voted_for": None}),
                               (3, "role", {"role": "candidate", "epoch": 4, "leader": None, "voted_for": 3})),
    # node 3 journals an append past its log's end: the entry at 4 never journalled
    "LogContinuity": _healthy_plus((3, "append", {"base": 5, "epoch": 2, "crcs": [23], "control": False,
                                                  "leader": False})),
    # node 3 (which journals its pre-votes) snapshots offset 3, which it never saw committed (its HW is 3)
    "LinesInTheirState": _healthy_plus((3, "role", {"role": "prospective", "epoch": 2, "leader": 2, "voted_for": None}),
                                       (3, "snapshot", {"action": "create", "offset": 4, "epoch": 2})),
    **MEMBERSHIP_BREAKERS,
}


def test_every_rule_has_a_journal_that_breaks_it() -> None:
    assert sorted(BREAKERS) == sorted(INVARIANTS)


def test_a_healthy_journal_passes_every_rule_alone() -> None:
    res = check_raft(journals_from(healthy_raft().entries))
    assert res["valid"] is True
    assert {name: r["valid"] for name, r in res["rules"].items()} == dict.fromkeys(INVARIANTS, True)


@pytest.mark.parametrize("rule", sorted(BREAKERS))
def test_a_broken_rule_fails_alone(rule: str) -> None:
    journals = journals_from(BREAKERS[rule]().entries, "journal.jsonl")
    res = check_raft(journals)
    verdicts = {name: r["valid"] for name, r in res["rules"].items()}
    assert verdicts == {name: name != rule for name in INVARIANTS}, verdicts
    assert res["valid"] is False and {a["type"] for a in res["anomalies"]} == {rule}
    assert res["rules"][rule]["violations"] == len(res["anomalies"]) >= 1
    alone = check_raft(journals, only=[rule])
    assert alone["valid"] is False and list(alone["rules"]) == [rule]
    others = check_raft(journals, only=[n for n in INVARIANTS if n != rule])
    assert others["valid"] is True and rule not in others["rules"]


def test_an_unknown_rule_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="no such rule: NoSuchRule"):
        check_raft(journals_from(healthy_raft().entries), only=["NoSuchRule"])


class _Crashes(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        raise RuntimeError("boom")


class _ClaimsAnother(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        yield Violation("SingleLeader", "not mine to say")


class _Finds(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        yield Violation(self.name, "found")


def test_a_crashing_rule_is_unknown_and_the_others_still_judge() -> None:
    replay = Replay(journals_from(healthy_raft().entries))
    res = judge([_Crashes(), _ClaimsAnother()], replay)
    assert res["valid"] == "unknown"
    assert "boom" in res["rules"]["_Crashes"]["explanation"]
    assert "does not own" in res["rules"]["_ClaimsAnother"]["explanation"]
    res = judge([_Crashes(), _Finds()], replay)
    assert res["valid"] is False and res["rules"]["_Finds"]["violations"] == 1
    assert res["rules"]["_Crashes"]["valid"] == "unknown" and "_Crashes" in res["not_checked"]


def test_rules_past_the_budget_are_unknown() -> None:
    res = judge([_Finds(), _Finds()], Replay(journals_from(healthy_raft().entries)), seconds=-1.0)
    assert res["valid"] == "unknown" and "budget" in res["rules"]["_Finds"]["explanation"]


def _two_logs(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> JB:
    """Nodes 1 and 2 appending (epoch, crc) from offset 0, one batch per offset, nothing committed."""
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    for node, log in ((1, first), (2, second)):
        for o, (ep, crc) in enumerate(log):
            j.add(node, "append", base=o, epoch=ep, crcs=[crc], control=False, leader=False)
    return j


def test_log_matching_holds_for_logs_that_diverge_only_after_their_last_shared_entry() -> None:
    """A follower's uncommitted tail in an epoch the other log skips is no breach while nothing
    above it is shared (the next Fetch's DivergingEpoch cuts it)."""
    res = check_raft(journals_from(_two_logs([(1, 11), (1, 12), (3, 31)], [(1, 11), (2, 21), (2, 22)]).entries),
                     only=["LogMatching"])
    assert res["valid"] is True


def test_log_matching_fails_on_an_epoch_the_other_log_skips_below_a_shared_entry() -> None:
    """Offset 2 in epoch 3 is on both nodes, yet at offset 1 one holds epoch 1 and the other epoch 2:
    one of them kept a divergent entry below what it later shared (each CRC is unique, so only the
    prefix comparison can see it)."""
    res = check_raft(journals_from(_two_logs([(1, 11), (1, 12), (3, 31)], [(1, 11), (2, 21), (3, 31)]).entries),
                     only=["LogMatching"])
    assert res["valid"] is False
    [anomaly] = res["anomalies"]
    assert "both hold offset 2 in epoch 3" in anomaly["explanation"]
    assert "offset 1 one holds epoch 1 and the other epoch 2" in anomaly["explanation"]


def test_log_matching_fails_on_epochs_going_down_within_one_log() -> None:
    res = check_raft(journals_from(_two_logs([(2, 21), (1, 11)], []).entries), only=["LogMatching"])
    assert res["valid"] is False
    assert "then the older epoch 1 at offset 1" in res["anomalies"][0]["explanation"]
