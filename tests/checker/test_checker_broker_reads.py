"""The broker-read rules: every answer a broker gave shows a committed prefix of the metadata log;
one broker's answers never go back within a process life; a write acknowledged through a broker is
in that broker's later answers. Each rule fires on a history that breaks it and stays quiet on its
near miss (concurrent reads, a restart between, a slow acknowledgement, another broker)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from kraftlab.checker.broker_reads import INVARIANTS, check_broker_reads
from kraftlab.checker.history import Event, History
from kraftlab.checker.journal import journals_from
from kraftlab.node.metadata.records import (
    AccessControlEntryRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode,
)

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
LOG: list[MetadataRecord] = [
    FeatureLevelRecord(name="metadata.version", feature_level=7),  # 0
    TopicRecord(name="t0", topic_id=A),  # 1
    PartitionRecord(partition_id=0, topic_id=A, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0,
                    partition_epoch=0),  # 2
    RemoveTopicRecord(topic_id=A),  # 3
    TopicRecord(name="t0", topic_id=B),  # 4
    PartitionRecord(partition_id=0, topic_id=B, replicas=(2, 3), isr=(2,), leader=2, leader_epoch=3,
                    partition_epoch=1),  # 5
    PartitionRecord(partition_id=1, topic_id=B, replicas=(3, 1), isr=(3, 1), leader=3, leader_epoch=0,
                    partition_epoch=0),  # 6
]


def journals(records: list[MetadataRecord] = LOG, skip: tuple[int, ...] = ()) -> Any:
    return journals_from({"ts": 1000 + o, "mono": o, "node": 1, "ev": "apply", "offset": o, "type": type(r).__name__,
                          "value": base64.b64encode(encode(r)).decode()}
                         for o, r in enumerate(records) if o not in skip)


class Ops:
    """A history built op by op: each op is (process, workload, f, value, output, start ms, end ms)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, Event]] = []

    def op(self, process: int, workload: str, f: str, value: dict[str, Any], output: Any, start: int,
           end: int) -> Ops:
        node = value.get("node", "n1")
        self.events.append((start * 2, Event(0, process, "invoke", f, value, start * 1_000_000, node,
                                             extra={"workload": workload})))
        self.events.append((end * 2 + 1, Event(0, process, "ok", f, output, end * 1_000_000, node,
                                               extra={"workload": workload})))
        return self

    def describe(self, p: int, out: dict[str, Any], start: int, end: int, node: str = "n1") -> Ops:
        return self.op(p, "topics", "describe", {"topic": "t0", "node": node, "broker_read": True}, out, start, end)

    def nemesis(self, f: str, value: dict[str, Any], at: int) -> Ops:
        self.events.append((at * 2, Event(0, "nemesis", "invoke", f, value, at * 1_000_000)))
        return self

    def history(self) -> History:
        evs = [e for _, e in sorted(self.events, key=lambda x: x[0])]
        for i, e in enumerate(evs):
            e.index = i
        return History(evs)


ABSENT, ONE, TWO = {"exists": False}, {"exists": True, "partitions": 1}, {"exists": True, "partitions": 2}


def verdict(ops: Ops, js: Any = None) -> dict[str, Any]:
    return check_broker_reads(ops.history(), journals() if js is None else js)


def rules(res: dict[str, Any]) -> set[str]:
    return {a["type"] for a in res["anomalies"]}


def test_answers_that_move_forward_are_valid() -> None:
    ops = (Ops().describe(0, ABSENT, 0, 1).describe(1, ONE, 2, 3).describe(0, ABSENT, 4, 5)
           .describe(1, TWO, 6, 7)
           .op(2, "topics", "list", {"node": "n1", "broker_read": True}, {"topics": ["t0"]}, 8, 9)
           .op(3, "isr", "read", {"topic": "t0", "partition": 0, "node": "n1", "broker_read": True},
               {"exists": True, "leader": 2, "leader_epoch": 3, "isr": [2], "replicas": [2, 3]}, 10, 11))
    res = verdict(ops)
    assert res["valid"] is True, res
    assert res["checked"] == INVARIANTS and res["stats"]["reads"] == 6


def test_a_state_no_prefix_had_is_made_up() -> None:
    res = verdict(Ops().describe(0, {"exists": True, "partitions": 3}, 0, 1))
    assert rules(res) == {"BrokerReadCommitted"}
    partition = Ops().op(0, "isr", "read", {"topic": "t0", "partition": 0, "node": "n1", "broker_read": True},
                         {"exists": True, "leader": 2, "leader_epoch": 0, "isr": [2], "replicas": [2, 3]}, 0, 1)
    assert rules(verdict(partition)) == {"BrokerReadCommitted"}  # the epoch the leader change never had


