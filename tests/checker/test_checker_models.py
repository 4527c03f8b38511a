"""Models and the search: each model accepts legal histories and rejects illegal ones; crashed
ops, budgets, racing partitions, explanations and the per-key API."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import Event, History, pair_ops
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.explain import explain
from kraftlab.checker.linear.keyed import check_key, merge_keys, op_to_dict
from kraftlab.checker.linear.race import race
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.checker.reference import DEFAULT_DIR


def hist(*rows: tuple[Any, ...]) -> History:
    """Rows of (process, type, f, value[, error])."""
    return History([Event(i, r[0], r[1], r[2], r[3], error=r[4] if len(r) > 4 else None, line=i + 1)
                    for i, r in enumerate(rows)])


def seq(*ops: tuple[Any, ...]) -> History:
    """Sequential ops: (process, f, invoke value, completion type, completion value[, error])."""
    rows: list[tuple[Any, ...]] = []
    for p, f, v, typ, out, *err in ops:
        rows.append((p, "invoke", f, v))
        rows.append((p, typ, f, out, err[0] if err else None))
    return hist(*rows)


def verdict(h: History, model: str, initial: Any = None, **kw: Any) -> Any:
    return check_linearizable(h, build_model(model, initial, **kw), Budget(seconds=20), explain_seconds=0)["valid"]


def test_register_read_your_write_and_stale() -> None:
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "read", None, "ok", 1)), "register") is True
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "read", None, "ok", None)), "register") is False
    # Knossos semantics: a nil read says nothing
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "read", None, "ok", None)), "register", nil_read_any=True)


def test_concurrent_ops_may_take_effect_in_either_order() -> None:
    h = hist((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1), (0, "ok", "write", 1),
             (2, "invoke", "read", None), (2, "ok", "read", 1))
    assert verdict(h, "register", 0) is True


def test_cas_failure_is_an_observation_only_when_it_says_mismatch() -> None:
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "cas", [1, 2], "fail", [1, 2], "compare-mismatch")),
                   "cas-register") is False
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "cas", [1, 2], "fail", [1, 2], "timeout")),
                   "cas-register") is True
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "cas", [1, 2], "ok", [1, 2]), (0, "read", None, "ok", 2)),
                   "cas-register") is True
    assert verdict(seq((0, "write", 1, "ok", 1), (1, "cas", [3, 2], "ok", [3, 2])), "cas-register") is False


def test_crashed_write_may_happen_later_or_never() -> None:
    base = [(0, "write", 1, "ok", 1), (1, "write", 2, "info", 2)]
    for seen, ok in ((1, True), (2, True), (3, False)):
        h = seq(*base, (2, "read", None, "ok", seen), (2, "read", None, "ok", 1 if seen == 1 else seen))
        assert verdict(h, "register") is ok
    # once it has been seen, the crashed write cannot be undone
    assert verdict(seq(*base, (2, "read", None, "ok", 2), (2, "read", None, "ok", 1)), "register") is False


def test_identical_crashed_ops_are_interchangeable() -> None:
    h = seq((0, "write", 5, "info", 5), (1, "write", 5, "info", 5), (2, "write", 6, "ok", 6),
            (3, "read", None, "ok", 5), (3, "read", None, "ok", 6), (3, "read", None, "ok", 5))
    assert verdict(h, "register") is False  # needs a write 6 → 5 between the reads, but none is left
    h2 = seq((0, "write", 5, "info", 5), (1, "write", 5, "info", 5), (4, "write", 6, "info", 6),
             (3, "read", None, "ok", 5), (3, "read", None, "ok", 6), (3, "read", None, "ok", 5))
    assert verdict(h2, "register") is True


def test_mutex() -> None:
    assert verdict(seq((0, "acquire", None, "ok", None), (0, "release", None, "ok", None),
                       (1, "acquire", None, "ok", None)), "mutex") is True
    assert verdict(seq((0, "acquire", None, "ok", None), (1, "acquire", None, "ok", None)), "mutex") is False


def test_multi_register() -> None:
    w = (0, "txn", [["write", "x", 1], ["write", "y", 2]], "ok", [["write", "x", 1], ["write", "y", 2]])
    good = (1, "txn", [["read", "x", None], ["read", "y", None]], "ok", [["read", "x", 1], ["read", "y", 2]])
    torn = (1, "txn", [["read", "x", None], ["read", "y", None]], "ok", [["read", "x", 1], ["read", "y", 0]])
    assert verdict(seq(w, good), "multi-register", {"x": 0, "y": 0}) is True
    assert verdict(seq(w, torn), "multi-register", {"x": 0, "y": 0}) is False


def test_kv_partitioned_and_whole_agree() -> None:
    h = seq((0, "put", {"key": "a", "value": "1"}, "ok", {"key": "a", "value": "1"}),
            (1, "append", {"key": "b", "value": "x"}, "ok", {"key": "b", "value": "x"}),
            (2, "get", {"key": "a", "value": None}, "ok", {"key": "a", "value": "1"}),
            (2, "get", {"key": "b", "value": None}, "ok", {"key": "b", "value": ""}))
    assert verdict(h, "kv") is False and verdict(h, "kv-whole") is False
    res = race(pair_ops(h), build_model("kv"), Budget(seconds=5))
    assert res.failing_key == "b" and res.partitions == 2


def test_topics() -> None:
    c = ("create", {"topic": "t"})
    assert verdict(seq((0, *c, "ok", None), (1, *c, "fail", None, "TOPIC_ALREADY_EXISTS")), "topics") is True
    assert verdict(seq((0, *c, "ok", None), (1, *c, "ok", None)), "topics") is False
    assert verdict(seq((1, *c, "fail", None, "TOPIC_ALREADY_EXISTS")), "topics") is False
    assert verdict(seq((0, *c, "ok", None), (1, "delete", {"topic": "t"}, "ok", None),
                       (2, "describe", {"topic": "t"}, "ok", {"topic": "t", "exists": False})), "topics") is True
    assert verdict(seq((0, *c, "ok", None), (2, "list", None, "ok", {"topics": []})), "topics") is False
    assert verdict(seq((0, *c, "info", None), (2, "list", None, "ok", {"topics": ["t"]}),
                       (2, "list", None, "ok", {"topics": ["t"]})), "topics") is True


def test_registry() -> None:
    r1 = (0, "register", {"broker": 1, "incarnation": "a"}, "ok", {"broker": 1, "epoch": 10})
    assert verdict(seq(r1, (0, "heartbeat", {"broker": 1, "epoch": 10}, "ok", None)), "registry") is True
    assert verdict(seq(r1, r1), "registry") is True  # the same incarnation again gets its epoch back
    again = (0, "register", {"broker": 1, "incarnation": "z"}, "ok", {"broker": 1, "epoch": 10})
    assert verdict(seq(r1, again), "registry") is False  # a new incarnation needs a new epoch
    r2 = (1, "register", {"broker": 1, "incarnation": "b"}, "ok", {"broker": 1, "epoch": 15})
    stale = (0, "heartbeat", {"broker": 1, "epoch": 10}, "ok", None)
    assert verdict(seq(r1, r2, stale), "registry") is False
    rejected = (0, "heartbeat", {"broker": 1, "epoch": 10}, "fail", None, "STALE_BROKER_EPOCH")
    assert verdict(seq(r1, r2, rejected), "registry") is True
    backwards = (1, "register", {"broker": 2, "incarnation": "c"}, "ok", {"broker": 2, "epoch": 7})
    assert verdict(seq(r1, backwards), "registry") is False
    crashed = (1, "register", {"broker": 2, "incarnation": "c"}, "info", None)
    assert verdict(seq(r1, crashed, (1, "heartbeat", {"broker": 2, "epoch": 12}, "ok", None),
                       (2, "read", None, "ok", {"brokers": {"1": 10, "2": 12}})), "registry") is True
    assert verdict(seq(r1, (2, "read", None, "ok", {"unfenced": [1]})), "registry") is True
    assert verdict(seq(r1, (2, "read", None, "ok", {"unfenced": [1, 3]})), "registry") is False
    assert verdict(seq(r1, (2, "unregister", {"broker": 1}, "ok", None),
                       (2, "read", None, "ok", {"brokers": {"1": 10}})), "registry") is False


def test_isr_compare_and_set_on_partition_epoch() -> None:
    p = {"topic": "t", "partition": 0}

    def alter(proc: int, pe: int, isr: list[int]) -> tuple[Any, ...]:
        return (proc, "alter", {**p, "leader": 1, "leader_epoch": 3, "partition_epoch": pe, "isr": isr}, "ok",
                {"leader_epoch": 3, "partition_epoch": pe + 1, "isr": isr})

    def read(pe: int, isr: list[int]) -> tuple[Any, ...]:
        return (9, "read", p, "ok", {"leader": 1, "leader_epoch": 3, "partition_epoch": pe, "isr": isr})

    assert verdict(seq(read(5, [1, 2]), alter(0, 5, [1]), read(6, [1])), "isr") is True
    assert verdict(seq(read(5, [1, 2]), alter(0, 5, [1]), alter(1, 5, [1, 3])), "isr") is False  # lost CAS
    assert verdict(seq(read(6, [1]), read(5, [1, 2])), "isr") is False  # epoch went back
    assert verdict(seq(read(5, [1, 2]), read(8, [1, 2, 3])), "isr") is True  # the controller moved it
    meta = (9, "read", p, "ok", {"exists": True, "leader": 1, "leader_epoch": 2, "isr": [1], "replicas": [1]})
    assert verdict(seq(read(5, [1, 2]), meta), "isr") is False  # a leader epoch behind
    assert verdict(seq(meta, read(5, [1, 2]), (9, "read", p, "ok", {"exists": False})), "isr") is True


KV = DEFAULT_DIR / "anishathalye__porcupine/test_data/kv"
needs_data = pytest.mark.skipif(not KV.is_dir(), reason="no external histories here")


@needs_data
def test_budget_ends_in_unknown_with_a_reason() -> None:
    ops = pair_ops(read_history(KV / "c50-ok.txt"))
    t0 = time.monotonic()
    res = race(ops, build_model("kv-whole"), Budget(seconds=0.5), workers=1)
    assert res.valid == "unknown" and "time budget" in res.reason
    assert time.monotonic() - t0 < 5
    res = race(ops, build_model("kv-whole"), Budget(seconds=30, max_configs=5000), workers=1)
    assert res.valid == "unknown" and "configuration budget" in res.reason
    res = race(ops, build_model("kv-whole"), Budget(seconds=30, max_rss_bytes=1), workers=1)
    assert res.valid == "unknown" and "memory budget" in res.reason


@needs_data
def test_first_illegal_partition_ends_the_race() -> None:
    ops = pair_ops(read_history(KV / "c50-bad.txt"))
    t0 = time.monotonic()
    res = race(ops, build_model("kv"), Budget(seconds=60), workers=1)
    assert res.valid is False and res.failing_key is not None
    assert time.monotonic() - t0 < 10  # some partitions alone take minutes


def test_explanation_names_the_op_and_the_shortest_prefix() -> None:
    h = seq((0, "write", 1, "ok", 1), (1, "read", None, "ok", 1), (0, "write", 2, "ok", 2),
            (1, "read", None, "ok", 1), (2, "read", None, "ok", 2), (1, "read", None, "ok", 7))
    ops = pair_ops(h)
    e = explain(ops, build_model("register"))
    assert e.op is not None and e.op.output == 1 and e.op.ret == 7 and e.prefix_events == 8
    assert e.partials and [op.f for op, _ in e.partials[0]] == ["write", "read", "write"]
    assert "history line 8" in e.text(build_model("register"))


def test_per_key_api_round_trip() -> None:
    h = seq((0, "write", 1, "ok", 1), (1, "read", None, "ok", 2))
    ops = [op_to_dict(o) for o in pair_ops(h)]
    bad = check_key("k1", ops, {"name": "register"})
    good = check_key("k2", ops[:1], {"name": "register"}, Budget(seconds=5).to_json())
    odd = check_key("k3", [{**ops[0], "f": "nope"}], {"name": "register"})
    assert (bad["valid"], good["valid"], odd["valid"]) == (False, True, "unknown")
    assert merge_keys([good, bad, odd])["valid"] is False
    assert merge_keys([good, odd])["valid"] == "unknown"
    assert merge_keys([good])["valid"] is True


@needs_data
def test_worker_processes_give_the_same_verdicts() -> None:
    for name, want in (("c50-ok.txt", True), ("c50-bad.txt", False)):
        ops = pair_ops(read_history(KV / name))
        res = race(ops, build_model("kv"), Budget(seconds=60), workers=2)
        assert res.valid is want, (name, res.reason)
        assert res.partitions == 10


class _DyingRegister:
    """A register model that kills the worker process it runs in (not the test process)."""

    name = "dying"

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.inner = build_model("register")

    def init(self) -> Any:
        return self.inner.init()

    def partition_key(self, op: Any) -> Any:
        return op.process

    def describe_state(self, state: Any) -> str:
        return repr(state)

    def prepare(self, op: Any) -> Any:
        import os

        if os.getpid() != self.parent:
            os._exit(9)
        return self.inner.prepare(op)


def test_a_worker_that_dies_makes_the_verdict_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import kraftlab.checker.linear.race as race_mod

    monkeypatch.setattr(race_mod, "PARALLEL_MIN_OPS", 0)
    ops = pair_ops(seq((0, "write", 1, "ok", 1), (1, "write", 2, "ok", 2)))
    t0 = time.monotonic()
    res = race(ops, _DyingRegister(os.getpid()), Budget(seconds=60), workers=2)  # type: ignore[arg-type]
    assert res.valid == "unknown" and "died" in res.reason
    assert time.monotonic() - t0 < 10
