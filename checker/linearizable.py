"""The linearizability checker: a history and a model in, a verdict with explanation out.

`check_linearizable` pairs the history's events into ops, races the per-key searches
(checker.linear.race) and, when a key is illegal, explains it (shortest failing prefix, the op
that cannot be linearized, partial linearizations) and draws it (PNG + SVG) if given a
directory. The result is the `checkers.linearizable` entry of results.json.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.explain import explain
from kraftlab.checker.linear.race import ACROSS_KEYS, race, split
from kraftlab.checker.linear.search import INVALID
from kraftlab.checker.models import Model, op_label


def op_json(op: Op, model: Model | None = None) -> dict[str, Any]:
    """An op for results.json, with its label in the words of the model that judged it."""
    return {"process": op.process, "f": op.f, "value": op.value, "output": op.output, "status": op.status,
            "error": op.error, "invoke_line": op.call_line, "complete_line": op.ret_line or None,
            "label": op_label(model, op)}


def check_linearizable(history: History | list[Op], model: Model, budget: Budget | None = None,
                       explain_seconds: float = 10.0, out_dir: str | Path | None = None,
                       workers: int | None = None) -> dict[str, Any]:
    """Check a history (or paired ops) against `model`; see the module docstring."""
    budget = budget or Budget()
    ops = history if isinstance(history, list) else pair_ops(history)
    t0 = time.perf_counter()
    rr = race(ops, model, budget, workers)
    elapsed = time.perf_counter() - t0
    out: dict[str, Any] = {
        "valid": rr.valid,
        "model": model.name,
        "explanation": rr.reason if rr.valid is not INVALID else "",
        "anomalies": [],
        "stats": {"ops": len(ops), "partitions": rr.partitions, "check_seconds": round(elapsed, 6),
                  "configurations": sum(r.configs for r in rr.results.values())},
    }
    if rr.valid is INVALID and rr.failing_key == ACROSS_KEYS:
        out["explanation"] = f"not linearizable across keys: {rr.reason}"
        out["anomalies"].append({"type": "cross-key", "key": ACROSS_KEYS, "explanation": rr.reason,
                                 "ops": [op_json(o, model) for o in rr.involved]})
    elif rr.valid is INVALID:
        key: Hashable | None = rr.failing_key
        sub = split(ops, model).get(key, ops)
        if explain_seconds > 0:
            e = explain(sub, model, explain_seconds)
            out["explanation"] = e.text(model, key)
            anomaly: dict[str, Any] = {
                "type": "nonlinearizable",
                "key": key,
                "prefix_events": e.prefix_events,
                "op": op_json(e.op, model) if e.op else None,
                "initial_state": e.initial,
                "partial_linearizations": [[[op_label(model, op), st] for op, st in part] for part in e.partials],
                "candidates": [c.to_json(model) for c in e.candidates],
                "complete": e.complete,
                "timeline": timeline(e.ops, e.partials[0] if e.partials else [], e.op, model, e.initial),
            }
            if out_dir is not None:
                from kraftlab.checker.linear.plot import draw_failure

                name = "linear-failure" if key is None else f"linear-failure-{_safe(key)}"
                title = f"{model.name}: {op_label(model, e.op) if e.op else ''}"
                paths = draw_failure(e, Path(out_dir) / name, title, lambda o: op_label(model, o))
                anomaly["pictures"] = [str(p) for p in paths]
            out["anomalies"].append(anomaly)
        else:
            out["explanation"] = rr.reason
            out["anomalies"].append({"type": "nonlinearizable", "key": key})
    return out


TIMELINE_OPS = 150
"""At most this many of the failing key's ops (the last invoked before the failure) are drawn."""


def timeline(ops: list[Op], partial: list[tuple[Op, str]], failing: Op | None, model: Model | None = None,
             initial: str = "") -> list[dict[str, Any]]:
    """The failing key's ops for the report's interactive timeline: each op's process, interval
    (ns since the test started; no end: it never completed — `gave_up` when the client stopped waiting
    for an answer, an `info` op; `call`/`ret` the same as event positions,
    for histories without times), label in the model's words, outcome,
    its place in the longest partial linearization with the model state before and after it there,
    and whether it is the op that cannot be linearized. The last TIMELINE_OPS ops invoked."""
    order: dict[int, tuple[int, str, str]] = {}
    before = initial
    for i, (op, st) in enumerate(partial):
        order[op.id] = (i, before, st)
        before = st
    shown = sorted(ops, key=lambda o: o.call)[-TIMELINE_OPS:]
    if failing is not None and all(o.id != failing.id for o in shown):
        shown.append(failing)
    out = []
    for op in shown:
        place = order.get(op.id)
        crashed = op.ret is None  # an `info` op has no return: it may take effect at any later time
        out.append({"process": op.process, "start": op.call_time, "end": None if crashed else op.ret_time,
                    "gave_up": op.ret_time if crashed else None, "call": op.call, "ret": op.ret,
                    "label": op_label(model, op),
                    "status": op.status, "order": None if place is None else place[0],
                    "state_before": None if place is None else place[1],
                    "state": None if place is None else place[2],
                    "failing": failing is not None and op.id == failing.id})
    return out


def _safe(key: Any) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key))[:60]