def test_an_image_that_goes_back_is_caught_and_a_restart_or_overlap_excuses_it() -> None:
    back = Ops().describe(0, TWO, 0, 1).describe(1, ONE, 2, 3)
    res = verdict(back)
    assert rules(res) == {"MonotonicBrokerReads"}
    assert "went back" in res["anomalies"][0]["explanation"]
    assert verdict(Ops().describe(0, TWO, 0, 1).nemesis("kill", {"nodes": ["n1"]}, 2).describe(1, ONE, 3, 4))["valid"]
    assert verdict(Ops().describe(0, TWO, 0, 1).nemesis("start-partition", {"nodes": ["n1"]}, 2)
                   .describe(1, ONE, 3, 4))["valid"] is False  # a partition restarts nothing
    assert verdict(Ops().describe(0, TWO, 0, 3).describe(1, ONE, 2, 4))["valid"] is True  # concurrent
    assert verdict(Ops().describe(0, TWO, 0, 1).describe(1, ONE, 2, 3, node="n2"))["valid"] is True


def test_a_write_acknowledged_before_the_broker_shows_it() -> None:
    create = {"topic": "t0", "partitions": 1, "replication_factor": 1}
    second = {"topic": "t0", "topic_id": str(B)}  # the second t0, created at offset 4
    ryw = (Ops().describe(0, ABSENT, 0, 1).op(1, "topics", "create", create, second, 2, 12)
           .describe(1, ABSENT, 13, 14))
    res = verdict(ryw)
    assert rules(res) == {"ReadYourWrites"}
    assert "does not see its own write" in res["anomalies"][0]["explanation"]
    # the broker still showing the first t0 (offsets 1-2) has not shown this write either
    first_t0 = ({"topic": "t0", "partition": 0, "node": "n1", "broker_read": True},
                {"exists": True, "leader": 1, "leader_epoch": 0, "isr": [1, 2], "replicas": [1, 2]})
    assert rules(verdict(Ops().op(1, "topics", "create", create, second, 2, 12)
                         .op(2, "isr", "read", *first_t0, 15, 16))) == {"ReadYourWrites"}
    delete = ("topics", "delete", {"topic": "t0"}, {"topic": "t0", "topic_id": str(A)})
    seen_then_deleted = Ops().op(2, "isr", "read", *first_t0, 0, 1).op(1, *delete, 2, 12)
    assert rules(verdict(seen_then_deleted.op(2, "isr", "read", *first_t0, 15, 16))) == {"ReadYourWrites"}
    # a broker that had not seen the topic yet may acknowledge its deletion, and see it afterwards
    assert verdict(Ops().op(1, *delete, 2, 12).op(2, "isr", "read", *first_t0, 15, 16))["valid"] is True
    for near_miss in (
        Ops().describe(0, ABSENT, 0, 1).op(1, "topics", "create", create, second, 2, 900)  # the wait may have run out
        .describe(1, ABSENT, 901, 902),
        Ops().op(1, "topics", "create", {**create, "via": "controller"}, second, 2, 12)  # no broker promised it
        .describe(1, ABSENT, 13, 14),
        Ops().op(1, "topics", "create", create, second, 2, 12).describe(1, ABSENT, 13, 14, node="n2"),
        Ops().op(1, "topics", "create", create, second, 2, 12).describe(1, TWO, 13, 14),
    ):
        assert verdict(near_miss)["valid"] is True


def test_past_the_replay_s_stop_anything_goes() -> None:
    # offset 3 was applied by no node and is no control batch: the replay stops there
    res = verdict(Ops().describe(0, ONE, 0, 1).describe(1, {"exists": True, "partitions": 7}, 2, 3),
                  journals(skip=(3,)))
    assert res["valid"] is True and res["stats"]["replayed_to"] == 3
    assert rules(verdict(Ops().describe(1, {"exists": True, "partitions": 7}, 2, 3))) == {"BrokerReadCommitted"}


def test_no_reads_means_nothing_judged() -> None:
    res = check_broker_reads(History([]), journals())
    assert res["valid"] is True and set(res["not_checked"]) == set(INVARIANTS)


