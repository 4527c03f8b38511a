"""The data-plane journal rules: a broker appends client records only as the partition's leader, in
its own leader epoch, while in the ISR; one broker leads a partition per leader epoch; acks=all is
acknowledged once the HW passed the record with an ISR of min.insync.replicas; a leader's HW never
goes back within its epoch; an acknowledged offset stays below every later leader's log end. Valid
on a journal of leadership moving with appends and acks in each leader's epoch (a restart
included); each rule broken by its own planted journal; nothing judged where no data plane was used."""

from __future__ import annotations

import itertools
from typing import Any

from kraftlab.checker.dataplane import INVARIANTS, check_dataplane
from kraftlab.checker.journal import journals_from

T = {"topic": "queue", "partition": 0}


CLOCK = itertools.count(1)


def ev(node: int, kind: str, **f: Any) -> dict[str, Any]:
    n = next(CLOCK)
    return {"ts": n, "mono": n, "node": node, "ev": kind, **f}


def role(node: int, r: str, leader: int, epoch: int, isr: list[int], topic_id: str | None = "id-1",
         end: int = 0, hw: int = 0) -> dict[str, Any]:
    return ev(node, "partition_role", **T, role=r, leader=leader, leader_epoch=epoch, log_end_offset=end, hw=hw,
              isr=isr, topic_id=topic_id)


def hw(node: int, epoch: int, to: int, isr: list[int]) -> dict[str, Any]:
    return ev(node, "partition_hw", **T, hw=to, leader_epoch=epoch, isr=isr, min_insync_replicas=2)


def ack(node: int, epoch: int, first: int, last: int, isr: list[int], at: int | None = None) -> dict[str, Any]:
    return ev(node, "partition_ack", **T, first=first, last=last, leader_epoch=epoch, hw=last + 1 if at is None else at,
              isr=isr, min_insync_replicas=2, topic_id="id-1")


def append(node: int, epoch: int, first: int, last: int) -> dict[str, Any]:
    return ev(node, "partition_append", **T, first=first, last=last, leader_epoch=epoch, acks=-1)


def healthy() -> list[dict[str, Any]]:
    return [role(1, "leader", 1, 0, [1, 2]), role(2, "follower", 1, 0, [1, 2]), append(1, 0, 0, 4),
            hw(1, 0, 5, [1, 2]), ack(1, 0, 0, 4, [1, 2]),
            role(2, "leader", 2, 1, [2, 3], end=5, hw=4), role(1, "follower", 2, 1, [2, 3]), append(2, 1, 5, 9),
            hw(2, 1, 5, [2, 3]),
            ev(2, "start"), role(2, "leader", 2, 1, [2, 3], end=10, hw=3), append(2, 1, 10, 12),  # HW from checkpoint
            hw(2, 1, 13, [2, 3]), ack(2, 1, 10, 12, [2, 3])]


def test_healthy_journal_holds() -> None:
    res = check_dataplane(journals_from(healthy()))
    assert res["valid"] is True, res["explanation"]
    assert res["stats"] == {"appends_judged": 3, "roles": 5, "acks_judged": 2}
    assert set(res["checked"]) == {"LeaderAppendsInItsEpoch", "OneLeaderPerEpoch", "AckedWithMinIsr",
                                   "HighWatermarkMonotonic", "AckedBelowLaterLeaderEnd"}


def test_acks_all_acknowledged_below_min_insync() -> None:
    small = [role(1, "leader", 1, 2, [1]), append(1, 2, 0, 0), hw(1, 2, 1, [1]), ack(1, 2, 0, 0, [1])]
    early = [role(1, "leader", 1, 2, [1, 2]), append(1, 2, 0, 3), hw(1, 2, 2, [1, 2]), ack(1, 2, 0, 3, [1, 2], at=4)]
    for journal, why in [(small, "its ISR [1] was smaller than min.insync.replicas 2"),
                         (early, "its high-water mark (4; journalled 2) had not passed it")]:
        res = check_dataplane(journals_from(journal))
        assert [a["type"] for a in res["anomalies"]] == ["AckedWithMinIsr"], res["explanation"]
        assert why in res["anomalies"][0]["explanation"]


