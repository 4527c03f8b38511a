"""Raft invariants the bug zoo needs end to end, each with a hand-built violating journal (reported
once, with the offending entries) and a clean one: durable acknowledgement (ack-before-fsync),
StaleLeader (no-check-quorum) and NodeStoppedOnSafetyError (snapshot-id-off-by-one)."""

from __future__ import annotations

from typing import Any

from checker_journals import JB, line_of, only_anomaly

from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import check_raft


def _check(j: JB) -> dict[str, Any]:
    return check_raft(journals_from(j.entries, "journal.jsonl"))




def _flushing_cluster(follower_flushes: bool = True) -> JB:
    """Node 1 leads epoch 1 and commits offsets 0-2; every node journals `flush` after its append
    (as the node does) unless `follower_flushes` is False (the followers' flush does not move)."""
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    for n in (2, 3):
        j.add(n, "role", role="follower", epoch=1, leader=1, voted_for=1)
    j.add(1, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=True)
    j.add(1, "flush", end=3)
    for n in (2, 3):
        j.add(n, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=False)
        j.add(n, "flush", end=3 if follower_flushes else 0)
    return j


# ---- ack-before-fsync: a HW counted on offsets no flush covers ---------------------------------


def test_follower_flushing_before_its_ack_is_clean() -> None:
    j = _flushing_cluster()
    j.add(1, "hw", hw=3, epoch=1)
    for n in (2, 3):
        j.add(n, "hw", hw=3, epoch=1)
    res = _check(j)
    assert res["valid"] is True, res["anomalies"]


def test_deferred_leader_flush_committed_by_a_follower_majority_is_clean() -> None:
    """As in Kafka, a leader may commit what two followers flushed before its own flush ends."""
    j = _flushing_cluster()
    j.add(1, "append", base=3, epoch=1, crcs=[14], control=False, leader=True)
    for n in (2, 3):
        j.add(n, "append", base=3, epoch=1, crcs=[14], control=False, leader=False)
        j.add(n, "flush", end=4)
    j.add(1, "hw", hw=4, epoch=1)
    j.add(1, "flush", end=4)
    res = _check(j)
    assert res["valid"] is True, res["anomalies"]


def test_follower_taking_a_hw_beyond_its_flush_is_reported_once() -> None:
    j = _flushing_cluster(follower_flushes=False)
    j.add(1, "hw", hw=3, epoch=1)
    bad = j.add(2, "hw", hw=3, epoch=1)
    j.add(2, "hw", hw=3, epoch=1)  # the same life repeats it: reported once
    flush3 = j.add(3, "flush", end=3)  # node 3 flushes in time (after its periodic flush)
    j.add(3, "hw", hw=3, epoch=1)
    res = _check(j)
    a = only_anomaly(res, "MajorityReachedHighWatermark")
    assert "node 2 (follower) took high-water mark 3" in a["explanation"] and "ended at 0" in a["explanation"]
    assert a["entries"][-1]["where"] == line_of(j, bad)
    assert all(e["where"] != line_of(j, flush3) for e in a["entries"])


def test_majority_counts_only_flushed_entries() -> None:
    """The leader alone flushed offset 2; the followers appended it but never flushed it."""
    j = _flushing_cluster(follower_flushes=False)
    bad = j.add(1, "hw", hw=3, epoch=1)
    for n in (2, 3):  # their journals go on (not cut before a flush)
        j.add(n, "role", role="follower", epoch=1, leader=1, voted_for=1)
    a = only_anomaly(_check(j), "MajorityReachedHighWatermark")
    assert a["entries"] == [a["entries"][0]] and a["entries"][0]["where"] == line_of(j, bad)
    assert "only [1]" in a["explanation"]


def test_a_journal_without_flush_events_counts_appends() -> None:
    j = _flushing_cluster()
    j.entries = [e for e in j.entries if e["ev"] != "flush"]
    j.add(1, "hw", hw=3, epoch=1)
    j.add(2, "hw", hw=3, epoch=1)
    assert _check(j)["valid"] is True


def test_a_restart_recovers_its_log_end_as_durable() -> None:
    j = _flushing_cluster()
    j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=3, hw=0)
    j.add(2, "role", role="follower", epoch=1, leader=1, voted_for=1)
    j.add(2, "hw", hw=3, epoch=1)
    assert _check(j)["valid"] is True


