"""Run several checkers in parallel and merge their verdicts: false > unknown > true.

A checker is a zero-argument callable returning a result dict with a `valid` key (true,
false or "unknown"). One that raises yields `unknown` with its traceback; one that returns no
recognisable verdict yields `unknown` too; one still running at the time limit is `unknown`.

How the checkers run is a seam (`CheckRunner`): by default each in its own process
(`checker.isolate.Processes`), so a time or memory limit really stops it; `InThreads` runs
them in this process (tests, trivial checkers), where a checker past its limit is reported
`unknown` but cannot be stopped.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

CheckerFn = Callable[[], dict[str, Any]]
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Limits:
    """Limits for each checker of one compose: wall-clock seconds (from the start of the
    compose) and the address space of its process in bytes; None means none."""

    seconds: float | None = None
    memory_bytes: int | None = None


class CheckRunner(Protocol):
    """Runs checkers under limits; returns one normalised result per checker name (any order)."""

    def run(self, checkers: Mapping[str, CheckerFn], limits: Limits) -> dict[str, dict[str, Any]]: ...


def merge(verdicts: list[Any]) -> bool | str:
    """false > unknown > true; anything that is not exactly true or false counts as unknown."""
    if any(v is False for v in verdicts):
        return False
    if all(v is True for v in verdicts):
        return True
    return UNKNOWN


def run_one(fn: CheckerFn) -> dict[str, Any]:
    """Call one checker; a crash or a result without a verdict is `unknown`, never valid. The
    result gets `wall_seconds`, the checker's own time."""
    t0 = time.monotonic()
    try:
        res = fn()
    except BaseException as exc:  # a crashing checker is unknown, never valid
        res = {"valid": UNKNOWN, "explanation": f"checker crashed: {type(exc).__name__}: {exc}",
               "error": traceback.format_exc()}
    if not isinstance(res, dict) or res.get("valid") not in (True, False, UNKNOWN):
        res = {"valid": UNKNOWN, "explanation": f"checker returned no verdict: {res!r:.200}"}
    res.setdefault("wall_seconds", round(time.monotonic() - t0, 3))
    return res


def timed_out(name: str, seconds: float | None, how: str) -> dict[str, Any]:
    return {"valid": UNKNOWN, "limit": {"seconds": seconds},
            "explanation": f"checker {name!r} still running at its time limit of {seconds:g} s: {how}"}


class InThreads:
    """Each checker in a thread of this process. A checker past the time limit is reported
    `unknown`, but its thread runs on (Python threads cannot be killed); no memory limit."""

    def run(self, checkers: Mapping[str, CheckerFn], limits: Limits) -> dict[str, dict[str, Any]]:
        if len(checkers) == 1 and limits.seconds is None:  # no thread needed (the checker may fork workers)
            name, fn = next(iter(checkers.items()))
            return {name: run_one(fn)}
        results: dict[str, dict[str, Any]] = {}
        pool = cf.ThreadPoolExecutor(max_workers=len(checkers), thread_name_prefix="checker")
        futures = {pool.submit(run_one, fn): name for name, fn in checkers.items()}
        try:
            for fut in cf.as_completed(futures, timeout=limits.seconds):
                results[futures[fut]] = fut.result()
        except cf.TimeoutError:
            pass
        for name in futures.values():
            if name not in results:
                results[name] = timed_out(name, limits.seconds, "left running in its thread (not killable in-process)")
        pool.shutdown(wait=False, cancel_futures=True)
        return results


def compose(checkers: Mapping[str, CheckerFn], timeout: float | None = None, *, memory_bytes: int | None = None,
            runner: CheckRunner | None = None) -> dict[str, Any]:
    """Run `checkers` (each in its own process unless `runner` says otherwise) under `timeout`
    seconds and `memory_bytes` each; the results.json shape of docs/contracts.md."""
    if not checkers:
        return {"valid": UNKNOWN, "checkers": {}, "explanation": "no checkers ran"}
    if runner is None:
        from kraftlab.checker.isolate import Processes

        runner = Processes()
    t0 = time.monotonic()
    results = runner.run(checkers, Limits(timeout, memory_bytes))
    ordered = {name: results[name] for name in checkers}
    return {"valid": merge([r["valid"] for r in ordered.values()]), "checkers": ordered,
            "seconds": round(time.monotonic() - t0, 3)}
