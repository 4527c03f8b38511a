"""Rule reach (checker.reach): opportunities to break each controller/broker rule, counted from a
synthetic committed log and controller decisions whose opportunities are known — and shown in the
coverage section, the report and test-all's summary."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from kraftlab.checker.coverage import coverage
from kraftlab.checker.journal import journals_from
from kraftlab.checker.reach import RULES, rule_reach
from kraftlab.matrix import MatrixResult, reach_table
from kraftlab.node.metadata.records import (
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode,
)
from kraftlab.report_coverage import coverage_section

T = uuid.UUID(int=7)
INC = {b: uuid.UUID(int=b) for b in (1, 2, 3)}
RECORDS: list[MetadataRecord] = [
    RegisterBrokerRecord(broker_id=1, incarnation_id=INC[1], broker_epoch=0),  # 0
    RegisterBrokerRecord(broker_id=2, incarnation_id=INC[2], broker_epoch=1),  # 1
    RegisterBrokerRecord(broker_id=3, incarnation_id=INC[3], broker_epoch=2),  # 2: stays fenced until 9
    UnfenceBrokerRecord(id=1, epoch=0),  # 3
    UnfenceBrokerRecord(id=2, epoch=1),  # 4
    TopicRecord(name="t", topic_id=T),  # 5
    PartitionRecord(partition_id=0, topic_id=T, replicas=(1, 2, 3), isr=(1, 2), leader=1,
                    leader_epoch=0, partition_epoch=0),  # 6
    PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1,)),  # 7: an accepted AlterPartition
    FenceBrokerRecord(id=2, epoch=1),  # 8: broker 2 held an ISR place
    UnfenceBrokerRecord(id=3, epoch=2),  # 9: an eligible replica outside the ISR
    PartitionChangeRecord(partition_id=0, topic_id=T, leader=-1),  # 10: an election (2 is fenced)
    FenceBrokerRecord(id=1, epoch=0),  # 11: broker 1 held an ISR place and led
]


def _alter(offset: int, sender: int, le: int, pe: int, isr: list[int], error: str = "NONE",
           changed: bool = False, epochs: list[int] | None = None, requested: bool = True) -> dict[str, Any]:
    asked: dict[str, Any] = {"requested_leader_epoch": le, "requested_partition_epoch": pe,
                             "requested_broker_epochs": epochs or [-1] * len(isr)} if requested else {}
    return {"api": "AlterPartition", "broker": sender, "broker_epoch": 0, "topic": "t", "partition": 0,
            "requested_isr": isr, "changed": changed, "error": error, "offset": offset, **asked}


def _beat(offset: int, broker: int, epoch: int, at_ms: int, error: str = "NONE", **f: Any) -> dict[str, Any]:
    return {"api": "BrokerHeartbeat", "broker": broker, "broker_epoch": epoch, "error": error, "offset": offset,
            "at_ms": at_ms, "fenced": False, "shut_down": False, "want_fence": False, "want_shut_down": False, **f}


DECISIONS: list[dict[str, Any]] = [
    _beat(4, 2, 1, 1000),
    _beat(4, 1, 0, 1000),
    # the accepted alter that wrote offset 7 met partition epoch 0: current, no opportunity
    _alter(7, 1, 0, 0, [1], changed=True),
    _alter(8, 1, 0, 1, [1, 3], "INELIGIBLE_REPLICA"),  # 3 is fenced: IsrJoinersEligible (fenced)
    _alter(8, 1, 0, 0, [1, 2], "INVALID_UPDATE_VERSION"),  # stale epoch: refused before 2 (fenced) is looked at
    _alter(8, 1, 0, 1, [1, 2], "INELIGIBLE_REPLICA", epochs=[0, 0]),  # 2 fenced and of another epoch: not one chance
    _alter(8, 1, 0, 1, [1, 2, 3], "INELIGIBLE_REPLICA"),  # two fenced joiners: either one is refused alone
    _beat(8, 3, 2, 2000, metadata_offset=1, fenced=True),  # fenced, short of its registration at 2
    _beat(8, 2, 0, 2100, "STALE_BROKER_EPOCH"),  # broker 2 is at epoch 1
    _beat(8, 1, 0, 12000),  # 11 s after its last accepted heartbeat: past the session, not past 13 s
    _beat(8, 1, 0, 25500),  # 13.5 s after: past the session, the slack and the confirmation
    _beat(8, 1, 0, 26000, want_shut_down=True),  # leads t-0
    {"api": "BrokerRegistration", "broker": 2, "broker_epoch": -1, "incarnation": str(uuid.UUID(int=99)),
     "error": "DUPLICATE_BROKER_REGISTRATION", "offset": 8, "at_ms": 5000},  # 2's session lives (hb at 1000)
    {"api": "BrokerRegistration", "broker": 1, "broker_epoch": 0, "incarnation": str(INC[1]),
     "error": "NONE", "offset": 8, "at_ms": 26100},  # a retry of the registered incarnation
    {"api": "CreateTopics", "topic": "t", "error": "TOPIC_ALREADY_EXISTS", "offset": 8},
    {"api": "DeleteTopics", "topic": "gone", "error": "UNKNOWN_TOPIC_OR_PARTITION", "offset": 8},
    {"api": "DeleteTopics", "topic": "t", "error": "NOT_CONTROLLER"},  # lost leadership: no state, not counted
]


def _journal(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(ev: str, **f: Any) -> None:
        out.append({"ts": len(out), "mono": len(out), "node": 1, "ev": ev, **f})

    add("start", log_start=0, log_end=0)
    add("role", role="leader", epoch=1, leader=1)
    for o, r in enumerate(RECORDS):
        add("apply", offset=o, type=type(r).__name__, crc=0, batch_end=o + 1,
            value=base64.b64encode(encode(r)).decode())
    for d in decisions:
        add("decision", **d)
    return out


EXPECTED = {"IsrJoinersEligible": {"fenced": 1}, "EpochsGoBack": {"stale_partition_epoch": 1},
            "StaleEpochAccepted": {"older_epoch": 1}, "UnfencedBeforeCaughtUp": {"short_of_registration": 1},
            "ShutDownWhileLeading": {"leader_asks_to_shut_down": 1},
            # broker 1: 12 s → 25.5 s; broker 2 (unfenced) silent from 1 s to the term's end at 26.1 s; broker 3 is
            # fenced when last heard
            "SessionNotFenced": {"silence": 1, "silent_until_the_term_ended": 1},
            "RegisteredOverLiveSession": {"live_session": 1}, "EpochBumpedForSameIncarnation": {"retry": 1},
            "TopicNameUnique": {"existing_name": 1}, "RemovesLiveTopic": {"missing_name": 1},
            "LeaderFromIsr": {"eligible_replica_outside_isr": 1}, "LeaderEligible": {"ineligible_replica": 1},
            "FencedLeavesIsr": {"fence": 2}, "NoIneligibleLeader": {"fence": 1}}


def test_counts_each_known_opportunity_against_the_committed_log() -> None:
    reach = rule_reach(journals_from(_journal(DECISIONS)))
    assert reach["how"] == EXPECTED
    assert reach["rules"] == {rule: sum(EXPECTED.get(rule, {}).values()) for rule in RULES}
    assert reach["not_reached"] == sorted(set(RULES) - set(EXPECTED))
    assert reach["unknown"] == []


def test_an_accepted_write_is_judged_on_the_state_before_its_own_record() -> None:
    """The alter that wrote offset 7 asked at partition epoch 0; after its record the epoch is 1 —
    counting it against that would call it stale."""
    reach = rule_reach(journals_from(_journal([_alter(7, 1, 0, 0, [1], changed=True)])))
    assert reach["rules"]["EpochsGoBack"] == 0
    assert reach["rules"]["IsrJoinersEligible"] == 0


def test_journals_without_the_request_fields_say_unknown_not_unreached() -> None:
    reach = rule_reach(journals_from(_journal([_alter(8, 1, 0, 1, [1, 3], requested=False)])))
    assert "IsrJoinersEligible" in reach["unknown"]
    assert "IsrJoinersEligible" not in reach["not_reached"]


def test_the_report_and_test_all_show_it(tmp_path: Path) -> None:
    cov = coverage(journals_from(_journal(DECISIONS)), None, {})
    assert cov["rules"]["rules"]["IsrJoinersEligible"] == 1
    html = "".join(coverage_section(cov))
    assert "Rule reach" in html and "ZombieRegistered" in html.split("Not reached:")[1]
    runs = []
    for i, c in enumerate((cov, {**cov, "rules": {**cov["rules"], "rules": {**cov["rules"]["rules"],
                                                                             "SessionNotFenced": 0}}})):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "results.json").write_text(json.dumps({"valid": True, "coverage": c}))
        runs.append(MatrixResult("mixed", "all", i, 0, 60.0, str(d)))
    table = reach_table(runs)
    assert table is not None
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "SessionNotFenced" in text and "1 run(s): not reached" in text
    assert "ZombieRegistered" in text and "2 run(s): not reached" in text
