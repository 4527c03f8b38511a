"""After the final heal: does the cluster come back? Recovery as a judged property (Jepsen's
"the system recovers after faults are healed"), not a precondition of the run.

`wait_recovered` restarts what is down, then watches the cluster until it is healthy (a quorum
leader, every broker registered, unfenced and answering) and every node has applied the metadata
log up to the high-water mark seen at the heal — or until the recovery bound passes. It never
raises for the cluster's sake: what it saw goes to `recovery.json` (the `recovery` checker judges
it, docs/contracts.md) and the final reads run either way, so a cluster that does not come back is
a finding (exit 1) and only a failure of kraftlab itself ends a run with 255.

The bound is derived from the node's timeouts (`recovery_bound`) unless `--recovery-time` sets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kraftlab.nemesis.package import Timing
from kraftlab.scrape import HW, applied_offsets

RECOVERY_FILE = "recovery.json"
CATCH_UP_MARGIN_S = 10.0


def recovery_bound(timing: Timing) -> float:
    """Seconds a healed cluster gets to be healthy and caught up: two failovers (the first election
    after the heal may split), a broker's fence-and-return (a fenced or self-fenced broker
    re-registers, heartbeats and is unfenced), and a margin for restarted nodes to start and load
    their logs and snapshots."""
    return round(2 * timing.failover_s + timing.fence_s + CATCH_UP_MARGIN_S, 1)


class HealthSource(Protocol):
    """What recovery needs of a deployment (kraftlab.deploy.Deployment)."""

    def nodes(self) -> list[str]: ...

    def running(self, node: str) -> bool: ...

    def start(self, node: str) -> None: ...

    def health(self) -> tuple[bool, str]: ...

    def describe_failure(self, node: str) -> str: ...

    def fatal_errors(self, nodes: list[str]) -> dict[str, str]: ...


@dataclass
class Recovery:
    bound_s: float
    healthy: bool = False
    caught_up: bool = False
    seconds_to_healthy: float | None = None
    seconds_to_caught_up: float | None = None
    goal_offset: float | None = None
    why: str = "not checked"
    timeline: list[dict[str, Any]] = field(default_factory=list)
    """[{"t": seconds after the heal, "status": why}] each time the status changed."""
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per node at the end: running, applied offset, fatal error, and (if it did not recover) the
    last lines of its log."""
    restarted: list[str] = field(default_factory=list)
    started_at_ns: int | None = None
    """History time (ns since test start) of the heal's end, for the report's timeline."""

    @property
    def recovered(self) -> bool:
        return self.healthy and self.caught_up

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recovered": self.recovered}


def wait_recovered(dep: HealthSource, samples: Callable[[], list[dict[str, Any]]], bound_s: float, *,
                   history_now: Callable[[], int] | None = None, poll: float = 0.2,
                   monotonic: Callable[[], float] = time.monotonic) -> Recovery:
    """Watch the healed cluster for at most `bound_s` seconds (see the module docstring)."""
    rec = Recovery(bound_s, started_at_ns=history_now() if history_now else None)
    start = monotonic()
    deadline = start + bound_s
    for node in dep.nodes():
        if not dep.running(node):
            dep.start(node)
            rec.restarted.append(node)
    goal: float | None = None
    applied: dict[str, float] = {}
    while True:
        now = monotonic()
        healthy, why = dep.health()
        if not rec.timeline or rec.timeline[-1]["status"] != why:
            rec.timeline.append({"t": round(now - start, 3), "status": why})
        if healthy and rec.seconds_to_healthy is None:
            rec.healthy, rec.seconds_to_healthy = True, round(now - start, 3)
        current = samples()
        if goal is None:  # the HW when the heal ended: later writes (no-op records) do not move it
            goal = max((s["metrics"][HW] for s in current if HW in s["metrics"]), default=None)
        applied.update(applied_offsets(current))
        behind = [n for n in dep.nodes() if goal is None or applied.get(n, -1.0) < goal]
        if rec.healthy and not behind:
            rec.caught_up, rec.seconds_to_caught_up = True, round(now - start, 3)
            rec.why = why
            break
        if now >= deadline:
            rec.why = why if not rec.healthy else f"healthy, but not caught up to offset {goal}: {behind}"
            break
        time.sleep(poll)
    rec.goal_offset = goal
    running = {n: dep.running(n) for n in dep.nodes()}
    fatal = dep.fatal_errors([n for n, up in running.items() if up])
    for node in dep.nodes():
        entry: dict[str, Any] = {"running": running[node], "applied_offset": applied.get(node)}
        if node in fatal:
            entry["fatal"] = fatal[node]
        if not rec.recovered and (not running[node] or node in fatal or applied.get(node, -1.0) < (goal or 0)):
            entry["log_tail"] = dep.describe_failure(node)
        rec.nodes[node] = entry
    return rec
