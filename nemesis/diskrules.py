"""Rules on the disk-fault filesystem (kraftlab.nemesis.diskfs) of running nodes: a slow disk whose
fsyncs are delayed.

A slow disk alone stretches every commit; around a kill it is what makes the kill's power loss
(nemesis.powerloss) catch data: the correct node fsyncs within milliseconds of a write, so a kill
seldom lands while anything is un-fsynced, but with each fsync held for a few hundred milliseconds
the node always has writes in flight. So the `slow-disk` package encloses each `kill` window of the
run (the schedule places it: `Package.around`): the delay starts shortly before the kill and ends
when the node is restarted; without the kill package in the run it draws a lane of its own.

A node control offers the rules through `DiskRules` (a deployment on the filesystem,
`kraftlab test --diskfs`); elsewhere the operations fail as unsupported, and generated schedules
leave the package out (`Cluster.diskfs`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kraftlab.control.host import HostError
from kraftlab.nemesis.context import FaultContext, check_outcomes
from kraftlab.nemesis.errors import Unsupported
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Around, Cluster, Draw, FaultKind, Package, Timing, pick, span
from kraftlab.nemesis.process import resolve_nodes

STATE = "disk_rules"


@runtime_checkable
class DiskRules(Protocol):
    def on_diskfs(self) -> bool:
        """The nodes' data directories are on the disk-fault filesystem."""
        ...

    def disk_request(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        """One control request to the node's filesystem (`delay`, `fail`, `clear`, `status`)."""
        ...


def on_diskfs(control: object) -> bool:
    """Whether a node control can put rules on its nodes' disks."""
    return isinstance(control, DiskRules) and control.on_diskfs()


class DiskRulesFault:
    kind = "disk-rules"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng

    def operations(self) -> dict[str, Handler]:
        return {"start-slow-disk": self.slow, "stop-slow-disk": self.stop_slow}

    def _disks(self) -> DiskRules:
        control = self.ctx.control
        if not isinstance(control, DiskRules) or not control.on_diskfs():
            raise Unsupported("the nodes' data is not on the disk-fault filesystem (run with --diskfs)")
        return control

    def _each(self, nodes: list[str], request: dict[str, Any]) -> dict[str, Any]:
        disks = self._disks()

        def ask(node: str) -> dict[str, Any]:
            answer = disks.disk_request(node, request)
            if not answer.get("ok"):
                raise HostError(f"{node}: the filesystem refused {request}: {answer.get('error')}")
            return answer

        outcomes = self.ctx.call_each(nodes, ask)
        return check_outcomes(outcomes, {"nodes": [n for n, o in outcomes.items() if o.ok]})

    def slow(self, value: dict[str, Any]) -> dict[str, Any]:
        """Delay every fsync (file or directory) on the nodes' disks by `ms` milliseconds."""
        ms, glob = int(value.get("ms", 200)), str(value.get("glob", "*"))
        if ms <= 0:
            raise Unsupported(f"a slow disk needs a positive delay, not ms={ms}")
        self._disks()
        nodes = resolve_nodes(self.ctx, value, self.rng)
        # intent first: a run killed now still knows which disks to clear
        self.ctx.state.merge(STATE, {n: {"host": self.ctx.host(n).name, "slow_ms": ms} for n in nodes})
        self._each(nodes, {"cmd": "delay", "glob": glob, "ms": ms})
        return {"nodes": nodes, "ms": ms, "glob": glob}

    def stop_slow(self, value: dict[str, Any]) -> dict[str, Any]:
        in_force = self.ctx.state.get(STATE)
        nodes = sorted(n for n, e in in_force.items() if "slow_ms" in e)
        if not nodes:
            return {"nodes": []}
        self._each(nodes, {"cmd": "clear", "rules": "delay"})
        self.ctx.state.remove(STATE, nodes)
        return {"nodes": nodes}

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        return [("stop-slow-disk", {})] if self.ctx.state.get(STATE) else []

    def close(self) -> None:
        pass


# ---- the package: a slow disk around each kill ------------------------------------------------------

def _slow_modes(cluster: Cluster) -> list[tuple[str, float]]:
    return [("target", 2.0), ("every-node", 1.0)] if cluster.diskfs else []


def _delay_ms(rng: random.Random) -> int:
    """Long enough that a write waits for its fsync a good while, short of an election timeout."""
    return int(rng.uniform(100, 600))


def draw_slow(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _slow_modes(cluster), enabled)
    ms = _delay_ms(rng)
    who: dict[str, Any] = {"target": "controller"} if mode == "target" else {"nodes": list(cluster.nodes)}
    what = "the active controller's" if mode == "target" else "every node's"
    return Draw("start-slow-disk", {**who, "ms": ms}, span(rng, timing.failover_s, timing.failover_s + 5),
                f"{what} fsyncs held {ms} ms: commits stretch, nothing may be acknowledged early", mode)


def draw_around_kill(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str],
                     kill: Mapping[str, Any]) -> Draw:
    """A slow disk opened shortly before a kill (the window's `duration` is that lead): on the
    nodes the kill names (`target`) or on every node."""
    mode = pick(rng, _slow_modes(cluster), enabled)
    ms = _delay_ms(rng)
    if mode == "target":
        who = {k: kill[k] for k in ("nodes", "target") if k in kill}
    else:
        who = {"nodes": list(cluster.nodes)}
    return Draw("start-slow-disk", {**who, "ms": ms}, span(rng, 0.3, 1.5),
                f"fsyncs held {ms} ms on {'the nodes about to be killed' if mode == 'target' else 'every node'}: "
                "the power loss catches writes not yet durable, which no acknowledgement may have counted on",
                mode)


FAULT = FaultKind("disk-rules", DiskRulesFault)
SLOW = Package(
    name="slow-disk", kind="disk-rules", windows={"start-slow-disk": "stop-slow-disk"},
    modes=_slow_modes, draw=draw_slow, gap_s=lambda t: 2 * t.failover_s,
    around=Around("kill", draw_around_kill),
    doc="fsyncs delayed on the disk-fault filesystem (--diskfs) around each kill, so its power loss drops "
        "un-fsynced writes (a lane of its own without kill)",
)
