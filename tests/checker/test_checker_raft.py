"""Raft invariants: a healthy journal passes; each hand-built violation is reported once, with
the offending entries."""

from __future__ import annotations

from typing import Any

from checker_journals import JB, healthy_raft, one_kernel, only_anomaly

from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import check_raft


def _check(j: JB) -> dict[str, Any]:
    return check_raft(journals_from(j.entries, "journal.jsonl"))



def test_healthy_run_passes() -> None:
    res = _check(healthy_raft())
    assert res["valid"] is True, res["anomalies"]
    assert res["stats"]["committed_offsets"] == 4


def test_two_leaders_in_one_epoch() -> None:
    j = healthy_raft()
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=4, hw=3)  # its vote for 2 lost
    bad = j.add(3, "role", role="leader", epoch=2, leader=3, voted_for=3)
    a = only_anomaly(_check(j), "SingleLeader")
    assert {e["node"] for e in a["entries"]} == {2, 3}
    assert any(e["where"] == f"journal.jsonl:{j.entries.index(bad) + 1}" for e in a["entries"])


def test_epoch_going_back() -> None:
    j = healthy_raft()
    j.add(3, "role", role="follower", epoch=1, leader=1, voted_for=None)
    a = only_anomaly(_check(j), "MonotonicEpoch")
    assert [e["epoch"] for e in a["entries"]] == [2, 1]
    assert a["after"] == "node 3 follower in epoch 1" and a["before"].endswith("in epoch 2")


def test_high_water_mark_going_back() -> None:
    j = healthy_raft()
    j.add(3, "hw", hw=2, epoch=2)
    a = only_anomaly(_check(j), "MonotonicHighWatermark")
    assert [e["hw"] for e in a["entries"]] == [3, 2]


def test_high_water_mark_without_a_majority() -> None:
    j = healthy_raft()
    j.add(2, "append", base=4, epoch=2, crcs=[22], control=False, leader=True)
    j.add(2, "hw", hw=5, epoch=2)
    assert _check(j)["valid"] is True  # the followers' journals may have been cut before their flush
    for n in (1, 3):  # they were not: they go on past the leader's HW without offset 4
        j.add(n, "role", role="follower", epoch=2, leader=2, voted_for=2)
    a = only_anomaly(_check(j), "MajorityReachedHighWatermark")
    assert a["entries"][0]["hw"] == 5 and a["entries"][0]["node"] == 2


def test_committed_entries_disagree() -> None:
    j = healthy_raft()
    # node 1 never saw offset 3 from node 2; it takes a different entry there and commits it
    j.add(1, "append", base=3, epoch=2, crcs=[99], control=False, leader=False)
    j.add(1, "hw", hw=4, epoch=2)
    res = _check(j)
    assert res["valid"] is False
    kinds = {a["type"] for a in res["anomalies"]}
    assert kinds == {"CommittedPrefixAgreement", "LogMatching"}  # offset 3 has two entries in epoch 2
    assert any(e.get("crcs") == [99] for a in res["anomalies"] for e in a["entries"])


def test_truncating_below_the_high_water_mark() -> None:
    j = healthy_raft()
    j.add(3, "truncate", to=1, **{"from": 4}, reason="diverging")
    a = only_anomaly(_check(j), "CommittedPrefixAgreement")
    assert a["entries"][-1]["ev"] == "truncate"


def test_new_leader_missing_a_committed_entry() -> None:
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "append", base=0, epoch=1, crcs=[11], control=False, leader=True)
    j.add(2, "append", base=0, epoch=1, crcs=[11], control=False, leader=False)
    j.add(1, "hw", hw=1, epoch=1)
    bad = j.add(3, "role", role="leader", epoch=2, leader=3, voted_for=3)
    a = only_anomaly(_check(j), "LeaderCompleteness")
    assert a["entries"][-1]["where"].endswith(f":{j.entries.index(bad) + 1}")


