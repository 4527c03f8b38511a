"""The Raft rules across voter sets (KIP-853) on hand-built journals: a healthy dynamic quorum
passes every rule, and each majority rule counts the voter set in force, not the static one."""

from __future__ import annotations

from checker_journals import healthy_raft, one_kernel, only_anomaly
from membership_journals import _voters, healthy_dynamic

from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import INVARIANTS, check_raft
from kraftlab.checker.raft import voters as vs


def test_a_healthy_dynamic_quorum_passes_every_rule() -> None:
    for j in (healthy_dynamic(), one_kernel(healthy_dynamic())):
        res = check_raft(journals_from(j.entries))
        assert res["valid"] is True, res["anomalies"]
        assert {name: r["valid"] for name, r in res["rules"].items()} == dict.fromkeys(INVARIANTS, True)


def test_the_high_water_mark_counts_the_set_in_force_not_every_voter_ever() -> None:
    """Leader 2 (voters 2-4) commits offset 5 held by itself and by node 1, which it removed: two of
    the four nodes ever named are no majority of {2, 3, 4}."""
    j = healthy_dynamic()
    for n in (2, 1):
        j.add(n, "append", base=5, epoch=2, crcs=[22], control=False, leader=n == 2)
    j.add(2, "hw", hw=6, epoch=2)
    for n in (3, 4):  # still alive after the leader's HW: their journals are not cut
        j.add(n, "role", role="follower", epoch=2, leader=2, voted_for=None)
    anomaly = only_anomaly(check_raft(journals_from(j.entries)), "MajorityReachedHighWatermark")
    assert "[2, 3, 4]" in anomaly["explanation"]


def test_check_quorum_counts_the_set_in_force() -> None:
    """Leader 2 of voters 2-4 hears only from node 1, which is no longer a voter: stale."""
    j = healthy_dynamic()
    for _ in range(2):
        j.add(2, "quorum", epoch=2, fetch_age_ms={"1": 10}, check_quorum_ms=3000, replicas={})
    anomaly = only_anomaly(check_raft(journals_from(j.entries)), "StaleLeader")
    assert "[3, 4]" in anomaly["explanation"]


def test_a_static_leader_needs_a_majority_of_votes() -> None:
    j = healthy_raft()
    j.add(3, "role", role="candidate", epoch=3, leader=None, voted_for=3)
    j.add(3, "role", role="leader", epoch=3, leader=3, voted_for=3)
    j.add(1, "role", role="follower", epoch=3, leader=3, voted_for=None)
    j.add(2, "role", role="follower", epoch=3, leader=3, voted_for=None)
    only_anomaly(check_raft(journals_from(j.entries)), "ElectedByMajority")
    j.add(1, "vote", epoch=3, candidate=3, granted=True, pre_vote=False, reason="ok")
    assert check_raft(journals_from(j.entries))["valid"] is True


def test_a_voter_whose_journal_ends_before_the_election_may_have_voted() -> None:
    j = healthy_raft()
    j.add(3, "role", role="candidate", epoch=3, leader=None, voted_for=3)
    j.add(3, "role", role="leader", epoch=3, leader=3, voted_for=3)
    assert check_raft(journals_from(j.entries), only=["ElectedByMajority"])["valid"] is True


def test_a_new_disk_named_by_the_set_votes() -> None:
    """Node 3's new disk, once the leader replaced it in the set (remove, add back), may vote."""
    j = healthy_dynamic()
    j.add(3, "start", roles=["controller"], voters=[], log_start=0, log_end=0, hw=0, stored_epoch=None,
          stored_vote=None, directory_id="dir-3-new")
    _voters(j, 3, -1, [], "start")
    j.add(3, "snapshot", action="fetch", offset=5, epoch=2)  # the new disk catches up from a snapshot
    new = {**{n: f"dir-{n}" for n in (1, 2, 4)}, 3: "dir-3-new"}
    for base, voters in ((5, [2, 4]), (6, [2, 3, 4])):  # remove the old disk, then add the new one
        for n in (2, 4, 3):
            j.add(n, "append", base=base, epoch=2, crcs=[22 + base], control=True, leader=n == 2)
            _voters(j, n, base, voters, "append", new)
        for n in (2, 4, 3):
            j.add(n, "hw", hw=base + 1, epoch=2)
    j.add(4, "role", role="candidate", epoch=3, leader=None, voted_for=4)
    j.add(3, "vote", epoch=3, candidate=4, granted=True, pre_vote=False, reason="ok")
    j.add(4, "role", role="leader", epoch=3, leader=4, voted_for=4)
    res = check_raft(journals_from(j.entries))
    assert res["valid"] is True, res["anomalies"]


def test_a_removed_voter_never_campaigns() -> None:
    j = healthy_dynamic()
    j.add(1, "role", role="prospective", epoch=2, leader=None, voted_for=None)
    anomaly = only_anomaly(check_raft(journals_from(j.entries)), "ReplacedDiskNeverVotes")
    assert "is not in it" in anomaly["explanation"]


def test_majorities_of_sets_one_voter_apart_intersect() -> None:
    def s(*ids: int) -> vs.VoterSet:
        return vs.static_set(list(ids))
    assert vs.majorities_intersect(s(1, 2, 3), s(1, 2, 3, 4))
    assert vs.majorities_intersect(s(1, 2, 3, 4), s(2, 3, 4))
    assert vs.majorities_intersect(s(1), s(1, 2))
    assert not vs.majorities_intersect(s(1, 2, 3), s(1, 2, 3, 4, 5))
    assert not vs.majorities_intersect(s(1, 2), s(3, 4))
    assert not vs.majorities_intersect(frozenset({(1, "a"), (2, "a"), (3, "a")}),
                                       frozenset({(1, "a"), (2, "a"), (3, "b"), (4, "a"), (5, "a")}))


