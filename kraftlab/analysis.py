"""Facts derived from a history for reports and progress: op pairs with latencies, fault windows.

Fault windows come from the nemesis ops, paired by `nemesis.packages.WINDOWS` (the `f` that opens
a fault → the `f` that closes it): a window opens at the invocation of an opener that was
applied (not `fail`)
and closes at its closer; a closer shared by several openers (`clock-reset`, `restart`) closes
them all; a window still open when the history ends closes there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraftlab.nemesis.packages import WINDOWS

OPENERS = WINDOWS


@dataclass(frozen=True, slots=True)
class OpPair:
    process: int
    f: str
    type: str  # ok | fail | info
    start: int  # ns since test start
    end: int | None  # None: never completed (the runner died)
    node: str | None
    value: Any
    error: str | None

    @property
    def latency_ms(self) -> float | None:
        return None if self.end is None else (self.end - self.start) / 1e6


@dataclass(frozen=True, slots=True)
class FaultWindow:
    kind: str
    start: int
    end: int
    detail: Any


def pair_ops(ops: Iterable[dict[str, Any]]) -> list[OpPair]:
    """Client invocations matched with their completions (nemesis ops excluded)."""
    pending: dict[Any, dict[str, Any]] = {}
    pairs: list[OpPair] = []
    for op in ops:
        p = op.get("process")
        if p == "nemesis":
            continue
        if op["type"] == "invoke":
            pending[p] = op
            continue
        inv = pending.pop(p, None)
        if inv is None:
            continue
        pairs.append(OpPair(p, inv["f"], op["type"], inv["time"], op["time"], inv.get("node"),
                            op.get("value"), op.get("error")))
    for p, inv in pending.items():
        pairs.append(OpPair(p, inv["f"], "info", inv["time"], None, inv.get("node"), inv.get("value"),
                            "no completion"))
    pairs.sort(key=lambda x: x.start)
    return pairs


def _kind(opener: str) -> str:
    return opener.removeprefix("start-")


def _closes(f: str) -> list[str]:
    """The fault kinds a nemesis f closes."""
    return [_kind(opener) for opener, closer in OPENERS.items() if closer == f]


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    open_: dict[str, tuple[int, Any]] = {}
    invoked: dict[str, int] = {}
    windows: list[FaultWindow] = []
    last = 0
    for op in ops:
        last = max(last, int(op.get("time") or 0))
        if op.get("process") != "nemesis":
            continue
        f = str(op["f"])
        if op["type"] == "invoke":
            invoked[f] = op["time"]  # the nemesis runs one op at a time: its completion follows
            continue
        if f in OPENERS and op["type"] != "fail":
            # in effect from the invocation on (a graceful stop of every node takes seconds)
            open_.setdefault(_kind(f), (invoked.get(f, op["time"]), op.get("value")))
        for name in _closes(f):
            if name in open_:
                t0, detail = open_.pop(name)
                windows.append(FaultWindow(name, t0, op["time"], detail))
    for name, (t0, detail) in open_.items():
        windows.append(FaultWindow(name, t0, last, detail))
    windows.sort(key=lambda w: w.start)
    return windows
