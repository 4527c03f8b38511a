"""Run several checkers in parallel and merge their verdicts: false > unknown > true.

A checker is a zero-argument callable returning a result dict with a `valid` key (true,
false or "unknown"). One that raises yields `unknown` with its traceback; one that returns no
recognisable verdict yields `unknown` too; one still running at the time limit is `unknown`.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

CheckerFn = Callable[[], dict[str, Any]]
UNKNOWN = "unknown"


def merge(verdicts: list[Any]) -> bool | str:
    """false > unknown > true; anything that is not exactly true or false counts as unknown."""
    if any(v is False for v in verdicts):
        return False
    if all(v is True for v in verdicts):
        return True
    return UNKNOWN


def _run(fn: CheckerFn) -> dict[str, Any]:
    try:
        res = fn()
    except BaseException as exc:  # a crashing checker is unknown, never valid
        return {"valid": UNKNOWN, "explanation": f"checker crashed: {type(exc).__name__}: {exc}",
                "error": traceback.format_exc()}
    if not isinstance(res, dict) or res.get("valid") not in (True, False, UNKNOWN):
        return {"valid": UNKNOWN, "explanation": f"checker returned no verdict: {res!r:.200}"}
    return res


def compose(checkers: Mapping[str, CheckerFn], timeout: float | None = None) -> dict[str, Any]:
    """Run `checkers` in parallel threads; the results.json shape of docs/contracts.md."""
    results: dict[str, dict[str, Any]] = {}
    if not checkers:
        return {"valid": UNKNOWN, "checkers": {}, "explanation": "no checkers ran"}
    t0 = time.monotonic()
    if len(checkers) == 1 and timeout is None:  # no thread needed (and the checker may then fork workers)
        name, fn = next(iter(checkers.items()))
        res = _run(fn)
        return {"valid": merge([res["valid"]]), "checkers": {name: res}, "seconds": round(time.monotonic() - t0, 3)}
    pool = cf.ThreadPoolExecutor(max_workers=len(checkers), thread_name_prefix="checker")
    futures = {pool.submit(_run, fn): name for name, fn in checkers.items()}
    try:
        for fut in cf.as_completed(futures, timeout=timeout):
            results[futures[fut]] = fut.result()
    except cf.TimeoutError:
        pass
    for name in futures.values():
        if name not in results:
            results[name] = {"valid": UNKNOWN, "explanation": f"still running after {timeout} s"}
    pool.shutdown(wait=False, cancel_futures=True)
    ordered = {name: results[name] for name in checkers}
    return {"valid": merge([r["valid"] for r in ordered.values()]), "checkers": ordered,
            "seconds": round(time.monotonic() - t0, 3)}
