"""The Wing–Gong/Lowe linearizability search over one (sub-)history.

Calls and returns sit in a doubly linked list in real-time order. The search walks it from the
head: at a call it tries to linearize that op (apply the model's step); at a return it has
failed to linearize an op before that op returned, and backtracks. Configurations (set of
linearized ops as a bitset, model state) are memoised exactly: a configuration seen before is
never explored again. A completed read-only op (the model marks it: it changes no state, ever)
that fits the current state is linearized at once and never reconsidered: moving it earlier
changes no other op's outcome, so the configuration before it succeeds exactly when the one
after it does.

Crashed ops (`info`, or no completion) are handled soundly and cheaply: they have no return
(they may take effect at any later time, or never); at each configuration they are tried only
after every completed candidate (most are never needed); crashed ops that cannot change the state
were dropped by the model; a crashed op whose step leaves the state unchanged is never applied
(applying it changes nothing); identical crashed ops are linearized in invocation order (they
are interchangeable, and an earlier-invoked one can stand in for a later one); and the search
stops as soon as every completed op is linearized (the rest may simply never happen).
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Op
from kraftlab.checker.linear.budget import Budget, Meter
from kraftlab.checker.models import ILLEGAL, Model

VALID, INVALID, UNKNOWN = True, False, "unknown"
_SLICE = 256


@dataclass
class SearchResult:
    """The outcome for one sub-history. `linearization`/`partials` hold op ids (`Op.id`)."""

    valid: bool | str
    reason: str = ""
    configs: int = 0
    linearization: list[int] | None = None
    partials: list[list[int]] = field(default_factory=list)
    deepest: int = 0
    n_ops: int = 0


def _twin_key(op: Op) -> str:
    return json.dumps([op.f, op.value], sort_keys=True, default=str)


def search(ops: list[Op], model: Model, budget: Budget | None = None, meter: Meter | None = None,
           keep_partials: int = 0) -> SearchResult:
    """Is this history linearizable with respect to `model`? Three-valued, never falsely valid."""
    meter = meter or Meter(budget or Budget())
    run = search_steps(ops, model, keep_partials)
    try:
        while True:
            configs = next(run)
            why = meter.exceeded(configs)
            if why:
                run.throw(_OutOfBudget(why))  # the search returns its unknown result: StopIteration
    except StopIteration as done:
        return done.value


class _OutOfBudget(Exception):
    pass


def search_steps(ops: list[Op], model: Model, keep_partials: int = 0) -> Generator[int, None, SearchResult]:
    """The search as a generator: yields the number of memoised configurations every few
    thousand steps (so a driver can enforce a budget or interleave several searches) and
    returns the SearchResult. Throwing `_OutOfBudget(reason)` into it ends it with `unknown`.
    """
    prepared: list[tuple[Op, Any]] = []
    for op in ops:
        st = model.prepare(op)
        if st is not None:
            prepared.append((op, st))
    init = model.init()
    n = len(prepared)
    steps = [st for _, st in prepared]
    crashed = [op.ret is None for op, _ in prepared]
    # identical crashed ops: each may be linearized only after the one invoked before it
    twin = [-1] * n
    last: dict[str, int] = {}
    for i, (op, _) in enumerate(prepared):
        if crashed[i]:
            key = _twin_key(op)
            twin[i] = last.get(key, -1)
            last[key] = i
    events: list[tuple[int, int, int]] = []
    for i, (op, _) in enumerate(prepared):
        events.append((op.call, 0, i))
        if op.ret is not None:
            events.append((op.ret, 1, i))
    events.sort()
    m = len(events)
    head = m
    nxt = [k + 1 for k in range(m)] + [0 if m else -1]
    prv = [k - 1 for k in range(m)] + [-1]
    if m:
        nxt[m - 1] = -1
        prv[0] = head
    is_call = [kind == 0 for _, kind, _ in events] + [False]
    opi = [i for _, _, i in events] + [-1]
    callnode = [0] * n
    retnode = [-1] * n
    for k, (_, kind, i) in enumerate(events):
        if kind == 0:
            callnode[i] = k
        else:
            retnode[i] = k

    remaining = sum(1 for c in crashed if not c)
    result = SearchResult(VALID, n_ops=n)
    if remaining == 0:
        result.linearization = []
        return result
    cache: set[tuple[int, Any]] = set()
    stack: list[tuple[int, Any, int, bool]] = []
    cr = [1 if c else 0 for c in crashed]
    masks = [1 << i for i in range(n)]
    forcing = [bool(getattr(st, "read_only", False)) and not crashed[i] for i, st in enumerate(steps)]
    lazy = any(crashed)
    phase = 0  # 0: try completed ops; 1: then crashed ones (they are tried only when needed)
    state = init
    bits = 0
    depth = 0
    deepest = 0
    entry = nxt[head]
    polls = 0
    while True:
        dead = False
        if is_call[entry]:
            i = opi[entry]
            tw = twin[i]
            if cr[i] == phase and (tw < 0 or bits & masks[tw]):
                s2 = steps[i](state)
                if s2 is not ILLEGAL and not (crashed[i] and s2 == state):
                    nb = bits | masks[i]
                    # a completed op that leaves the state as it is may be linearized right now
                    # without loss: this configuration stands or falls with the one after it
                    forced = forcing[i]
                    size = len(cache)
                    cache.add((nb, s2))
                    if len(cache) != size:  # a new configuration (one hash instead of two)
                        stack.append((i, state, phase, forced))
                        bits = nb
                        state = s2
                        # lift the call and its return out of the list
                        c = entry
                        nxt[prv[c]] = nxt[c]
                        if nxt[c] >= 0:
                            prv[nxt[c]] = prv[c]
                        r = retnode[i]
                        if r >= 0:
                            nxt[prv[r]] = nxt[r]
                            if nxt[r] >= 0:
                                prv[nxt[r]] = prv[r]
                            remaining -= 1
                            depth += 1
                            if remaining == 0:
                                result.linearization = [prepared[j][0].id for j, *_ in stack]
                                result.configs = len(cache)
                                result.deepest = depth
                                return result
                            if depth > deepest:
                                deepest = depth
                                if keep_partials:
                                    result.partials = [[prepared[j][0].id for j, *_ in stack]]
                            elif keep_partials and depth == deepest and len(result.partials) < keep_partials:
                                result.partials.append([prepared[j][0].id for j, *_ in stack])
                        polls += 1
                        if polls >= _SLICE:
                            polls = 0
                            try:
                                yield len(cache)
                            except _OutOfBudget as why:
                                return SearchResult(UNKNOWN, str(why), len(cache), None, result.partials, deepest, n)
                        entry = nxt[head]
                        phase = 0
                        continue
                    dead = forced  # the configuration after it already failed, so this one fails
            if not dead:
                entry = nxt[entry]
                continue
        # a return: its op was not linearized before it returned. Try the crashed ops before
        # it; after those, undo the last choice (and every forced choice before it).
        if not dead and phase == 0 and lazy:
            phase = 1
            entry = nxt[head]
            continue
        while True:
            if not stack:
                return SearchResult(INVALID, "no linearization exists", len(cache), None, result.partials, deepest, n)
            i, state, phase, forced = stack.pop()
            bits ^= masks[i]
            r = retnode[i]
            if r >= 0:
                nxt[prv[r]] = r
                if nxt[r] >= 0:
                    prv[nxt[r]] = r
                remaining += 1
                depth -= 1
            c = callnode[i]
            nxt[prv[c]] = c
            if nxt[c] >= 0:
                prv[nxt[c]] = c
            if not forced:
                break
        entry = nxt[c]