def test_acl_and_registry_reads_against_the_committed_bindings_and_fencing() -> None:
    log: list[MetadataRecord] = [
        FeatureLevelRecord(name="metadata.version", feature_level=7),  # 0
        AccessControlEntryRecord(id=uuid.UUID(int=7), resource_type=2, resource_name="acl-0", pattern_type=3,
                                 principal="User:a", host="*", operation=3, permission_type=2),  # 1
        RemoveAccessControlEntryRecord(id=uuid.UUID(int=7)),  # 2
        RegisterBrokerRecord(broker_id=1000, incarnation_id=uuid.UUID(int=9), broker_epoch=3),  # 3
        UnfenceBrokerRecord(id=1000, epoch=3),  # 4
        FenceBrokerRecord(id=1000, epoch=3),  # 5
    ]
    js = journals(log)
    pattern = {"resource_type": "TOPIC", "resource_name": "acl-0", "pattern_type": "LITERAL"}
    binding = {**pattern, "principal": "User:a", "host": "*", "operation": "READ", "permission": "DENY"}

    def acl(f: str, shown: list[dict[str, Any]], start: int, value: dict[str, Any] | None = None) -> Ops:
        return Ops().op(0, "acl", f, {**(value or {}), "node": "n1", "broker_read": True}, {"acls": shown},
                        start, start + 1)

    assert verdict(acl("describe", [binding], 0, pattern), js)["valid"] is True
    wrong = {**binding, "operation": "WRITE"}  # a code the record never stored
    assert rules(verdict(acl("list", [wrong], 0), js)) == {"BrokerReadCommitted"}
    back = acl("list", [], 0)  # nothing listed: before offset 1 or from 2 on
    back.op(1, "acl", "describe", {**pattern, "node": "n1", "broker_read": True}, {"acls": []}, 2, 3)
    back.op(2, "registry", "read", {"node": "n1", "broker_read": True, "api": "Metadata"}, {"unfenced": [1000]}, 4, 5)
    assert verdict(back, js)["valid"] is True
    back.op(1, "acl", "list", {"node": "n1", "broker_read": True}, {"acls": [binding]}, 6, 7)
    assert rules(verdict(back, js)) == {"MonotonicBrokerReads"}  # past offset 4, the binding was gone
    fenced_shown = Ops().op(2, "registry", "read", {"node": "n1", "broker_read": True}, {"unfenced": [1000, 1001]},
                            0, 1)
    assert rules(verdict(fenced_shown, js)) == {"BrokerReadCommitted"}  # 1001 never registered


def test_a_write_read_back_at_once_must_show_itself() -> None:
    create = {"topic": "t0", "partitions": 1, "replication_factor": 1, "read_back": True}

    def made(back: dict[str, Any] | None, acked_ms: float = 20.0) -> Ops:
        out = {"topic": "t0", "topic_id": str(B), "acked_ms": acked_ms, "read_back": back}
        return Ops().op(1, "topics", "create", create, out, 2, 40)

    res = verdict(made({"exists": False}))
    assert rules(res) == {"ReadYourWrites"} and "asked for the topic at once" in res["anomalies"][0]["explanation"]
    assert rules(verdict(made({"exists": True, "topic_id": str(A), "partitions": 1}))) == {"ReadYourWrites"}
    assert verdict(made({"exists": True, "topic_id": str(B), "partitions": 2}))["valid"] is True
    assert verdict(made({"exists": False}, acked_ms=1500.0))["valid"] is True  # the wait may have run out
    assert verdict(made(None))["valid"] is True  # the broker did not answer the read-back
    assert rules(verdict(made({"exists": True, "topic_id": str(B), "partitions": 5}))) == {"BrokerReadCommitted"}


def test_a_write_during_which_its_brokers_clock_was_stepped_is_not_held_to_its_wait() -> None:
    """The broker's visibility wait runs on its own clock: a clock stepped forward (a bump, the reset
    that ends a bump or a rate change, a strobe under way) ends it at once, and the broker rightly
    relays the answer before its image shows the write. Such a write is not judged; the same write on
    another broker, or with the step outside it, still is."""
    create = {"topic": "t0", "partitions": 1, "replication_factor": 1, "read_back": True}
    out = {"topic": "t0", "topic_id": str(B), "acked_ms": 20.0, "read_back": {"exists": False}}

    def made(f: str, nodes: list[str], at: int, reset_at: int | None = None) -> Ops:
        ops = Ops().op(1, "topics", "create", create, out, 20, 60)
        ops.events.append((at * 2, Event(0, "nemesis", "invoke", f, {}, at * 1_000_000)))
        ops.events.append((at * 2 + 1, Event(0, "nemesis", "ok", f, {"nodes": nodes}, (at + 1) * 1_000_000)))
        if reset_at is not None:
            ops.events.append((reset_at * 2, Event(0, "nemesis", "invoke", "clock-reset", {}, reset_at * 1_000_000)))
            ops.events.append((reset_at * 2 + 1, Event(0, "nemesis", "ok", "clock-reset", {"nodes": nodes},
                                                       (reset_at + 1) * 1_000_000)))
        return ops

    assert verdict(made("clock-bump", ["n1"], 30))["valid"] is True  # stepped during the write
    assert verdict(made("clock-reset", ["n1"], 50))["valid"] is True
    assert verdict(made("clock-strobe", ["n1"], 5, reset_at=100))["valid"] is True  # strobing throughout
    assert verdict(made("clock-strobe", ["n1"], 5))["valid"] is True  # never reset: strobing to the end
    assert rules(verdict(made("clock-bump", ["n2"], 30))) == {"ReadYourWrites"}  # another broker's clock
    assert rules(verdict(made("clock-bump", ["n1"], 5))) == {"ReadYourWrites"}  # stepped before it began
    assert rules(verdict(made("clock-strobe", ["n1"], 5, reset_at=10))) == {"ReadYourWrites"}  # over by then
    assert rules(verdict(made("clock-rate", ["n1"], 30))) == {"ReadYourWrites"}  # a rate is no step