# ---- the leader's own durable end: only flushes journalled before its HW count -------------------


def _leader_appends_offset_3(j: JB) -> None:
    """After `_flushing_cluster` (0-2 committed everywhere): node 1 appends offset 3, node 2 too."""
    for n in (1, 2, 3):
        j.add(n, "hw", hw=3, epoch=1)
    j.add(1, "append", base=3, epoch=1, crcs=[14], control=False, leader=True)
    j.add(2, "append", base=3, epoch=1, crcs=[14], control=False, leader=False)
    j.add(2, "flush", end=4)


def _journals_go_on(j: JB) -> None:
    for n in (2, 3):  # the followers' journals go on past the leader's HW (not cut short)
        j.add(n, "role", role="follower", epoch=1, leader=1, voted_for=1)


def test_leader_flush_journalled_after_its_hw_does_not_count() -> None:
    j = _flushing_cluster()
    _leader_appends_offset_3(j)
    bad = j.add(1, "hw", hw=4, epoch=1)
    j.add(1, "flush", end=4)  # too late: the HW counted an unflushed leader log
    _journals_go_on(j)
    a = only_anomaly(_check(j), "MajorityReachedHighWatermark")
    assert a["entries"][0]["where"] == line_of(j, bad) and "only [2]" in a["explanation"]


def test_leader_flush_journalled_before_its_hw_counts() -> None:
    j = _flushing_cluster()
    _leader_appends_offset_3(j)
    j.add(1, "flush", end=4)
    j.add(1, "hw", hw=4, epoch=1)
    _journals_go_on(j)
    assert _check(j)["valid"] is True


def test_followers_flushes_count_in_any_cross_node_order() -> None:
    """Other nodes' clocks and line order say nothing about the leader's: a follower's flush
    journalled (by the wall clock) after the leader's HW still counts."""
    j = _flushing_cluster()
    for n in (1, 2, 3):
        j.add(n, "hw", hw=3, epoch=1)
    j.add(1, "append", base=3, epoch=1, crcs=[14], control=False, leader=True)
    j.add(1, "hw", hw=4, epoch=1)
    j.add(2, "append", base=3, epoch=1, crcs=[14], control=False, leader=False)
    j.add(2, "flush", end=4)
    j.add(3, "append", base=3, epoch=1, crcs=[14], control=False, leader=False)
    j.add(3, "flush", end=4)
    j.add(1, "flush", end=4)
    assert _check(j)["valid"] is True


def test_a_hw_after_the_end_of_a_cut_journal_is_not_judged() -> None:
    """Journals copied from live nodes: node 3's ends before the leader's last HW, so the HW is
    unjudged (node 3 may have flushed offset 3 just after its copy) — until its journal goes on."""
    j = _flushing_cluster()
    _leader_appends_offset_3(j)
    j.add(1, "hw", hw=4, epoch=1)
    j.add(1, "flush", end=4)
    assert _check(j)["valid"] is True
    _journals_go_on(j)
    assert only_anomaly(_check(j), "MajorityReachedHighWatermark")["entries"][0]["hw"] == 4


# ---- no-check-quorum: a leader that heard from nobody ------------------------------------------


def _quorum(j: JB, node: int, epoch: int, ages: dict[int, int]) -> dict[str, Any]:
    return j.add(node, "quorum", epoch=epoch, fetch_age_ms={str(v): a for v, a in ages.items()}, check_quorum_ms=3000)


def test_a_leader_hearing_a_majority_is_clean() -> None:
    j = _flushing_cluster()
    for _ in range(3):
        _quorum(j, 1, 1, {2: 200, 3: 9000})  # one follower is enough: 2 of 3 with the leader
    assert _check(j)["valid"] is True


def test_one_stale_sample_then_resigning_is_clean() -> None:
    j = _flushing_cluster()
    _quorum(j, 1, 1, {2: 4500, 3: 4600})
    j.add(1, "role", role="resigned", epoch=1, leader=1, voted_for=None)
    assert _check(j)["valid"] is True


