"""Why a sub-history is not linearizable: the shortest failing prefix, the op that cannot be
linearized, and the longest partial linearizations before it (with the model state after each).

A prefix of a history keeps every event up to a cut; ops still running at the cut become
crashed (they may or may not have taken effect). Illegality is monotone in the cut, so a
binary search finds the shortest illegal prefix; it ends with a completion, and that op is the
one that cannot be linearized: every order of the ops before it leaves no state in which its
observed result is possible.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Op
from kraftlab.checker.linear.budget import Budget, Meter
from kraftlab.checker.linear.search import INVALID, VALID, search
from kraftlab.checker.models import ILLEGAL, Model


@dataclass
class Explanation:
    prefix_events: int
    op: Op | None
    ops: list[Op]
    partials: list[list[tuple[Op, str]]] = field(default_factory=list)
    complete: bool = True
    note: str = ""
    reasons: list[str | None] = field(default_factory=list)
    """Per partial linearization: why the failing op's result is impossible after it (the model's
    `why_not`, in Kafka's words), when the model can say."""

    def text(self, model: Model, key: Any = None) -> str:
        where = f" on key {key!r}" if key is not None else ""
        if self.op is None:
            return f"not linearizable{where}; {self.note}"
        lines = [
            f"not linearizable{where}: the shortest failing prefix ends at event {self.prefix_events} "
            f"(history line {self.op.ret_line or self.op.call_line}), the completion of {self.op.label()}.",
            "No order of the operations before it leaves a state in which that result is possible."
            if self.op.status != "fail" else
            "It did not take effect, yet every order of the operations before it needs it to have.",
        ]
        for n, part in enumerate(self.partials, 1):
            steps = " → ".join(f"{op.label()} (state then: {st})" for op, st in part[-6:])
            more = f"… {len(part) - 6} earlier ops, then " if len(part) > 6 else ""
            lines.append(f"Partial linearization {n} ({len(part)} ops): {more}{steps}")
            reason = self.reasons[n - 1] if n - 1 < len(self.reasons) else None
            if reason:
                lines.append(f"  then {self.op.label()} cannot be: {reason}")
        if not self.complete:
            lines.append(f"(explanation cut short: {self.note})")
        return "\n".join(lines)


def prefix(ops: list[Op], cut: int) -> list[Op]:
    """The ops invoked before event position `cut`; those not completed by then become crashed."""
    out: list[Op] = []
    for op in ops:
        if op.call >= cut:
            continue
        if op.ret is not None and op.ret >= cut:
            op = copy.copy(op)
            op.ret, op.status, op.output = None, "info", None
        out.append(op)
    return out


def replay(model: Model, order: list[Op]) -> list[tuple[Op, str]]:
    """The states after each op of a (partial) linearization."""
    return _replay(model, order)[0]


def _replay(model: Model, order: list[Op]) -> tuple[list[tuple[Op, str]], Any]:
    m = copy.deepcopy(model)
    steps = [(op, m.prepare(op)) for op in order]
    state = m.init()
    out: list[tuple[Op, str]] = []
    for op, st in steps:
        if st is not None:
            nxt = st(state)
            state = state if nxt is ILLEGAL else nxt
        out.append((op, m.describe_state(state)))
    return out, state


def why_not(model: Model, state: Any, op: Op | None) -> str | None:
    """The model's reason (ExplainsRefusals) the op cannot follow `state`, if it has one."""
    fn = getattr(model, "why_not", None)
    if fn is None or op is None:
        return None
    try:
        return fn(state, op)
    except (ValueError, KeyError, TypeError):
        return None


def explain(ops: list[Op], model: Model, seconds: float = 10.0, keep: int = 3) -> Explanation:
    """Explain an illegal sub-history (see the module docstring) within `seconds`."""
    deadline = time.monotonic() + seconds
    by_id = {op.id: op for op in ops}
    cuts = sorted({op.ret + 1 for op in ops if op.ret is not None})

    def illegal(cut: int) -> bool | None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        res = search(prefix(ops, cut), copy.deepcopy(model), meter=Meter(Budget(left), deadline))
        return None if res.valid not in (VALID, INVALID) else res.valid is INVALID

    lo, hi = -1, len(cuts) - 1  # cuts[hi] is illegal (the whole history); cuts[lo] legal
    complete = True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        verdict = illegal(cuts[mid])
        if verdict is None:
            complete = False
            break
        if verdict:
            hi = mid
        else:
            lo = mid
    if not cuts:
        return Explanation(0, None, ops, complete=False, note="no completed operations")
    cut = cuts[hi]
    failing = next((op for op in ops if op.ret == cut - 1), None)
    sub = prefix(ops, cut)
    left = max(0.5, deadline - time.monotonic())
    res = search(sub, copy.deepcopy(model), meter=Meter(Budget(left)), keep_partials=keep)
    replays = [_replay(model, [by_id[i] for i in part]) for part in res.partials[:keep]]
    partials = [steps for steps, _ in replays]
    reasons = [why_not(model, state, failing) for _, state in replays]
    note = "" if complete else "time ran out; this prefix fails but a shorter one may too"
    probe = copy.deepcopy(model)
    shown = [op for op in sub if op is failing or op.ret_line == getattr(failing, "ret_line", -1)
             or probe.prepare(op) is not None]
    return Explanation(cut, failing, shown, partials, complete, note, reasons)
