"""Availability as a stated property (opt-in, Jepsen-style): while a fault leaves a majority of the
voters connected and running, a client on that majority side must see an operation succeed within
N seconds of the fault starting.

For each fault window that changes who can talk or run (partitions, kills, graceful stops,
pauses), the checker looks at every such fault in force during the N seconds that follow its
start, and works out a majority side: a majority of the controllers that are up and pairwise
connected both ways, and the broker nodes connected both ways to all of them. When there is none
(the faults took the quorum away, as a fault may), the window is not judged and says so. When there
is one, some client operation on a node of that side must complete `ok` within N seconds of the
start; otherwise `Unavailable` names the fault, the side, and what its clients got instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from kraftlab.checker.history import FaultWindow, History, fault_windows, pair_ops
from kraftlab.checker.invariant import Violation, result

RULES = ["Unavailable"]
REACHABILITY = ("partition", "kill", "graceful-stop", "pause")
"""Window kinds that change which nodes can talk or run (clock, packet and disk faults do not)."""


def _cut(windows: Sequence[FaultWindow]) -> tuple[set[tuple[str, str]], set[str]]:
    """The directed (sender, receiver) pairs dropped and the nodes down, over `windows`."""
    dropped: set[tuple[str, str]] = set()
    down: set[str] = set()
    for w in windows:
        detail = w.detail if isinstance(w.detail, dict) else {}
        if w.kind == "partition":
            for receiver, senders in (detail.get("grudge") or {}).items():
                dropped |= {(s, receiver) for s in senders}
        else:
            down |= set(detail.get("nodes") or [])
    return dropped, down


def majority_side(nodes: Sequence[str], controllers: Sequence[str],
                  windows: Sequence[FaultWindow]) -> list[str] | None:
    """The nodes of a side that keeps a quorum under every fault of `windows` at once (None: none)."""
    dropped, down = _cut(windows)

    def linked(a: str, b: str) -> bool:
        return (a, b) not in dropped and (b, a) not in dropped

    up = [c for c in controllers if c not in down]
    need = len(controllers) // 2 + 1
    for size in range(len(up), need - 1, -1):
        for group in itertools.combinations(up, size):
            if all(linked(a, b) for a, b in itertools.combinations(group, 2)):
                side = [n for n in nodes if n not in down and all(n == c or linked(n, c) for c in group)]
                return side
    return None


def check_availability(history: History, openers: Mapping[str, str], within_s: float, nodes: Sequence[str],
                       controllers: Sequence[str]) -> dict[str, Any]:
    """Judge every reachability fault window against the stated `within_s` (see the module docstring)."""
    within = int(within_s * 1e9)
    windows = fault_windows(history.events, dict(openers))
    reach = [w for w in windows if w.kind in REACHABILITY]
    ops = [op for op in pair_ops(history) if op.status == "ok" and op.ret_time is not None]
    violations = []
    not_judged = 0
    for w in reach:
        t0, t1 = w.start, w.start + within
        during = [x for x in reach if x.start < t1 and x.end > t0]
        side = majority_side(nodes, controllers, during)
        if side is None:
            not_judged += 1
            continue
        served = [op for op in ops if t0 <= (op.ret_time or 0) <= t1 and history.events[op.call].node in side]
        if not served:
            others = [x.opener or x.kind for x in during if x is not w]
            also = f" (with {', '.join(others)} also in force)" if others else ""
            violations.append(_violation(w, within_s, side, also))
    stats = {"windows": len(reach), "judged": len(reach) - not_judged, "not_judged_no_majority": not_judged,
             "within_s": within_s}
    return result(violations, RULES, stats=stats)


def _violation(w: FaultWindow, within_s: float, side: list[str], also: str) -> Violation:
    return Violation("Unavailable",
                     f"{w.opener or w.kind} at {w.start / 1e9:.1f} s{also} left a majority side "
                     f"{', '.join(side)}, but no client operation on it succeeded within {within_s:g} s")
