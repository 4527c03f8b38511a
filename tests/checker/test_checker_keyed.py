"""Keyed checking of the project's models: the registry per broker id (plus the broker-epoch
order across brokers), the topic set per topic (a `list` projected per topic), isr per
partition. A keyed check gives the same verdict as the unkeyed one on hand-built histories,
valid and invalid; on simulated registry histories it never reports a violation the unkeyed
check does not (no false alarm), is valid on every correct one, and finds injected bugs (it may
miss a rare one that only a whole-history interleaving shows: see checker.epoch_order)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlab.checker.history import History, pair_ops
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.keyed import check_across_keys, check_key, merge_keys, op_to_dict
from kraftlab.checker.linear.race import ACROSS_KEYS, split
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.testing.registry_sim import BUGS, RegistrySim, history


def verdicts(h: History, model: str) -> tuple[Any, Any, dict[str, Any]]:
    """(keyed verdict, unkeyed verdict, the keyed result)."""
    keyed = check_linearizable(h, build_model(model), Budget(seconds=30), explain_seconds=2)
    whole = check_linearizable(h, build_model(f"{model}-whole"), Budget(seconds=30), explain_seconds=0)
    return keyed["valid"], whole["valid"], keyed


def reg(p: int, b: int, inc: str, epoch: int) -> list[tuple[Any, ...]]:
    return [(p, "invoke", "register", {"broker": b, "incarnation": inc}), (p, "ok", "register", {"epoch": epoch})]


def hb(p: int, b: int, epoch: int, ok: bool = True) -> list[tuple[Any, ...]]:
    v = {"broker": b, "epoch": epoch}
    return [(p, "invoke", "heartbeat", v), (p, "ok", "heartbeat", v) if ok else (p, "fail", "heartbeat", v,
                                                                                  "STALE_BROKER_EPOCH")]


REGISTRY_CASES: dict[str, tuple[list[tuple[Any, ...]], bool]] = {
    "two brokers, re-registration, unregister": ([
        *reg(0, 4, "a", 10), *reg(1, 5, "b", 12), *hb(0, 4, 10), *hb(1, 4, 3, ok=False),
        (0, "invoke", "unregister", {"broker": 4}), (0, "ok", "unregister", {}),
        *reg(0, 4, "c", 20), *hb(1, 4, 10, ok=False), *hb(1, 5, 12),
        (2, "invoke", "read", None), (2, "ok", "read", {"brokers": {"4": 20, "5": 12}}),
    ], True),
    "concurrent registrations may get epochs in either order": ([
        (0, "invoke", "register", {"broker": 4, "incarnation": "a"}),
        (1, "invoke", "register", {"broker": 5, "incarnation": "b"}),
        (0, "ok", "register", {"epoch": 10}), (1, "ok", "register", {"epoch": 5}),
    ], True),
    "crashed registration fixed by a later heartbeat": ([
        *reg(1, 5, "b", 12), (0, "invoke", "register", {"broker": 4, "incarnation": "a"}),
        (0, "info", "register", None), *hb(2, 4, 15), *reg(1, 6, "d", 30),
    ], True),
    "a retry after a lost answer gets the epoch the lost attempt took": ([
        (0, "invoke", "register", {"broker": 4, "incarnation": "a"}), (1, "invoke", "register",
                                                                         {"broker": 5, "incarnation": "b"}),
        (0, "info", "register", None), (1, "ok", "register", {"epoch": 12}),
        *reg(2, 4, "a", 10), *reg(2, 4, "a", 10), *hb(1, 4, 10),
    ], True),
    "a retry of a live incarnation answered with a new epoch (KAFKA-16952)": ([
        *reg(0, 4, "a", 10), *reg(1, 5, "b", 12), *reg(0, 4, "a", 14),
    ], False),
    "heartbeat accepted with an epoch the broker does not have": ([*reg(0, 4, "a", 10), *hb(1, 4, 9)], False),
    "lost registration (stale epoch refused for the current epoch)": ([*reg(0, 4, "a", 10), *hb(1, 4, 10, ok=False)],
                                                                       False),
    "epoch goes back across brokers": ([*reg(0, 4, "a", 20), *reg(1, 5, "b", 10)], False),
    "epoch goes back, seen only through a heartbeat that completed first": ([
        (0, "invoke", "register", {"broker": 4, "incarnation": "a"}), *hb(1, 4, 10),
        (2, "invoke", "register", {"broker": 5, "incarnation": "b"}), (0, "ok", "register", {"epoch": 10}),
        (2, "ok", "register", {"epoch": 5}),
    ], False),
    "epoch goes back, bounded below by a heartbeat at the broker's older epoch": ([
        *reg(3, 4, "a", 3), (0, "invoke", "register", {"broker": 4, "incarnation": "a2"}),
        (1, "invoke", "register", {"broker": 5, "incarnation": "b"}), (1, "ok", "register", {"epoch": 12}),
        *hb(2, 4, 3), (0, "ok", "register", {"epoch": 10}),
    ], False),
    "crashed registration's epoch lower than one issued before it": ([
        *reg(1, 5, "b", 20), (0, "invoke", "register", {"broker": 4, "incarnation": "a"}),
        (0, "info", "register", None), *hb(2, 4, 15),
    ], False),
    "one epoch given to two brokers": ([
        (0, "invoke", "register", {"broker": 4, "incarnation": "a"}),
        (1, "invoke", "register", {"broker": 5, "incarnation": "b"}),
        (0, "ok", "register", {"epoch": 10}), (1, "ok", "register", {"epoch": 10}),
    ], False),
    "read misses a broker whose registration completed": ([
        *reg(0, 4, "a", 10), *reg(1, 5, "b", 12), (2, "invoke", "read", None),
        (2, "ok", "read", {"brokers": {"5": 12}}),
    ], False),
    "read shows a broker after its unregistration completed": ([
        *reg(0, 4, "a", 10), (0, "invoke", "unregister", {"broker": 4}), (0, "ok", "unregister", {}),
        (2, "invoke", "read", None), (2, "ok", "read", {"brokers": {"4": 10}}),
    ], False),
}


def _fill(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """ok register completions carry the broker too, as the workload writes them."""
    out = []
    open_: dict[Any, dict[str, Any]] = {}
    for r in rows:
        if r[1] == "invoke":
            open_[r[0]] = r[3]
        elif r[2] == "register" and r[1] == "ok":
            r = (r[0], r[1], r[2], {"broker": open_[r[0]]["broker"], **r[3]})
        out.append(r)
    return out


@pytest.mark.parametrize("name", list(REGISTRY_CASES))
def test_registry_keyed_agrees_with_whole(name: str) -> None:
    rows, expected = REGISTRY_CASES[name]
    h = history(_fill(rows))
    keyed, whole, res = verdicts(h, "registry")
    assert (keyed, whole) == (expected, expected), res["explanation"]
    brokers = {r[3]["broker"] for r in rows if isinstance(r[3], dict) and "broker" in r[3]}
    assert res["stats"]["partitions"] == len(brokers)  # it really was split by broker


def test_cross_key_violation_names_the_two_ops() -> None:
    rows, _ = REGISTRY_CASES["epoch goes back, seen only through a heartbeat that completed first"]
    res = check_linearizable(history(_fill(rows)), build_model("registry"), Budget(seconds=10))
    assert res["valid"] is False
    a = res["anomalies"][0]
    assert a["key"] == ACROSS_KEYS and "metadata-log offsets" in a["explanation"]
    labels = sorted(o["label"] for o in a["ops"])  # in Kafka's words, with the epochs that matter
    assert labels == ["p1 BrokerHeartbeat broker 4 at broker epoch 10",
                      "p2 BrokerRegistration broker 5 incarnation b ⇒ broker epoch 5"], labels
    # Elle's form: the two ops named, why each bound holds, and the contradiction
    assert "was issued after A = p2 BrokerRegistration broker 5 incarnation b ⇒ broker epoch 5 was invoked" \
        in a["explanation"], a["explanation"]
    assert ("Yet B = p1 BrokerHeartbeat broker 4 at broker epoch 10 had completed before that (history line 3), "
            "having seen broker 4 at broker epoch 10, issued no earlier than epoch 5.") in a["explanation"]
    assert a["explanation"].endswith("A contradiction: B completed before A began, yet saw what was issued only "
                                     "after A began.")


def test_registry_reads_are_projected_per_broker() -> None:
    rows, _ = REGISTRY_CASES["two brokers, re-registration, unregister"]
    groups = split(pair_ops(history(_fill(rows))), build_model("registry"))
    assert set(groups) == {4, 5}
    reads = [o for o in groups[4] if o.f == "read"]
    assert [r.output for r in reads] == [{"brokers": {"4": 20}}]


TOPIC_CASES: dict[str, tuple[list[tuple[Any, ...]], bool]] = {
    "create, delete, list": ([
        (0, "invoke", "create", {"topic": "t1"}), (0, "ok", "create", {}),
        (1, "invoke", "create", {"topic": "t2"}), (1, "ok", "create", {}),
        (0, "invoke", "delete", {"topic": "t1"}), (0, "ok", "delete", {}),
        (2, "invoke", "list", None), (2, "ok", "list", {"topics": ["t2"]}),
        (1, "invoke", "create", {"topic": "t2"}), (1, "fail", "create", {}, "TOPIC_ALREADY_EXISTS"),
    ], True),
    "list concurrent with a create may show it or not": ([
        (0, "invoke", "create", {"topic": "t1"}), (2, "invoke", "list", None),
        (2, "ok", "list", {"topics": ["t1"]}), (0, "ok", "create", {}),
        (3, "invoke", "list", None), (3, "ok", "list", {"topics": ["t1"]}),
    ], True),
    "list misses a created topic": ([
        (0, "invoke", "create", {"topic": "t1"}), (0, "ok", "create", {}),
        (2, "invoke", "list", None), (2, "ok", "list", {"topics": []}),
    ], False),
    "list shows a deleted topic": ([
        (0, "invoke", "create", {"topic": "t1"}), (0, "ok", "create", {}),
        (0, "invoke", "delete", {"topic": "t1"}), (0, "ok", "delete", {}),
        (2, "invoke", "list", None), (2, "ok", "list", {"topics": ["t1"]}),
    ], False),
    "create acknowledged twice": ([
        (0, "invoke", "create", {"topic": "t1"}), (0, "ok", "create", {}),
        (1, "invoke", "create", {"topic": "t1"}), (1, "ok", "create", {}),
    ], False),
}


@pytest.mark.parametrize("name", list(TOPIC_CASES))
def test_topics_keyed_agrees_with_whole(name: str) -> None:
    rows, expected = TOPIC_CASES[name]
    keyed, whole, res = verdicts(history(rows), "topics")
    assert (keyed, whole) == (expected, expected), res["explanation"]


def test_isr_is_keyed_per_partition() -> None:
    rows = [(p, "invoke", "read", {"topic": "t", "partition": p}) for p in (0, 1)]
    groups = split(pair_ops(history(rows)), build_model("isr"))
    assert set(groups) == {("t", 0), ("t", 1)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), bug=st.sampled_from([None, *BUGS]))
def test_simulated_registry_keyed_agrees_with_whole(seed: int, bug: str | None) -> None:
    h = RegistrySim(seed, bug).run()
    keyed, whole, res = verdicts(h, "registry")
    if bug is None:
        assert (keyed, whole) == (True, True), res["explanation"]
    if keyed is False:
        assert whole is False, ("a false alarm", bug, res["explanation"])


def test_injected_registry_bugs_are_found() -> None:
    for bug in BUGS:
        found = sum(verdicts(RegistrySim(seed, bug, ops=40).run(), "registry")[0] is False for seed in range(30))
        assert found >= 3, f"{bug} found in only {found} of 30 simulated histories"


def test_across_keys_for_remote_callers() -> None:
    rows, _ = REGISTRY_CASES["epoch goes back across brokers"]
    ops = [op_to_dict(o) for o in pair_ops(history(_fill(rows)))]
    model = {"name": "registry"}
    per_key = [check_key(b, [o for o in ops if o["value"]["broker"] == b], model) for b in (4, 5)]
    assert all(r["valid"] is True for r in per_key)  # each broker alone is fine
    across = check_across_keys(ops, model)
    assert across is not None and across["valid"] is False
    merged = merge_keys([*per_key, across])
    assert merged["valid"] is False and merged["failing_keys"] == [ACROSS_KEYS]
    assert check_across_keys(ops, {"name": "cas-register"}) is None


def test_across_keys_unknown_on_a_registration_without_a_value() -> None:
    """A malformed op (an ok register whose invocation carries no value) makes the cross-key check
    unknown, naming the missing field, never valid and never a crash."""
    ops = [{"id": 0, "process": 0, "f": "register", "value": None, "output": {"epoch": 3}, "status": "ok",
            "call": 0, "ret": 1}]
    across = check_across_keys(ops, {"name": "registry"})
    assert across is not None and across["valid"] == "unknown"
    assert across["reason"] == "KeyError: 'broker'", across["reason"]
