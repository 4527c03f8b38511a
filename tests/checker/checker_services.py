"""Correct simulated services (the topic set, the broker registry) that produce Jepsen-style
histories in the formats of docs/workload-ops.md: each op takes effect atomically at a random
point between its invocation and completion; some ops crash (`info`) before or after."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kraftlab.checker.history import Event, History

Apply = Callable[[Any, str, Any], tuple[Any, str, Any, Any]]
"""(state, f, request) → (state', type, response, error)."""


def topics_apply(state: Any, f: str, req: Any) -> tuple[Any, str, Any, Any]:
    if f == "list":
        return state, "ok", {"topics": sorted(state)}, None
    t = req["topic"]
    if f == "create":
        return (state, "fail", req, "TOPIC_ALREADY_EXISTS") if t in state else (state | {t}, "ok", req, None)
    if f == "delete":
        return (state - {t}, "ok", req, None) if t in state else (state, "fail", req, "UNKNOWN_TOPIC_OR_PARTITION")
    return state, "ok", {"topic": t, "exists": t in state}, None


def topics_request(rng: random.Random) -> tuple[str, Any]:
    f = rng.choice(["create", "create", "delete", "describe", "list"])
    return f, None if f == "list" else {"topic": f"t{rng.randrange(3)}"}


def registry_apply(state: Any, f: str, req: Any) -> tuple[Any, str, Any, Any]:
    top, regs = state
    if f == "read":
        return state, "ok", {"brokers": {str(b): e for b, (e, _) in regs.items()}}, None
    b = req["broker"]
    if f == "register":
        top += 7
        return (top, {**regs, b: (top, req["incarnation"])}), "ok", {"broker": b, "epoch": top}, None
    if f == "heartbeat":
        ok = b in regs and regs[b][0] == req["epoch"]
        return state, ("ok" if ok else "fail"), req, None if ok else "STALE_BROKER_EPOCH"
    if b not in regs:
        return state, "fail", req, "BROKER_ID_NOT_REGISTERED"
    return (top, {k: v for k, v in regs.items() if k != b}), "ok", req, None


def registry_request(rng: random.Random) -> tuple[str, Any]:
    f = rng.choice(["register", "heartbeat", "heartbeat", "unregister", "read"])
    b = rng.randrange(1, 3)
    if f == "register":
        return f, {"broker": b, "incarnation": f"i{rng.randrange(1000)}"}
    if f == "heartbeat":
        return f, {"broker": b, "epoch": 7 * rng.randrange(1, 6)}
    return f, None if f == "read" else {"broker": b}


def simulate(seed: int, steps: int, procs: int, apply: Apply, request: Callable[[random.Random], tuple[str, Any]],
             state: Any, crash_p: float = 0.05) -> History:
    rng = random.Random(seed)
    events: list[Event] = []
    active: dict[int, list[Any]] = {}  # p → [f, req, done, (type, resp, error)]
    live = list(range(procs))
    nxt = procs

    def emit(p: int, typ: str, f: str, v: Any, err: Any = None) -> None:
        events.append(Event(len(events), p, typ, f, v, error=err, line=len(events) + 1))

    for _ in range(steps):
        p = rng.choice(live)
        op = active.get(p)
        if op is None:
            f, req = request(rng)
            active[p] = [f, req, False, None]
            emit(p, "invoke", f, req)
        elif not op[2]:
            state, typ, resp, err = apply(state, op[0], op[1])
            op[2], op[3] = True, (typ, resp, err)
        else:
            del active[p]
            if rng.random() < crash_p:
                emit(p, "info", op[0], op[1], "timeout")
                live[live.index(p)] = nxt
                nxt += 1
            else:
                emit(p, op[3][0], op[0], op[3][1], op[3][2])
    return History(events)
