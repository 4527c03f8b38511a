"""Explanations a user can read alone: per model, how its ops and states read (Kafka's words for
the project's models) and why a failing op cannot follow each state the search got stuck in."""

from __future__ import annotations

from typing import Any

from kraftlab.checker.graph import find_anomalies
from kraftlab.checker.history import Event, History, Op, pair_ops
from kraftlab.checker.linear.explain import explain
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model, op_label


def _ops(rows: list[tuple[Any, ...]]) -> list[Op]:
    """rows of (process, type, f, value[, error])."""
    events = [Event(i, r[0], r[1], r[2], r[3], time=i * 1000, error=r[4] if len(r) > 4 else None, line=i + 1)
              for i, r in enumerate(rows)]
    return pair_ops(History(events))


# --- isr: AlterPartition --------------------------------------------------------------------------

PART = {"topic": "t3", "partition": 0, "leader": 2000, "broker_epoch": 29}


def _alter(p: int, pe: int, isr: list[int], got_pe: int, le: int = 1) -> list[tuple[Any, ...]]:
    return [(p, "invoke", "alter", {**PART, "leader_epoch": le, "partition_epoch": pe, "isr": isr}),
            (p, "ok", "alter", {"leader_epoch": le, "partition_epoch": got_pe, "isr": isr})]


def test_isr_labels_keep_the_partition_epoch() -> None:
    model = build_model("isr")
    alter, = _ops(_alter(3, 5, [2000], 6))
    # nothing is cut off: the epochs the model judges are all there
    assert op_label(model, alter) == ("p3 AlterPartition t3-0 by broker 2000 (broker epoch 29) at partition epoch 5, "
                                      "leader epoch 1: ISR → [2000] ⇒ partition epoch 6, leader epoch 1, ISR [2000]")
    read, = _ops([(1, "invoke", "read", {"topic": "t3", "partition": 0}),
                  (1, "ok", "read", {"leader": 2000, "leader_epoch": 1, "partition_epoch": 6, "isr": [2000]})])
    assert op_label(model, read) == "p1 read t3-0 ⇒ partition epoch 6, leader 2000 at leader epoch 1, ISR [2000]"
    assert model.describe_state((6, 1, 2000, (2000,))) == "partition epoch 6, leader 2000 at leader epoch 1, ISR [2000]"
    assert model.describe_state(None) == "not yet seen"


def test_isr_stale_alter_names_the_rule_and_the_states_before_and_after() -> None:
    model = build_model("isr")
    ops = _ops(_alter(2, 5, [2000, 2001], 6) + _alter(3, 5, [2000], 7))
    e = explain(ops, model)
    assert e.op is not None and e.op.process == 3
    c, = e.candidates
    assert c.state == "partition epoch 6, leader 2000 at leader epoch 1, ISR [2000, 2001]" and c.linearized == 1
    assert c.blocked is e.op and not c.fits
    assert c.reason == ("AlterPartition was accepted at partition epoch 5 while the partition was at partition "
                        "epoch 6, leader 2000 at leader epoch 1, ISR [2000, 2001] — Kafka answers "
                        "INVALID_UPDATE_VERSION; it was answered partition epoch 7, leader 2000 at leader epoch 1, "
                        "ISR [2000]")
    text = e.text(model, ("t3", 0))
    assert "Last consistent prefix (1 op linearized, from [not yet seen]): p2 AlterPartition" in text
    assert "leaving [partition epoch 6, leader 2000 at leader epoch 1, ISR [2000, 2001]]" in text


def test_isr_fenced_leader_epoch_and_epochs_going_back() -> None:
    model = build_model("isr")
    state = (6, 2, 2000, (2000,))
    old_leader, = _ops(_alter(4, 6, [2000], 7, le=1))
    assert "at leader epoch 1 while" in model.why_not(state, old_leader) and "FENCED_LEADER_EPOCH" in \
        model.why_not(state, old_leader)
    back, = _ops([(1, "invoke", "read", {"topic": "t3", "partition": 0}),
                  (1, "ok", "read", {"leader": 2000, "leader_epoch": 2, "partition_epoch": 4, "isr": [2000]})])
    assert model.why_not(state, back).endswith(": the partition epoch never goes back")
    other, = _ops([(1, "invoke", "read", {"topic": "t3", "partition": 0}),
                   (1, "ok", "read", {"leader": 2000, "leader_epoch": 2, "partition_epoch": 6, "isr": [2000, 9]})])
    assert model.why_not(state, other).endswith(": one partition epoch names one state")


