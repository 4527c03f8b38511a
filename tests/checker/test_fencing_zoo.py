"""Fencing invariants the bug zoo needs end to end, each with a hand-built violating journal
(reported once, with the offending entries) and a clean one: SelfFencing (no-self-fencing),
FencedInIsr from the applied records (fenced-stays-in-isr) and EpochBumpedForSameIncarnation
(reregister-bumps-epoch)."""

from __future__ import annotations

from typing import Any

from checker_journals import JB, line_of, only_anomaly

from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.journal import journals_from

S = 1_000_000_000  # ns


def _check(j: JB) -> dict[str, Any]:
    return check_fencing(journals_from(j.entries, "journal.jsonl"), None, session_timeout_ms=9000, slack_ms=2000)




def _at(e: dict[str, Any], mono_ns: int) -> dict[str, Any]:
    e["mono"] = mono_ns
    return e


# ---- SelfFencing ----------------------------------------------------------------------------


def _running_broker() -> tuple[JB, dict[str, Any]]:
    j = JB()
    j.add(4, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(4, "broker_state", broker=4, state="STARTING")
    j.add(4, "heartbeat", broker=4, ok=True, self_fence_ms=4000)
    j.add(4, "broker_state", broker=4, state="RECOVERY")
    j.add(4, "heartbeat", broker=4, ok=True, self_fence_ms=4000)
    j.add(4, "broker_state", broker=4, state="RUNNING")
    ok = _at(j.add(4, "heartbeat", broker=4, ok=True, self_fence_ms=4000), 10 * S)
    return j, ok


def test_broker_fencing_itself_in_time_is_clean() -> None:
    j, _ = _running_broker()
    _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 12 * S)
    _at(j.add(4, "broker_state", broker=4, state="FENCED_SELF"), 14_100_000_000)
    for t in (15, 16, 17, 20):
        _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), t * S)
    _at(j.add(4, "heartbeat", broker=4, ok=True, self_fence_ms=4000), 21 * S)
    _at(j.add(4, "broker_state", broker=4, state="UNFENCED_SELF"), 21 * S + 1)
    res = _check(j)
    assert res["valid"] is True, res["anomalies"]


def test_one_late_failure_sample_is_not_enough() -> None:
    """A single sample past the limit (its clock read may postdate the check) is not judged."""
    j, _ = _running_broker()
    _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 17 * S)
    _at(j.add(4, "broker_state", broker=4, state="FENCED_SELF"), 17 * S + 1)
    _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 18 * S)
    assert _check(j)["valid"] is True


def test_a_starting_broker_is_not_serving() -> None:
    j = JB()
    j.add(4, "broker_state", broker=4, state="STARTING")
    _at(j.add(4, "heartbeat", broker=4, ok=True, self_fence_ms=4000), 1 * S)
    for t in (10, 11, 12):
        _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), t * S)
    assert _check(j)["valid"] is True


def test_broker_serving_while_cut_off_is_reported_once() -> None:
    j, ok = _running_broker()
    _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 12 * S)
    first = _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 16_500_000_000)
    bad = _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), 17_500_000_000)
    for t in (19, 20, 21):
        _at(j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000), t * S)
    a = only_anomaly(_check(j), "SelfFencing")
    assert [e["where"] for e in a["entries"]] == [line_of(j, ok), line_of(j, first), line_of(j, bad)]
    assert "broker 4 kept serving" in a["explanation"] and "7500 ms" in a["explanation"]


# ---- FencedInIsr over applied records ------------------------------------------------------------


def _apply(j: JB, node: int, offset: int, batch_end: int, kind: str, **fields: Any) -> dict[str, Any]:
    return j.add(node, "apply", offset=offset, type=kind, crc=offset, batch_end=batch_end, **fields)


def _partition(j: JB, node: int, offset: int, batch_end: int, isr: list[int], leader: int,
               topic_id: str = "id-t") -> dict[str, Any]:
    return _apply(j, node, offset, batch_end, "PartitionChangeRecord", topic="t", topic_id=topic_id, partition=0,
                  isr=isr, leader=leader)


def test_fence_with_its_isr_changes_in_the_batch_is_clean() -> None:
    j = JB()
    _apply(j, 2, 0, 2, "PartitionRecord", topic="t", topic_id="id-t", partition=0, isr=[4, 5], leader=4)
    _apply(j, 2, 1, 2, "RegisterBrokerRecord")
    _apply(j, 2, 2, 4, "FenceBrokerRecord", broker=4)
    _partition(j, 2, 3, 4, [5], 5)
    _apply(j, 2, 4, 5, "RegisterBrokerRecord")
    assert _check(j)["valid"] is True


def test_fenced_broker_left_in_the_isr_is_reported_once() -> None:
    j = JB()
    for node in (1, 2):  # both nodes apply the same records: one report
        state = _apply(j, node, 0, 1, "PartitionRecord", topic="t", topic_id="id-t", partition=0, isr=[4, 5],
                       leader=4)
        fence = _apply(j, node, 1, 2, "FenceBrokerRecord", broker=4)
        _apply(j, node, 2, 3, "RegisterBrokerRecord")
        _apply(j, node, 3, 4, "RegisterBrokerRecord")
        if node == 1:
            first_state, first_fence = state, fence
    a = only_anomaly(_check(j), "FencedInIsr")
    assert [e["where"] for e in a["entries"]] == [line_of(j, first_fence), line_of(j, first_state)]
    assert "broker 4 was fenced at offset 1" in a["explanation"]


