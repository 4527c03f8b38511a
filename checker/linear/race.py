"""P-compositionality: split a history by key, race the keys' searches, first illegal wins.

All partitions advance together (round-robin over their search generators), so a partition
that fails in milliseconds ends the check even while another would take minutes. With more
than one core and enough work (and no other thread that a fork could catch holding a lock),
the partitions are dealt to worker processes (fork), each
racing its share; the first illegal result terminates the others. Verdicts merge
false > unknown > true.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Op
from kraftlab.checker.linear.budget import Budget, Meter
from kraftlab.checker.linear.search import INVALID, UNKNOWN, VALID, SearchResult, _OutOfBudget, search_steps
from kraftlab.checker.models import Model

PARALLEL_MIN_OPS = 1500
"""Below this many ops in all, forking workers costs more than it saves."""


@dataclass
class RaceResult:
    valid: bool | str
    reason: str = ""
    failing_key: Hashable | None = None
    results: dict[Hashable, SearchResult] = field(default_factory=dict)
    partitions: int = 0
    involved: list[Op] = field(default_factory=list)
    """The ops a cross-key violation names (failing_key ACROSS_KEYS)."""


ACROSS_KEYS = "(across keys)"
"""The failing key of a violation found by a model's `cross_check` rather than by one key's search."""


def split(ops: list[Op], model: Model) -> dict[Hashable, list[Op]]:
    """Ops by key; an op that spans keys is projected onto each key when the model can
    (`project`), else everything goes under the key None (one search)."""
    groups: dict[Hashable, list[Op]] = {}
    spanning: list[Op] = []
    # optional (a keyed model's): an op spanning keys as one op per key, or None when it cannot
    project: Callable[[Op, set[Hashable]], list[tuple[Hashable, Op]] | None] | None = getattr(model, "project", None)
    for op in ops:
        k = model.partition_key(op)
        if k is not None:
            groups.setdefault(k, []).append(op)
        elif project is None:
            return {None: list(ops)}
        else:
            spanning.append(op)
    if spanning and project is not None:  # (spanning ops exist only when the model projects)
        keys: set[Hashable] = set(groups)
        for op in spanning:  # the keys the spanning ops name themselves count too
            parts = project(op, set())
            if parts is None:
                return {None: list(ops)}
            keys.update(k for k, _ in parts)
        for op in spanning:
            parts = project(op, keys)
            assert parts is not None  # it projected this op onto the keys the op named, above
            for k, sub in parts:
                groups.setdefault(k, []).append(sub)
        for group in groups.values():
            group.sort(key=lambda o: o.call)
    return groups or {None: []}


def cross_check(ops: list[Op], model: Model, groups: dict[Hashable, list[Op]]) -> RaceResult | None:
    """A keyed model's constraint across keys (`cross_check`), when the history was split."""
    check: Callable[[list[Op]], tuple[str, list[Op]] | None] | None = getattr(model, "cross_check", None)
    if check is None or None in groups:
        return None
    found = check(ops)
    if found is None:
        return None
    reason, involved = found
    return RaceResult(INVALID, reason, ACROSS_KEYS, {ACROSS_KEYS: SearchResult(INVALID, reason)}, len(groups),
                      involved)


def merge_verdicts(verdicts: list[bool | str]) -> bool | str:
    """false > unknown > true."""
    if any(v is INVALID for v in verdicts):
        return INVALID
    if any(v != VALID for v in verdicts):
        return UNKNOWN
    return VALID


def race_in_process(groups: dict[Hashable, list[Op]], model: Model, meter: Meter) -> RaceResult:
    """Round-robin the partitions' searches in this process; stop at the first illegal one."""
    running = {k: search_steps(ops, copy.deepcopy(model)) for k, ops in groups.items()}
    out = RaceResult(VALID, partitions=len(groups))
    configs: dict[Hashable, int] = {}
    while running:
        for k in list(running):
            gen = running[k]
            try:
                configs[k] = next(gen)
                why = meter.exceeded(sum(configs.values()))
                if why:
                    for k2, g2 in running.items():
                        try:
                            g2.throw(_OutOfBudget(why))
                        except StopIteration as done:
                            out.results[k2] = done.value
                    running.clear()
                    break
            except StopIteration as done:
                res: SearchResult = done.value
                out.results[k] = res
                del running[k]
                if res.valid is INVALID:
                    for g2 in running.values():
                        g2.close()
                    running.clear()
                    break
    return _finish(out)