# --- registry: registrations and heartbeats ---------------------------------------------------------


def test_registry_labels_and_states_in_kafkas_words() -> None:
    model = build_model("registry")
    reg, hb, unreg = _ops([
        (1, "invoke", "register", {"broker": 4, "incarnation": "0f1e2d3c4b5a"}),
        (1, "ok", "register", {"broker": 4, "epoch": 12}),
        (1, "invoke", "heartbeat", {"broker": 4, "epoch": 12, "offset": 40, "want_fence": False}),
        (1, "fail", "heartbeat", None, "STALE_BROKER_EPOCH"),
        (1, "invoke", "unregister", {"broker": 4}), (1, "info", "unregister", None)])
    assert op_label(model, reg) == "p1 BrokerRegistration broker 4 incarnation 0f1e2d3c ⇒ broker epoch 12"
    assert op_label(model, hb) == "p1 BrokerHeartbeat broker 4 at broker epoch 12, metadata offset 40 " \
                                  "[fail STALE_BROKER_EPOCH]"
    assert op_label(model, unreg) == "p1 UnregisterBroker broker 4 [info]"
    state = (12, ((4, 12, "0f1e2d3c4b5a"),))
    assert model.describe_state(state) == ("broker 4 at broker epoch 12 (incarnation 0f1e2d3c) — broker epochs: the "
                                           "highest issued 12")
    assert model.describe_state(model.init()) == "no broker registered — broker epochs: none issued yet"


def test_registry_stale_heartbeat_is_explained() -> None:
    model = build_model("registry")
    ops = _ops([(1, "invoke", "register", {"broker": 4, "incarnation": "a"}), (1, "ok", "register", {"epoch": 12}),
                (1, "invoke", "register", {"broker": 4, "incarnation": "b"}), (1, "ok", "register", {"epoch": 20}),
                (2, "invoke", "heartbeat", {"broker": 4, "epoch": 12}), (2, "ok", "heartbeat", None)])
    e = explain(ops, model)
    c, = e.candidates
    assert c.state.startswith("broker 4 at broker epoch 20 (incarnation b)")
    assert c.reason == ("a heartbeat at broker epoch 12 was accepted while broker 4 was at broker epoch 20: Kafka "
                        "answers STALE_BROKER_EPOCH")


# --- topics ----------------------------------------------------------------------------------------


def test_topics_labels_states_and_a_double_create() -> None:
    model = build_model("topics")
    ops = _ops([(1, "invoke", "create", {"topic": "t1"}), (1, "ok", "create", None),
                (2, "invoke", "create", {"topic": "t1", "via": "controller"}), (2, "ok", "create", None)])
    assert op_label(model, ops[1]) == "p2 CreateTopics t1 (to the controller)"
    e = explain(ops, model)
    c, = e.candidates
    assert c.state == "topics: t1"
    assert c.reason == "CreateTopics t1 succeeded while t1 already existed: Kafka answers TOPIC_ALREADY_EXISTS"
    assert model.describe_state(frozenset()) == "no topics"
    listing, = _ops([(0, "invoke", "list", {"node": "n2", "final": True}), (0, "ok", "list", {"topics": ["b", "a"]})])
    assert op_label(model, listing) == "p0 list every topic on n2 (final) ⇒ ['a', 'b']"


# --- generic models: the generic label, the generic reason ------------------------------------------


def test_a_register_without_words_still_says_which_state_rejects_what() -> None:
    model = build_model("register")
    ops = _ops([(0, "invoke", "write", 1), (0, "ok", "write", 1), (0, "invoke", "write", 2), (0, "ok", "write", 2),
                (1, "invoke", "read", None), (1, "ok", "read", 1)])
    e = explain(ops, model)
    assert op_label(model, ops[2]) == "p1 read() -> 1"
    c, = e.candidates
    assert c.state == "2" and c.blocked is ops[2]
    assert c.reason == "its observed result is impossible in this state"
    assert "in state [2] (after 2 ops), p1 read() -> 1 cannot come next" in e.text(model)