def test_a_leader_whose_restart_recovered_entries_the_journal_missed_holds_them() -> None:
    """A 1-hour soak: a follower was SIGKILLed between appending offsets 1-2 to its log and journalling
    the append; its restart recovered them (log end 3) and it was elected: it holds them, with content
    the journal cannot tell. A restart that recovered less lacks them."""
    def run(recovered_end: int) -> JB:
        j = JB()
        for n in (1, 2, 3):
            j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
        j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
        j.add(1, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=True)
        j.add(2, "append", base=0, epoch=1, crcs=[11], control=False, leader=False)  # 12, 13 unjournalled
        j.add(3, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=False)
        j.add(1, "hw", hw=3, epoch=1)
        j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=recovered_end, hw=1,
              stored_epoch=1, stored_vote=1)
        j.add(2, "role", role="leader", epoch=2, leader=2, voted_for=2)
        return j

    assert _check(run(3))["valid"] is True
    a = only_anomaly(_check(run(2)), "LeaderCompleteness")
    assert "lacks offset 2" in a["explanation"]


def test_a_process_life_that_died_recovering_starts_its_high_water_mark_over() -> None:
    """main.sh seed 7: a broker restarted after a kill journalled the high-water mark of its snapshot
    (below the last life's) while recovering, then refused its damaged storage before its `start`;
    within one life the high-water mark still never goes back."""
    j = healthy_raft()
    j.add(3, "launch", pid=2)
    j.add(3, "recovery", hw_checkpoint=3, log_start=1, log_end=3)
    j.add(3, "hw", hw=1, epoch=0)
    assert _check(j)["valid"] is True
    j.add(3, "hw", hw=0, epoch=0)
    only_anomaly(_check(j), "MonotonicHighWatermark")


def test_applying_an_uncommitted_record() -> None:
    j = healthy_raft()
    j.add(3, "apply", offset=3, type="PartitionChangeRecord", crc=21)
    a = only_anomaly(_check(j), "NoUncommittedApply")
    assert a["entries"][0]["offset"] == 3


def test_restart_with_wiped_storage_starts_over() -> None:
    j = healthy_raft()
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(3, "role", role="unattached", epoch=0, leader=None, voted_for=None)
    assert _check(j)["valid"] is True
    k = healthy_raft()
    k.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=4, hw=0)
    k.add(3, "role", role="unattached", epoch=0, leader=None, voted_for=None)
    only_anomaly(_check(k), "MonotonicEpoch")


def test_shared_clock_catches_a_high_water_mark_taken_before_a_majority_flushed() -> None:
    assert journals_from(one_kernel(healthy_raft()).entries).shared_clock
    assert _check(one_kernel(healthy_raft()))["valid"] is True
    j = healthy_raft()
    j.add(1, "append", base=3, epoch=2, crcs=[21], control=True, leader=False)  # node 1 catches up to 4
    j.add(2, "append", base=4, epoch=2, crcs=[22], control=False, leader=True)
    j.add(2, "hw", hw=5, epoch=2)  # counted before any follower had the entry...
    for n in (1, 3):  # ...which they flush later: without a shared clock nobody can tell
        j.add(n, "append", base=4, epoch=2, crcs=[22], control=False, leader=False)
        j.add(n, "hw", hw=5, epoch=2)
    assert _check(j)["valid"] is True
    a = only_anomaly(_check(one_kernel(j)), "MajorityReachedHighWatermark")
    assert a["entries"][0]["hw"] == 5 and "had flushed offset 4" in a["explanation"]
    # a journal of another kernel (or an old node without rmono) turns the strict order off
    mixed = one_kernel(j)
    mixed.entries[0]["boot_id"] = "another-kernel"
    assert not journals_from(mixed.entries).shared_clock and _check(mixed)["valid"] is True


def _restart_after_vote(stored_epoch: int | None, stored_vote: int | None) -> JB:
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0,
              stored_epoch=None, stored_vote=None)
    j.add(3, "vote", epoch=4, candidate=1, granted=True, pre_vote=False, reason="ok")
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0,
          stored_epoch=stored_epoch, stored_vote=stored_vote)
    return j


def test_a_vote_forgotten_across_a_restart_is_a_durable_vote_violation() -> None:
    assert check_raft(journals_from(_restart_after_vote(4, 1).entries))["valid"] is True
    assert check_raft(journals_from(_restart_after_vote(5, None).entries))["valid"] is True  # moved on
    for stored in ((4, None), (3, 1), (None, None)):
        a = only_anomaly(check_raft(journals_from(_restart_after_vote(*stored).entries)), "DurableVote")
        assert "granted its vote in epoch 4 to 1" in a["explanation"]


