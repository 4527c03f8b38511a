"""Per-key checking with serialisable inputs and outputs, for callers on other machines
(Spark executors): `check_key` checks one key's sub-history under a budget and returns a
plain dict; `merge_keys` folds such dicts into one verdict (false > unknown > true). A model
with a constraint across keys (the registry's broker-epoch order) also needs
`check_across_keys` over all of that model's ops, its result merged like a key's.

Ops travel as dicts with the `Op` fields (see `op_to_dict`); the model as
{"name", "initial", "nil_read_any"}; the budget as `Budget.to_json()`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from kraftlab.checker.history import Op
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.race import ACROSS_KEYS, explain_keys, merge_verdicts
from kraftlab.checker.linear.search import search
from kraftlab.checker.models import build_model

_OP_FIELDS = {f.name for f in dataclasses.fields(Op)}


def op_to_dict(op: Op) -> dict[str, Any]:
    return dataclasses.asdict(op)


def op_from_dict(d: dict[str, Any]) -> Op:
    return Op(**{k: v for k, v in d.items() if k in _OP_FIELDS})


def check_key(key: Any, ops: list[dict[str, Any]], model: dict[str, Any],
              budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check one key's ops; never raises for a bad history (that is an `unknown` with a reason)."""
    t0 = time.perf_counter()
    try:
        m = build_model(model["name"], model.get("initial"), bool(model.get("nil_read_any", False)))
        res = search([op_from_dict(d) for d in ops], m, Budget.from_json(budget))
        valid, reason, configs = res.valid, res.reason, res.configs
    except Exception as exc:  # a malformed op: unknown, with why
        valid, reason, configs = "unknown", f"{type(exc).__name__}: {exc}", 0
    return {"key": key, "valid": valid, "reason": reason or "linearizable", "ops": len(ops),
            "configurations": configs, "seconds": round(time.perf_counter() - t0, 6)}


def check_across_keys(ops: list[dict[str, Any]], model: dict[str, Any]) -> dict[str, Any] | None:
    """The model's cross-key check (None when it has none), as a `check_key` result."""
    t0 = time.perf_counter()
    m = build_model(model["name"], model.get("initial"), bool(model.get("nil_read_any", False)))
    check: Callable[[list[Op]], tuple[str, list[Op]] | None] | None = getattr(m, "cross_check", None)
    if check is None:
        return None
    valid: bool | str
    try:
        found = check([op_from_dict(d) for d in ops])
        valid, reason = (True, "linearizable") if found is None else (False, found[0])
    except Exception as exc:  # a malformed op: unknown, with why
        valid, reason = "unknown", f"{type(exc).__name__}: {exc}"
    return {"key": ACROSS_KEYS, "valid": valid, "reason": reason, "ops": 0, "configurations": 0,
            "seconds": round(time.perf_counter() - t0, 6)}


def merge_keys(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One verdict from per-key results; names the illegal (or else unknown) keys."""
    valid = merge_verdicts([r["valid"] for r in results])
    bad = [r for r in results if r["valid"] is False]
    unknown = [r for r in results if r["valid"] not in (True, False)]
    expl = explain_keys([(r["key"], r["valid"], r["reason"]) for r in results])
    return {"valid": valid, "explanation": expl, "keys": len(results),
            "failing_keys": [r["key"] for r in bad], "unknown_keys": [r["key"] for r in unknown],
            "ops": sum(r["ops"] for r in results)}