def test_hw_goes_back_within_a_leader_epoch() -> None:
    res = check_dataplane(journals_from([role(1, "leader", 1, 3, [1, 2], end=8, hw=6), hw(1, 3, 2, [1, 2])]))
    assert [a["type"] for a in res["anomalies"]] == ["HighWatermarkMonotonic"]
    assert "went back from 6 to 2 in leader epoch 3" in res["anomalies"][0]["explanation"]
    later = [role(1, "leader", 1, 3, [1, 2], end=8, hw=6), hw(1, 3, 8, [1, 2]), role(1, "follower", 2, 4, [1, 2]),
             role(1, "leader", 1, 5, [1, 2], end=9, hw=7), hw(1, 5, 9, [1, 2])]  # a lower HW in a later epoch
    assert check_dataplane(journals_from(later))["valid"] is True


def test_a_later_leader_without_an_acknowledged_record() -> None:
    journal = [role(1, "leader", 1, 0, [1, 2]), append(1, 0, 0, 4), hw(1, 0, 5, [1, 2]), ack(1, 0, 0, 4, [1, 2]),
               role(2, "leader", 2, 1, [2], end=3, hw=3)]  # it cut its log to its own HW
    res = check_dataplane(journals_from(journal))
    assert [a["type"] for a in res["anomalies"]] == ["AckedBelowLaterLeaderEnd"]
    assert ("broker 2 became leader of queue-0 in leader epoch 1 with its log ending at 3, but broker 1 had "
            "acknowledged offset 4") in res["anomalies"][0]["explanation"]


def test_follower_append_breaks_leader_appends_in_its_epoch() -> None:
    res = check_dataplane(journals_from([*healthy(), append(1, 1, 13, 13)]))
    assert res["valid"] is False
    (a,) = res["anomalies"]
    assert a["type"] == "LeaderAppendsInItsEpoch" and "latest role there was follower" in a["explanation"]


def test_stale_epoch_and_out_of_isr_and_forgotten_after_restart() -> None:
    stale = [role(1, "leader", 1, 3, [1, 2]), append(1, 2, 0, 0)]
    out = [role(1, "leader", 1, 3, [1, 2]), ev(1, "partition_hw", **T, hw=1, leader_epoch=3, isr=[2]),
           append(1, 3, 1, 1)]
    restarted = [role(1, "leader", 1, 3, [1]), ev(1, "start"), append(1, 3, 0, 0)]
    for journal, why in [(stale, "it led in leader epoch 3, not 2"), (out, "its ISR [2] no longer held it"),
                         (restarted, "no role for the partition since it started")]:
        res = check_dataplane(journals_from(journal))
        assert [a["type"] for a in res["anomalies"]] == ["LeaderAppendsInItsEpoch"]
        assert why in res["anomalies"][0]["explanation"]


def test_two_leaders_in_one_epoch() -> None:
    res = check_dataplane(journals_from([role(1, "leader", 1, 4, [1, 2, 3]), role(3, "leader", 3, 4, [1, 2, 3])]))
    assert [a["type"] for a in res["anomalies"]] == ["OneLeaderPerEpoch"]
    assert "brokers 1, 3 each led queue-0 in leader epoch 4" in res["anomalies"][0]["explanation"]


def test_a_topic_created_anew_starts_its_epochs_anew() -> None:
    again = [role(1, "leader", 1, 0, [1], "id-1"), role(2, "leader", 2, 0, [2], "id-2")]
    assert check_dataplane(journals_from(again))["valid"] is True
    unnamed = [role(1, "leader", 1, 0, [1], None), role(2, "leader", 2, 0, [2], None)]
    res = check_dataplane(journals_from(unnamed))
    assert "OneLeaderPerEpoch" not in res["checked"] and "topic id" in res["not_checked"]["OneLeaderPerEpoch"]


def test_no_data_plane_nothing_judged() -> None:
    res = check_dataplane(journals_from([ev(1, "start"), ev(1, "role", role="leader", epoch=1)]))
    assert res["checked"] == [] and set(res["not_checked"]) == set(INVARIANTS)