def test_an_observer_that_restarts_may_learn_an_older_epoch_again_but_a_voter_may_not() -> None:
    def run(node: int) -> JB:
        j = JB()
        j.add(node, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=5, hw=0)
        j.add(node, "role", role="observer" if node > 3 else "follower", epoch=5, leader=3, voted_for=None)
        j.add(node, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=5, hw=0)
        j.add(node, "role", role="observer" if node > 3 else "follower", epoch=2, leader=3, voted_for=None)
        return j

    assert check_raft(journals_from(run(5).entries), voters=[1, 2, 3])["valid"] is True
    assert only_anomaly(check_raft(journals_from(run(2).entries), voters=[1, 2, 3]), "MonotonicEpoch")


def test_a_checkpointed_high_watermark_beyond_any_the_node_knew_is_a_violation() -> None:
    def run(checkpoint: int) -> JB:
        j = JB()
        j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=12, hw=0)
        j.add(2, "hw", hw=7, epoch=1)
        j.add(2, "recovery", hw_checkpoint=checkpoint, log_start=0, log_end=12)
        j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=12, hw=0)
        return j

    assert check_raft(journals_from(run(7).entries))["valid"] is True
    a = only_anomaly(check_raft(journals_from(run(12).entries)), "CheckpointedHighWatermark")
    assert "checkpoint of 12, beyond the highest high-water mark it had ever known (7)" in a["explanation"]


def test_a_cut_off_node_may_end_with_a_divergent_tail_beyond_its_own_high_water_mark() -> None:
    def run(node3_hw: int) -> JB:
        j = JB()
        for n in (1, 2, 3):
            j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
        j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
        j.add(1, "append", base=0, epoch=1, crcs=[11, 12], control=False, leader=True)
        j.add(2, "append", base=0, epoch=1, crcs=[11, 12], control=False, leader=False)
        j.add(3, "append", base=0, epoch=1, crcs=[11], control=False, leader=False)
        # a divergent tail, in another epoch (one entry per offset and epoch: LogMatching)
        j.add(3, "append", base=1, epoch=2, crcs=[99], control=False, leader=False)
        j.add(1, "hw", hw=2, epoch=1)
        j.add(2, "hw", hw=2, epoch=1)
        j.add(3, "hw", hw=node3_hw, epoch=1)
        return j

    assert check_raft(journals_from(run(1).entries))["valid"] is True  # not yet learned: fine
    bad = check_raft(journals_from(run(2).entries))  # it says offset 1 is committed, with another entry
    assert bad["valid"] is False and {a["type"] for a in bad["anomalies"]} == {"CommittedPrefixAgreement"}


def test_two_votes_in_one_epoch() -> None:
    """A voter that grants its vote to a second candidate in an epoch breaks SingleVote even when
    neither candidate won (no second leader yet): the double vote is the bug, two leaders its effect."""
    j = healthy_raft()
    j.add(3, "vote", epoch=3, candidate=1, granted=True, pre_vote=False, reason="ok")
    j.add(3, "vote", epoch=3, candidate=2, granted=False, pre_vote=False, reason="voted for 1")
    j.add(3, "vote", epoch=4, candidate=2, granted=True, pre_vote=True, reason="ok")  # pre-votes bind nobody
    bad = j.add(3, "vote", epoch=3, candidate=2, granted=True, pre_vote=False, reason="ok")
    a = only_anomaly(_check(j), "SingleVote")
    assert "voted for 1 and then for 2 in epoch 3" in a["explanation"]
    assert any(e["where"] == f"journal.jsonl:{j.entries.index(bad) + 1}" for e in a["entries"])


def test_a_vote_survives_a_restart_unless_the_quorum_state_was_lost() -> None:
    j = healthy_raft()
    j.add(3, "vote", epoch=3, candidate=1, granted=True, pre_vote=False, reason="ok")
    j.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=4, hw=3,
          stored_epoch=3, stored_vote=1)
    j.add(3, "vote", epoch=3, candidate=2, granted=True, pre_vote=False, reason="ok")
    only_anomaly(_check(j), "SingleVote")
    lost = healthy_raft()
    lost.add(3, "vote", epoch=3, candidate=1, granted=True, pre_vote=False, reason="ok")
    lost.add(3, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)  # wiped storage
    lost.add(3, "vote", epoch=3, candidate=2, granted=True, pre_vote=False, reason="ok")
    assert _check(lost)["rules"]["SingleVote"]["valid"] is True
