"""Why a sub-history is not linearizable, as Knossos and Porcupine say it: the shortest failing
prefix, the op that cannot be linearized, the last consistent prefix (the longest partial
linearization, with the model state after each op), and the distinct model states the longest
partial linearizations end in — each with the op it cannot get past and the model's reason, in the
model's words (checker.models: `describe_op`, `describe_state`, `why_not`).

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
from kraftlab.checker.models import ILLEGAL, Model, op_label

SHOWN_CANDIDATES = 5
"""At most this many distinct model states are shown where the search got stuck."""


@dataclass
class Candidate:
    """One model state the search reached with the most ops linearized (Knossos's final
    configurations), and why it goes no further: the op whose completion it cannot get past, and
    the model's reason (`why_not`) that op's observed result is impossible there."""

    state: str
    """The model state, in the model's words (`describe_state`)."""
    linearized: int
    """How many ops were linearized to reach it."""
    blocked: Op | None
    """The first op (by completion) not linearized: the search cannot get past its completion."""
    reason: str
    fits: bool = False
    """The blocked op's result is possible in this state, but no order of the remaining ops fits
    after it."""

    def to_json(self, model: Model) -> dict[str, Any]:
        return {"state": self.state, "linearized": self.linearized,
                "blocked": op_label(model, self.blocked) if self.blocked is not None else None,
                "reason": self.reason, "fits": self.fits}


@dataclass
class Explanation:
    prefix_events: int
    op: Op | None
    ops: list[Op]
    partials: list[list[tuple[Op, str]]] = field(default_factory=list)
    """The longest partial linearizations found: each op with the model state after it."""
    complete: bool = True
    note: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    """The distinct states the longest partial linearizations end in, each with why it rejects."""
    initial: str = ""
    """The model's initial state, in its words."""

    def text(self, model: Model, key: Any = None) -> str:
        where = f" on key {key!r}" if key is not None else ""
        if self.op is None:
            return f"not linearizable{where}; {self.note}"
        label = op_label(model, self.op)
        lines = [
            f"not linearizable{where}: the shortest failing prefix ends at event {self.prefix_events} "
            f"(history line {self.op.ret_line or self.op.call_line}), the completion of {label}.",
            "No order of the operations before it leaves a state in which that result is possible."
            if self.op.status != "fail" else
            "It did not take effect, yet every order of the operations before it needs it to have.",
        ]
        if self.partials:
            part = self.partials[0]
            steps = " → ".join(f"{op_label(model, op)}, leaving [{st}]" for op, st in part[-6:])
            more = f"… {_n(len(part) - 6)} before, then " if len(part) > 6 else ""
            lines.append(f"Last consistent prefix ({_n(len(part))} linearized, from [{self.initial}]): {more}{steps}")
        if self.candidates:
            lines.append("Where every order of those ops gets stuck — the model states reached, and why each "
                         "rejects what comes next:")
        for c in self.candidates:
            who = op_label(model, c.blocked) if c.blocked is not None else "the next op"
            lines.append(f"  in state [{c.state}] (after {_n(c.linearized)}), {who} cannot come next: {c.reason}")
        if not self.complete:
            lines.append(f"(explanation cut short: {self.note})")
        return "\n".join(lines)


def _n(k: int) -> str:
    return f"{k} op" if k == 1 else f"{k} ops"


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


def candidate(model: Model, state: Any, order: list[Op], sub: list[Op], failing: Op | None) -> Candidate:
    """Why the search gets no further from `state` after linearizing `order` (see Candidate)."""
    done = {op.id for op in order}
    m = copy.deepcopy(model)
    steps = {op.id: st for op in sub if op.id not in done and op.ret is not None
             and (st := m.prepare(op)) is not None}
    pending = sorted((op for op in sub if op.id in steps), key=lambda o: o.ret or 0)
    blocked = pending[0] if pending else failing
    text = model.describe_state(state)
    if blocked is None:
        return Candidate(text, len(order), None, "no op is left to place")
    step = steps.get(blocked.id)
    fits = step is not None and step(state) is not ILLEGAL
    if fits:
        reason = ("its result is possible here, but then no order of the other ops invoked before its completion "
                  "fits")
    else:
        reason = why_not(model, state, blocked) or (
            "it did not take effect, yet in this state it must have" if blocked.status == "fail"
            else "its observed result is impossible in this state")
    return Candidate(text, len(order), blocked, reason, fits)


def explain(ops: list[Op], model: Model, seconds: float = 10.0, keep: int = 12) -> Explanation:
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
    # a model that numbers what it sees as it prepares ops (kv-whole's key slots) describes states
    # as the search built them only after preparing the same ops in the same order
    seen_all = copy.deepcopy(model)
    for op in sub:
        seen_all.prepare(op)
    orders = [[by_id[i] for i in part] for part in res.partials[:keep]]
    replays = [_replay(seen_all, order) for order in orders]
    partials = [steps for steps, _ in replays]
    candidates: list[Candidate] = []
    seen: set[Any] = set()
    for order, (_, state) in zip(orders, replays, strict=True):
        if state in seen or len(candidates) >= SHOWN_CANDIDATES:
            continue
        seen.add(state)
        candidates.append(candidate(seen_all, state, order, sub, failing))
    note = "" if complete else "time ran out; this prefix fails but a shorter one may too"
    probe = copy.deepcopy(model)
    shown = [op for op in sub if op is failing or op.ret_line == getattr(failing, "ret_line", -1)
             or probe.prepare(op) is not None]
    initial = copy.deepcopy(seen_all)
    return Explanation(cut, failing, shown, partials[:3], complete, note, candidates,
                       initial.describe_state(initial.init()))
