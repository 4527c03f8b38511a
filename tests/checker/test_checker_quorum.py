"""ReplicaProgressHeld: the replica log end offsets a leader reports (DescribeQuorum) were reached by
those replicas' own logs by then; judged only over journals that share a clock."""

from __future__ import annotations

from checker_journals import JB, healthy_raft, one_kernel, only_anomaly

from kraftlab.checker.journal import journals_from
from kraftlab.checker.quorum import check_quorum


def _sampled(replicas: dict[str, int], *, at_end: bool = True) -> JB:
    """The healthy run (node 2 leads epoch 2; node 3 holds offsets 0-3, node 1 offsets 0-2) with a
    sample of leader 2's DescribeQuorum, after everything (or right after its election)."""
    j = healthy_raft()
    sample = {"epoch": 2, "fetch_age_ms": {"1": 0, "3": 0}, "check_quorum_ms": 3000, "replicas": replicas}
    if at_end:
        j.add(2, "quorum", **sample)
    else:
        j.entries.insert(next(i for i, e in enumerate(j.entries) if e["ev"] == "role" and e["epoch"] == 2) + 1,
                         {"ts": 0, "mono": 0, "node": 2, "ev": "quorum", **sample})
        for i, e in enumerate(j.entries):  # keep the clocks increasing after the insertion
            e["ts"], e["mono"] = 1_000_000 + i * 10, (i + 1) * 10_000_000
    return one_kernel(j)


def test_reported_progress_that_the_replicas_made_holds() -> None:
    res = check_quorum(journals_from(_sampled({"1": 3, "2": 4, "3": 4}).entries))
    assert res["valid"] is True and res["checked"] == ["ReplicaProgressHeld"]
    assert res["stats"]["replica_states_judged"] == 2  # the leader's own entry is its own business


def test_progress_reported_before_the_replica_made_it_is_a_violation() -> None:
    # right after its election, leader 2 says node 3 holds offsets up to 4 — node 3 appends offset 3 later
    a = only_anomaly(check_quorum(journals_from(_sampled({"1": 3, "3": 4}, at_end=False).entries)),
                     "ReplicaProgressHeld")
    assert "reported replica 3's log end offset as 4" in a["explanation"]
    assert "never reached beyond 3" in a["explanation"]
    assert a["after"] == "leader 2 reports replica 3 at log end offset 4"


def test_progress_a_replica_never_made_is_a_violation_once_per_leader_and_replica() -> None:
    j = _sampled({"1": 4, "3": 4})  # node 1 never appended offset 3
    j.add(2, "quorum", epoch=2, fetch_age_ms={}, check_quorum_ms=3000, replicas={"1": 4})
    res = check_quorum(journals_from(one_kernel(j).entries))
    a = only_anomaly(res, "ReplicaProgressHeld")
    assert "replica 1" in a["explanation"] and len(res["anomalies"]) == 1


def test_progress_once_held_stays_credible_after_a_truncation_or_a_lost_tail() -> None:
    j = healthy_raft()
    j.add(3, "truncate", to=2, reason="diverging")
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=1, hw=0)
    j.add(2, "quorum", epoch=2, fetch_age_ms={}, check_quorum_ms=3000, replicas={"3": 4})
    assert check_quorum(journals_from(one_kernel(j).entries))["valid"] is True


def test_a_fetched_snapshot_takes_the_replica_to_its_end() -> None:
    j = healthy_raft()
    j.add(1, "snapshot", action="fetch", offset=9, epoch=2)
    j.add(2, "quorum", epoch=2, fetch_age_ms={}, check_quorum_ms=3000, replicas={"1": 9})
    assert check_quorum(journals_from(one_kernel(j).entries))["valid"] is True


def test_without_a_shared_clock_or_samples_the_rule_is_not_judged() -> None:
    j = _sampled({"1": 99})
    j.entries[0]["boot_id"] = "another-kernel"
    res = check_quorum(journals_from(j.entries))
    assert res["valid"] is True and "share no clock" in res["not_checked"]["ReplicaProgressHeld"]
    res = check_quorum(journals_from(one_kernel(healthy_raft()).entries))
    assert "no leader journalled" in res["not_checked"]["ReplicaProgressHeld"]


def test_a_replica_whose_journal_began_after_the_report_is_not_judged() -> None:
    # a wiped data directory starts its node's journal afresh: what the replica held before is unknown
    j = _sampled({"1": 3, "3": 4})
    j.entries = [e for e in j.entries if not (e["node"] == 3 and e["mono"] < j.entries[-1]["mono"])]
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    res = check_quorum(journals_from(one_kernel(j).entries))
    assert res["valid"] is True and res["stats"]["replica_states_judged"] == 1


def test_a_replica_whose_journal_began_during_the_leaders_term_is_not_judged() -> None:
    # a rebuilt broker: its data directory (and journal) wiped while leader 2 leads; leader 2 still
    # reports the end offset it learned from the broker's earlier life
    j = healthy_raft()
    j.entries = [e for e in j.entries if e["node"] != 3]
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(2, "quorum", epoch=2, fetch_age_ms={}, check_quorum_ms=3000, replicas={"3": 4})
    res = check_quorum(journals_from(one_kernel(j).entries))
    assert res["valid"] is True and res["stats"]["replica_states_judged"] == 0
