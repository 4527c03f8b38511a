"""Facts derived from a history for reports and progress: op pairs with latencies, fault windows.

Fault windows are the history contract's (`checker.history.fault_windows`), paired by the nemesis
packages' declarations (`nemesis.packages.WINDOWS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraftlab.checker.history import FaultWindow
from kraftlab.checker.history import fault_windows as history_fault_windows
from kraftlab.nemesis.packages import WINDOWS

__all__ = ["FaultWindow", "OpPair", "fault_windows", "pair_ops"]


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


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    """The history's fault windows, paired by the nemesis packages' declarations."""
    return history_fault_windows(ops, WINDOWS)
