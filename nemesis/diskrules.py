"""Rules on the disk-fault filesystem (kraftlab.nemesis.diskfs) of running nodes: a slow disk whose
fsyncs are delayed, and a failing disk whose writes, fsyncs or creates return EIO or ENOSPC.

A slow disk alone stretches every commit; around a kill it is what makes the kill's power loss
(nemesis.powerloss) catch data: the correct node fsyncs within milliseconds of a write, so a kill
seldom lands while anything is un-fsynced, but with each fsync held for a few hundred milliseconds
the node always has writes in flight. So the `slow-disk` package encloses each `kill` window of the
run (the schedule places it: `Package.around`): the delay starts shortly before the kill and ends
when the node is restarted; without the kill package in the run it draws a lane of its own.

A failing disk (`disk-errors`) must make the node stop or refuse, never serve or acknowledge what it
failed to write (as Kafka halts on a failed metadata log directory). A window that fails reads also
crashes its node and starts it on the failing disk, since the reads a node surely makes are those of
its recovery (a running one serves its logs' batches mostly from memory). Its window's stop hands the
errors the filesystem actually returned to the history (`injected`, with the host's unskewed clock,
for checker.diskerrors) and starts again the nodes that stopped on them.

A node control offers the rules through `DiskRules` (a deployment on the filesystem,
`kraftlab test --diskfs`); elsewhere the operations fail as unsupported, and generated schedules
leave the package out (`Cluster.diskfs`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kraftlab.control.host import HostError
from kraftlab.nemesis.context import FaultContext, check_outcomes
from kraftlab.nemesis.errors import Unsupported
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Around, Cluster, Draw, FaultKind, Package, Timing, pick, span
from kraftlab.nemesis.process import resolve_nodes

STATE = "disk_rules"
WRITE_OPS = frozenset({"write", "fsync", "create"})
STOPPING_OPS = WRITE_OPS | {"read"}
"""Operations whose failure the node must stop on (a read too: it must not answer from a log it
cannot read)."""
EXIT_WATCH_S = 8.0
"""How long a node that met a write error gets to exit before the window's stop looks (the node halts
within 5 s of a failure; a NodeControl may say otherwise with `startup_watch_s`)."""


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
        return {"start-slow-disk": self.slow, "stop-slow-disk": self.stop_slow,
                "start-disk-errors": self.errors, "stop-disk-errors": self.stop_errors}

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

    def _forget(self, nodes: list[str], what: str) -> None:
        """The nodes' `what` rules are gone (a node with no rule left leaves the state)."""
        def drop(entries: dict[str, Any]) -> None:
            for n in nodes:
                entries[n].pop(what, None)
                if set(entries[n]) == {"host"}:
                    del entries[n]

        self.ctx.state.update(STATE, drop)

    def slow(self, value: dict[str, Any]) -> dict[str, Any]:
        """Delay every fsync (file or directory) on the nodes' disks by `ms` milliseconds."""
        ms, glob = int(value.get("ms", 200)), str(value.get("glob", "*"))
        if ms <= 0:
            raise Unsupported(f"a slow disk needs a positive delay, not ms={ms}")
        self._disks()
        nodes = resolve_nodes(self.ctx, value, self.rng)
        # intent first: a run killed now still knows which disks to clear
        self.ctx.state.merge(STATE, {n: {**self.ctx.state.get(STATE).get(n, {"host": self.ctx.host(n).name}),
                                         "slow_ms": ms} for n in nodes})
        self._each(nodes, {"cmd": "delay", "glob": glob, "ms": ms})
        return {"nodes": nodes, "ms": ms, "glob": glob}

    def stop_slow(self, value: dict[str, Any]) -> dict[str, Any]:
        in_force = self.ctx.state.get(STATE)
        nodes = sorted(n for n, e in in_force.items() if "slow_ms" in e)
        if not nodes:
            return {"nodes": []}
        self._each(nodes, {"cmd": "clear", "rules": "delay"})
        self._forget(nodes, "slow_ms")
        return {"nodes": nodes}

    def errors(self, value: dict[str, Any]) -> dict[str, Any]:
        """Fail the chosen operations (`ops`, default write and fsync) on matching files (`glob`) with
        `errno` (EIO or ENOSPC), each with `probability`, on the nodes' disks. With `restart`, each
        node (running, held down by no other fault) is then crashed and started on the failing disk,
        so the reads of its recovery (segments, snapshots, checkpoints, quorum-state) meet it: a
        running node reads little (its logs' batches are mostly served from memory)."""
        rule = {"ops": list(value.get("ops", ["write", "fsync"])), "glob": str(value.get("glob", "*")),
                "errno": str(value.get("errno", "EIO")), "probability": float(value.get("probability", 1.0))}
        self._disks()
        nodes = resolve_nodes(self.ctx, value, self.rng)
        self.ctx.state.merge(STATE, {n: {**self.ctx.state.get(STATE).get(n, {"host": self.ctx.host(n).name}),
                                         "errors": rule} for n in nodes})
        self._each(nodes, {"cmd": "fail", **rule})
        if not value.get("restart"):
            return {"nodes": nodes, **rule}
        control = self.ctx.control
        held = {**self.ctx.state.get("process"), **self.ctx.state.get("disk")}

        def restart(node: str) -> None:
            control.kill(node)  # a crash, not a power loss: the disk keeps what it holds
            control.start(node)

        outcomes = self.ctx.call_each([n for n in nodes if n not in held and control.running(n)], restart)
        done = {"nodes": nodes, **rule, "restarted": [n for n, o in outcomes.items() if o.ok]}
        check_outcomes(outcomes, done)
        return done

    def stop_errors(self, value: dict[str, Any]) -> dict[str, Any]:
        """Clear the error rules, collect the errors each disk returned, and start the nodes that
        stopped on them (not those another fault holds down)."""
        in_force = self.ctx.state.get(STATE)
        nodes = sorted(n for n, e in in_force.items() if "errors" in e)
        if not nodes:
            return {"nodes": [], "injected": {}, "restarted": []}
        self._each(nodes, {"cmd": "clear", "rules": "fail"})
        taken = self._each(nodes, {"cmd": "injected"})
        injected = {n: a["errors"] for n, a in sorted(taken.items()) if a.get("errors")}
        self._forget(nodes, "errors")
        # a node another fault holds down (killed, stopped, paused; damaged on disk) is that fault's to start
        held = {**self.ctx.state.get("process"), **self.ctx.state.get("disk")}
        control = self.ctx.control
        # a node that met an I/O error is on its way out: give it time to exit (a failed node halts
        # within its shutdown bound) so it is started again, not left down once it has gone
        failing = [n for n in nodes if n not in held and any(e.get("op") in STOPPING_OPS
                                                             for e in injected.get(n, ()))]
        deadline = time.monotonic() + float(value.get("watch_s", getattr(control, "startup_watch_s", EXIT_WATCH_S)))
        while any(control.running(n) for n in failing) and time.monotonic() < deadline:
            time.sleep(0.2)
        down = [n for n in nodes if n not in held and not control.running(n)]
        outcomes = self.ctx.call_each(down, control.start)
        done = {"nodes": nodes, "injected": injected, "restarted": [n for n, o in outcomes.items() if o.ok]}
        check_outcomes(outcomes, done)
        return done

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        in_force = self.ctx.state.get(STATE).values()
        ops: list[tuple[str, dict[str, Any]]] = []
        if any("slow_ms" in e for e in in_force):
            ops.append(("stop-slow-disk", {}))
        if any("errors" in e for e in in_force):
            ops.append(("stop-disk-errors", {}))
        return ops

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


