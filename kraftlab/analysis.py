"""Facts derived from a history for reports and progress: op pairs with latencies, fault windows.

Fault windows come from the nemesis ops: a window opens at a `start-X` op (or `kill`, `pause`,
`clock-bump`, `clock-strobe`, `clock-skew`) and closes at the matching `stop-X` (or `restart`,
`resume`, `clock-reset`); a window still open when the history ends closes there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

OPENERS = {"kill": "restart", "pause": "resume", "clock-bump": "clock-reset",
           "clock-strobe": "clock-reset", "clock-skew": "clock-reset"}


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


def _opens(f: str) -> str | None:
    """The fault kind a nemesis f opens, if any."""
    if f.startswith("start-"):
        return f[6:]
    return f if f in OPENERS else None


def _closes(f: str) -> list[str]:
    """The fault kinds a nemesis f closes."""
    if f.startswith("stop-"):
        return [f[5:]]
    return [opener for opener, closer in OPENERS.items() if closer == f]


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    open_: dict[str, tuple[int, Any]] = {}
    windows: list[FaultWindow] = []
    last = 0
    for op in ops:
        last = max(last, int(op.get("time") or 0))
        if op.get("process") != "nemesis" or op["type"] == "invoke":
            continue
        f = str(op["f"])
        kind = _opens(f)
        if kind is not None:
            open_.setdefault(kind, (op["time"], op.get("value")))
        for name in _closes(f):
            if name in open_:
                t0, detail = open_.pop(name)
                windows.append(FaultWindow(name, t0, op["time"], detail))
    for name, (t0, detail) in open_.items():
        windows.append(FaultWindow(name, t0, last, detail))
    windows.sort(key=lambda w: w.start)
    return windows