def test_several_stuck_states_are_listed_once_each() -> None:
    # two concurrent writes, then a read of a value neither wrote: both orders get stuck, in two states
    model = build_model("register")
    ops = _ops([(0, "invoke", "write", 1), (1, "invoke", "write", 2), (0, "ok", "write", 1), (1, "ok", "write", 2),
                (2, "invoke", "read", None), (2, "ok", "read", 3)])
    e = explain(ops, model)
    assert sorted(c.state for c in e.candidates) == ["1", "2"]


def test_results_carry_the_candidates_and_the_initial_state() -> None:
    model = build_model("isr")
    res = check_linearizable(_ops(_alter(2, 5, [2000, 2001], 6) + _alter(3, 5, [2000], 7)), model)
    a = res["anomalies"][0]
    assert a["initial_state"] == "not yet seen"
    assert a["candidates"][0]["blocked"].startswith("p3 AlterPartition t3-0")
    assert "INVALID_UPDATE_VERSION" in a["candidates"][0]["reason"]
    assert a["op"]["label"].startswith("p3 AlterPartition t3-0 by broker 2000 (broker epoch 29) at partition epoch 5")


def test_isr_cycles_speak_of_partition_epochs() -> None:
    # a read of partition epoch 6 after the alter to 7 completed: a stale read, in Elle's form
    rows = [*_alter(2, 5, [2000, 2001], 6), *_alter(3, 6, [2000], 7),
            (1, "invoke", "read", {"topic": "t3", "partition": 0}),
            (1, "ok", "read", {"leader": 2000, "leader_epoch": 1, "partition_epoch": 6, "isr": [2000, 2001]}),
            (4, "invoke", "read", {"topic": "t3", "partition": 0}),
            (4, "ok", "read", {"leader": 2000, "leader_epoch": 1, "partition_epoch": 7, "isr": [2000]})]
    found = find_anomalies(_ops(rows), "isr", key=("t3", 0))
    assert found and found[0]["type"] == "stale-read"
    text = found[0]["explanation"]
    assert text.startswith("Let: A = ") and text.endswith(": a contradiction!")
    assert "read the state at partition epoch 6, which" in text
    assert "replaced with the state at partition epoch 7" in text
    assert "AlterPartition t3-0 by broker 2000" in text


def test_a_whole_map_model_describes_every_state_by_key() -> None:
    # kv-whole numbers keys as it prepares ops: the states shown are named by key, as the search saw them
    model = build_model("kv-whole")
    ops = _ops([(0, "invoke", "put", {"key": "a", "value": "1"}), (0, "ok", "put", {"key": "a", "value": "1"}),
                (1, "invoke", "put", {"key": "b", "value": "2"}), (1, "ok", "put", {"key": "b", "value": "2"}),
                (2, "invoke", "get", {"key": "b"}), (2, "ok", "get", {"key": "b", "value": "3"})])
    e = explain(ops, model)
    assert e.initial == "a='', b=''" and [c.state for c in e.candidates] == ["a='1', b='2'"]


def test_an_info_op_is_drawn_open_ended_with_when_the_client_gave_up() -> None:
    ops = _ops([(1, "invoke", "create", {"topic": "t1"}), (1, "ok", "create", None),
                (2, "invoke", "create", {"topic": "t1"}), (2, "info", "create", None, "timeout"),
                (3, "invoke", "describe", {"topic": "t1"}), (3, "ok", "describe", {"topic": "t1", "exists": False})])
    res = check_linearizable(ops, build_model("topics"))
    tl = {o["process"]: o for o in res["anomalies"][0]["timeline"]}
    assert tl[2]["end"] is None and tl[2]["gave_up"] == 3000 and tl[2]["status"] == "info"
    assert tl[3]["failing"] and tl[3]["end"] == 5000