def test_stale_leader_still_leading_is_reported_once() -> None:
    j = _flushing_cluster()
    _quorum(j, 1, 1, {2: 100, 3: 100})
    first = _quorum(j, 1, 1, {2: 4100, 3: 4200})
    second = _quorum(j, 1, 1, {2: 5100, 3: 5200})
    _quorum(j, 1, 1, {2: 6100, 3: 6200})  # the same epoch: reported once
    a = only_anomaly(_check(j), "StaleLeader")
    assert [e["where"] for e in a["entries"]] == [line_of(j, first), line_of(j, second)]
    assert "node 1 still led epoch 1" in a["explanation"] and "[2, 3]" in a["explanation"]


# ---- snapshot-id-off-by-one: a node stuck on an internal error -----------------------------------


def test_fatal_core_error_is_a_finding() -> None:
    j = _flushing_cluster()
    j.add(1, "hw", hw=3, epoch=1)
    bad = j.add(2, "fatal", error="ValueError: offset 2 is not a batch boundary of the log [0, 3)", stopped=False,
                epoch=1, hw=3, applied=2, log_end=3)
    a = only_anomaly(_check(j), "NodeStoppedOnSafetyError")
    assert a["entries"][0]["where"] == line_of(j, bad)
    assert "node 2 is stuck" in a["explanation"] and "offset 2 is not a batch boundary" in a["explanation"]
    assert "applied up to 2" in a["explanation"]


def test_fatal_error_on_damaged_storage_is_not_judged() -> None:
    """The disk nemesis damages storage on purpose: a life that journalled `corruption` may fail anywhere."""
    j = _flushing_cluster()
    j.add(2, "corruption", path="00000000000000000000.log", offset=1, reason="crc mismatch", below_hw=False)
    j.add(2, "fatal", error="ValueError: bad batch", stopped=False, epoch=1, hw=0, applied=0, log_end=3)
    j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=1, hw=0)
    later = j.add(2, "fatal", error="ValueError: bad batch", stopped=False, epoch=1, hw=0, applied=0, log_end=1)
    a = only_anomaly(_check(j), "NodeStoppedOnSafetyError")  # the next life has no damage: judged
    assert a["entries"][0]["where"] == line_of(j, later)


# ---- respond-before-commit: a controller answers before its records commit ---------------------

def _answering_leader(answer_at_hw: int, *, error: str = "NONE", restarts: bool = False) -> JB:
    """Leader 1 writes a CreateTopics' records at offsets 3-4 and journals its answer (`decision`,
    offset 4) when its high-water mark is `answer_at_hw`; then the HW reaches 5."""
    j = _flushing_cluster()
    j.add(1, "hw", hw=3, epoch=1)
    j.add(1, "append", base=3, epoch=1, crcs=[14, 15], control=False, leader=True)
    j.add(1, "flush", end=5)
    if answer_at_hw == 5:
        j.add(1, "hw", hw=5, epoch=1)
    j.add(1, "decision", api="CreateTopics", topic="t1", error=error, offset=4)
    j.add(1, "decision", api="CreateTopics", topic="t2", error=error, offset=4)
    if answer_at_hw != 5:
        j.add(1, "hw", hw=5, epoch=1)
    if restarts:
        j.add(1, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=5, hw=3)
        j.add(1, "decision", api="DeleteTopics", topic="t1", error=error, offset=4)
    for n in (2, 3):
        j.add(n, "append", base=3, epoch=1, crcs=[14, 15], control=False, leader=False)
        j.add(n, "flush", end=5)
    return j


def test_answers_after_commit_are_clean() -> None:
    assert _check(_answering_leader(5))["valid"] is True


def test_failed_answers_may_come_any_time() -> None:
    assert _check(_answering_leader(3, error="NOT_CONTROLLER"))["valid"] is True


def test_an_answer_before_commit_is_reported_once_per_process_life() -> None:
    j = _answering_leader(3)
    a = only_anomaly(_check(j), "AnsweredBeforeCommit")
    assert "CreateTopics" in a["explanation"] and "offset 4" in a["explanation"] and "mark was 3" in a["explanation"]
    assert a["entries"][-1]["where"] == line_of(j, j.entries[[e["ev"] for e in j.entries].index("decision")])
    res = _check(_answering_leader(3, restarts=True))
    assert [x["type"] for x in res["anomalies"]] == ["AnsweredBeforeCommit"] * 2