def explain_keys(results: list[tuple[Hashable | None, bool | str, str]]) -> str:
    """The wording of a merge of per-key results `(key, valid, reason)`, whoever checked the keys
    (this race, or Spark executors merged by `spark_analysis`): the first illegal key and why;
    else the first three keys left unknown and why; else that every partition is linearizable.
    The key None (a history checked whole) is not named."""

    def said(k: Hashable | None, reason: str) -> str:
        return f"key {k!r}: {reason}" if k is not None else reason

    bad = [said(k, reason) for k, v, reason in results if v is INVALID]
    if bad:
        return bad[0]
    unknown = [said(k, reason) for k, v, reason in results if v is not VALID]
    return "; ".join(unknown[:3]) if unknown else "every partition is linearizable"


def _finish(out: RaceResult) -> RaceResult:
    out.valid = merge_verdicts([r.valid for r in out.results.values()])
    out.failing_key = next((k for k, r in out.results.items() if r.valid is INVALID), None)
    out.reason = explain_keys([(k, r.valid, r.reason) for k, r in out.results.items()])
    return out


def _deal(groups: dict[Hashable, list[Op]], workers: int) -> list[dict[Hashable, list[Op]]]:
    """Largest first, each to the least-loaded worker."""
    shares: list[dict[Hashable, list[Op]]] = [{} for _ in range(workers)]
    load = [0] * workers
    for k, ops in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        w = load.index(min(load))
        shares[w][k] = ops
        load[w] += len(ops)
    return [s for s in shares if s]


def _worker(share: dict[Hashable, list[Op]], model: Model, budget: Budget, deadline_in: float, q: Any) -> None:
    meter = Meter(budget, time.monotonic() + deadline_in)
    try:
        q.put(("ok", race_in_process(share, model, meter)))
    except BaseException as exc:  # the parent turns this into unknown
        q.put(("error", f"{type(exc).__name__}: {exc}"))


def race(ops: list[Op], model: Model, budget: Budget | None = None, workers: int | None = None) -> RaceResult:
    """Check every key's sub-history; see the module docstring."""
    budget = budget or Budget()
    groups = split(ops, model)
    across = cross_check(ops, model, groups)  # cheap (no search): first
    if across is not None:
        return across
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(workers if workers is not None else cpus, len(groups))
    forkable = threading.current_thread() is threading.main_thread() and threading.active_count() == 1
    if workers <= 1 or len(ops) < PARALLEL_MIN_OPS or not forkable:
        return race_in_process(groups, model, Meter(budget))
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    shares = _deal(groups, workers)
    per_worker = Budget(budget.seconds, budget.max_rss_bytes // len(shares), budget.max_configs)
    procs = [ctx.Process(target=_worker, args=(s, model, per_worker, budget.seconds, q), daemon=True) for s in shares]
    for p in procs:
        p.start()
    out = RaceResult(VALID, partitions=len(groups))
    give_up = time.monotonic() + budget.seconds + 30
    try:
        waiting, silent = len(procs), 0
        while waiting:
            try:
                kind, payload = q.get(timeout=0.5)
            except queue.Empty:
                # a worker that died without a word (killed, out of memory) never answers
                silent = silent + 1 if not any(p.is_alive() for p in procs) else 0
                if time.monotonic() > give_up or silent >= 3:
                    out.results["worker lost"] = SearchResult(UNKNOWN, "a worker process died or hung")
                    break
                continue
            waiting -= 1
            if kind == "error":
                out.results[f"worker error: {payload}"] = SearchResult(UNKNOWN, payload)
                continue
            out.results.update(payload.results)
            if payload.valid is INVALID:
                break
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(5)
        q.close()
    return _finish(out)
