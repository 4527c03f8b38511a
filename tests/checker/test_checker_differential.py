"""Differential test: the optimised search agrees with a brute-force definition of
linearizability on small arbitrary histories (reads, writes, cas, failures, crashes).

The brute force is the definition itself: pick, again and again, any op not yet placed whose
invocation comes after the completion of nothing still unplaced; completed ops must all be
placed, crashed ones may be; every step must be legal in the model.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kraftlab.checker.history import Event, History, Op, pair_ops
from kraftlab.checker.linear.search import search
from kraftlab.checker.models import ILLEGAL, build_model

VALUES = st.integers(0, 2)


def brute(ops: list[Op], model_name: str) -> bool:
    model = build_model(model_name)
    steps = {op.id: model.prepare(op) for op in ops}
    todo = [op for op in ops if steps[op.id] is not None]

    def go(state: Any, left: list[Op]) -> bool:
        if all(op.ret is None for op in left):
            return True
        for op in left:
            if any(o.ret is not None and o.ret < op.call for o in left if o is not op):
                continue  # something still unplaced completed before this op began
            nxt = steps[op.id](state)  # type: ignore[misc]
            if nxt is not ILLEGAL and go(nxt, [o for o in left if o is not op]):
                return True
        return False

    return go(model.init(), todo)


@st.composite
def histories(draw: st.DrawFn) -> History:
    n_proc = draw(st.integers(1, 3))
    events: list[Event] = []
    open_: dict[int, tuple[str, Any]] = {}
    procs = list(range(n_proc))
    next_proc = n_proc
    for _ in range(draw(st.integers(1, 14))):
        k = draw(st.integers(0, len(procs) - 1))
        p = procs[k]
        if p not in open_:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            v = None if f == "read" else draw(VALUES) if f == "write" else [draw(VALUES), draw(VALUES)]
            open_[p] = (f, v)
            events.append(Event(len(events), p, "invoke", f, v))
            continue
        f, v = open_.pop(p)
        typ = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
        out = draw(st.one_of(st.none(), VALUES)) if f == "read" and typ == "ok" else v
        err = "compare-mismatch" if f == "cas" and typ == "fail" and draw(st.booleans()) else None
        events.append(Event(len(events), p, typ, f, out, error=err))
        if typ == "info":
            procs[k] = next_proc
            next_proc += 1
    return History(events)


@given(histories())
def test_search_agrees_with_brute_force(h: History) -> None:
    ops = pair_ops(h)
    want = brute(ops, "cas-register")
    got = search(ops, build_model("cas-register")).valid
    assert got is want, [e.to_json() for e in h.events]