def test_unfenced_broker_back_in_the_isr_is_clean() -> None:
    j = JB()
    _apply(j, 2, 0, 1, "PartitionRecord", topic="t", topic_id="id-t", partition=0, isr=[4, 5], leader=4)
    _apply(j, 2, 1, 3, "FenceBrokerRecord", broker=4)
    _partition(j, 2, 2, 3, [5], 5)
    _apply(j, 2, 3, 5, "UnfenceBrokerRecord", broker=4)
    _partition(j, 2, 4, 5, [5, 4], 5)
    _apply(j, 2, 5, 6, "RegisterBrokerRecord")
    assert _check(j)["valid"] is True


def test_a_deleted_topic_does_not_keep_its_isr() -> None:
    j = JB()
    _apply(j, 2, 0, 1, "PartitionRecord", topic="t", topic_id="id-old", partition=0, isr=[4], leader=4)
    _apply(j, 2, 1, 2, "RemoveTopicRecord", topic_id="id-old")
    _apply(j, 2, 2, 3, "FenceBrokerRecord", broker=4)
    _apply(j, 2, 3, 4, "RegisterBrokerRecord")
    assert _check(j)["valid"] is True


def test_a_restart_cut_batch_is_not_judged() -> None:
    j = JB()
    _apply(j, 2, 0, 1, "PartitionRecord", topic="t", topic_id="id-t", partition=0, isr=[4], leader=4)
    _apply(j, 2, 1, 3, "FenceBrokerRecord", broker=4)  # killed before offset 2's apply was journalled
    j.add(2, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=3, hw=0)
    _apply(j, 2, 3, 4, "RegisterBrokerRecord")
    assert _check(j)["valid"] is True


# ---- EpochBumpedForSameIncarnation ----------------------------------------------------------------


def _registration(j: JB, node: int, broker: int, epoch: int, incarnation: str, offset: int) -> dict[str, Any]:
    return j.add(node, "decision", api="BrokerRegistration", broker=broker, broker_epoch=epoch,
                 incarnation=incarnation, error="NONE", offset=offset)


def test_a_retried_registration_keeps_its_epoch_across_controllers() -> None:
    j = JB()
    _registration(j, 1, 4, 10, "inc-a", 10)
    _registration(j, 2, 4, 10, "inc-a", 25)  # the next active controller answers the retry
    _registration(j, 2, 4, 30, "inc-b", 30)  # a new process of the broker
    j.add(2, "decision", api="UnregisterBroker", broker=4, broker_epoch=30, error="NONE", offset=31)
    _registration(j, 2, 4, 40, "inc-b", 40)  # after an unregistration a new epoch is right
    assert _check(j)["valid"] is True


def test_an_unregistration_answered_not_controller_that_committed_ends_the_registration() -> None:
    """The controller resigned before answering the UnregisterBroker (NOT_CONTROLLER), but the record
    committed under the next leader: the same incarnation registering again gets a new epoch."""
    j = JB()
    _registration(j, 2, 1000, 129, "inc-a", 129)
    j.add(2, "decision", api="UnregisterBroker", broker=1000, broker_epoch=129, error="NOT_CONTROLLER")
    for node in (1, 2, 3):
        j.add(node, "apply", offset=229, type="UnregisterBrokerRecord", broker=1000)
    _registration(j, 2, 1000, 256, "inc-a", 256)
    assert _check(j)["valid"] is True
    j2 = JB()  # without the committed record the same answers are a bumped retry
    _registration(j2, 2, 1000, 129, "inc-a", 129)
    j2.add(2, "decision", api="UnregisterBroker", broker=1000, broker_epoch=129, error="NOT_CONTROLLER")
    _registration(j2, 2, 1000, 256, "inc-a", 256)
    only_anomaly(_check(j2), "EpochBumpedForSameIncarnation")


def test_a_retried_registration_with_a_new_epoch_is_reported() -> None:
    j = JB()
    _registration(j, 1, 4, 10, "inc-a", 10)
    held = _registration(j, 2, 4, 12, "inc-a", 12)  # journal order differs from log order: sorted by offset
    _registration(j, 2, 5, 11, "inc-x", 11)
    bad = _registration(j, 2, 4, 20, "inc-a", 20)
    res = _check(j)
    assert res["valid"] is False
    found = [a for a in res["anomalies"] if a["type"] == "EpochBumpedForSameIncarnation"]
    assert [a["type"] for a in res["anomalies"]] == ["EpochBumpedForSameIncarnation"] * 2
    assert "again with epoch 12, though it held epoch 10" in found[0]["explanation"]
    assert [e["where"] for e in found[1]["entries"]] == [line_of(j, held), line_of(j, bad)]