# ---- the package: a failing disk ---------------------------------------------------------------------

ERROR_GLOBS = ("*", "*.log", "*quorum-state*", "*checkpoint*")
"""Every file, the log's segments, the quorum-state (and its temporary file), snapshots and the
high-water mark checkpoint."""
ERROR_OPS = (("write",), ("fsync",), ("write", "fsync", "create"), ("read",))
"""A read fails with EIO only (a full disk does not fail reads)."""


def _error_modes(cluster: Cluster) -> list[tuple[str, float]]:
    if not cluster.diskfs:
        return []
    modes = [("controller", 2.0), ("voter", 1.0)] if cluster.controllers else []
    return modes + ([("broker", 1.0)] if cluster.observers else [])


def draw_errors(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _error_modes(cluster), enabled)
    if mode == "controller":
        who: dict[str, Any] = {"target": "controller"}
    else:
        who = {"nodes": [rng.choice(cluster.controllers if mode == "voter" else cluster.observers)],
               "chosen_as": mode}
    errno_name, ops, glob = rng.choice(("EIO", "ENOSPC")), list(rng.choice(ERROR_OPS)), rng.choice(ERROR_GLOBS)
    reads = ops == ["read"]
    if reads:  # the node is restarted onto the failing disk: its recovery reads every file it starts from
        errno_name, who = "EIO", {**who, "restart": True}
    probability = rng.choice((0.05, 0.3, 1.0))
    what = "the active controller" if mode == "controller" else f"a {mode}"
    return Draw("start-disk-errors", {**who, "ops": ops, "glob": glob, "errno": errno_name,
                                      "probability": probability},
                span(rng, 2.0, timing.failover_s + 2),
                f"{errno_name} on {'/'.join(ops)} of {glob} for {what} (p={probability}"
                + ("), restarted onto it: it must stop or refuse to start, never serve from a log it cannot read"
                   if reads else "): it must stop, never serve or acknowledge what it failed to write"), mode)


ERRORS = Package(
    name="disk-errors", kind="disk-rules", windows={"start-disk-errors": "stop-disk-errors"},
    modes=_error_modes, draw=draw_errors, gap_s=lambda t: 2 * t.failover_s,
    doc="EIO or ENOSPC on writes, fsyncs or creates, or EIO on reads, of a node's metadata directory on the "
        "disk-fault filesystem (--diskfs): the node must stop, never serve what it failed to write or could not "
        "read; restarted at the window's end",
)
