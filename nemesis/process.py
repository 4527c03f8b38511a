"""Process faults: SIGKILL + restart, graceful stop (SIGTERM) + restart, SIGSTOP/SIGCONT.

A kill of a node whose data is on the disk-fault filesystem (`kraftlab test --diskfs`) is a power
loss: its disk also drops every write not yet fsynced (nemesis.powerloss), and the kill's result
says what was lost (`lost_unfsynced`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from kraftlab.nemesis import powerloss, targets
from kraftlab.nemesis.context import FaultContext, check_outcomes
from kraftlab.nemesis.errors import FaultError
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, keep_nodes, pick, span


def resolve_nodes(ctx: FaultContext, value: dict[str, Any], rng: random.Random) -> list[str]:
    """The nodes an op value names: `nodes` (a list) or `target` (a spec resolved now)."""
    control = ctx.control
    spec = value.get("target", "list" if "nodes" in value else "one")
    active = ctx.active_controller() if spec == "controller" else None
    try:
        return targets.resolve(spec, control.nodes(), controllers=control.controllers(),
                               brokers=control.brokers(), active=active, rng=rng, listed=value.get("nodes", ()))
    except targets.TargetError as exc:
        raise FaultError(str(exc)) from exc


class ProcessFault:
    kind = "process"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng

    def operations(self) -> dict[str, Handler]:
        return {"kill": self.kill, "graceful-stop": self.graceful_stop, "restart": self.restart,
                "pause": self.pause, "resume": self.resume}

    def _apply(self, value: dict[str, Any], state: str, action: Callable[[str], object],
               extra: dict[str, Any]) -> dict[str, Any]:
        nodes = resolve_nodes(self.ctx, value, self.rng)
        before = self.ctx.state.get("process")
        pids = self.ctx.call_each(nodes, self.ctx.control.pid) if state == "paused" else {}
        entries: dict[str, dict[str, Any]] = {}
        for node in nodes:
            entries[node] = {"state": state, "host": self.ctx.host(node).name}
            if state == "paused":
                entries[node]["pid"] = pids[node].value
        self.ctx.state.merge("process", entries)
        done = {"nodes": nodes, **extra}
        outcomes = self.ctx.call_each(nodes, action)
        failed = [n for n, o in outcomes.items() if not o.ok]
        # back to what was in force before for the failures (a fault already there stays recorded)
        self.ctx.state.remove("process", [n for n in failed if n not in before])
        self.ctx.state.merge("process", {n: before[n] for n in failed if n in before})
        check_outcomes(outcomes, {**done, "nodes": [n for n, o in outcomes.items() if o.ok]})
        return done

    def kill(self, value: dict[str, Any]) -> dict[str, Any]:
        lost: dict[str, Any] = {}

        def kill_one(node: str) -> None:
            dropped = powerloss.crash(self.ctx.control, node)
            if dropped is not None:
                lost[node] = dropped

        done = self._apply(value, "killed", kill_one, {"signal": "SIGKILL"})
        if lost:
            done["lost_unfsynced"] = lost
        return done

    def graceful_stop(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._apply(value, "stopped", lambda n: self.ctx.control.stop(n, graceful=True),
                           {"signal": "SIGTERM"})

    def pause(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._apply(value, "paused", self.ctx.control.pause, {"signal": "SIGSTOP"})

    def _undo(self, value: dict[str, Any], states: tuple[str, ...], action: Callable[[str], object],
              extra: dict[str, Any]) -> dict[str, Any]:
        in_force = self.ctx.state.get("process")
        if "nodes" in value or "target" in value:
            nodes = resolve_nodes(self.ctx, value, self.rng)
        else:
            nodes = [n for n in self.ctx.control.nodes() if in_force.get(n, {}).get("state") in states]
        # already undone (a restarted node runs; a paused node that died cannot be resumed): nothing to do
        if states == ("paused",):  # moot: the paused process is gone (died, or killed and started anew)
            pids = self.ctx.call_each(nodes, self.ctx.control.pid)
            moot = [n for n in nodes if pids[n].value is None
                    or pids[n].value != in_force.get(n, {}).get("pid", pids[n].value)]
        else:  # moot: it runs again already
            running = self.ctx.call_each(nodes, self.ctx.control.running)
            moot = [n for n in nodes if running[n].value]
        self.ctx.state.remove("process", moot)
        todo = [n for n in nodes if n not in moot]
        done: dict[str, Any] = {"nodes": todo, **extra, **({"already": moot} if moot else {})}
        if not todo:
            return done
        outcomes = self.ctx.call_each(todo, action)
        self.ctx.state.remove("process", [n for n, o in outcomes.items() if o.ok])
        check_outcomes(outcomes, {**done, "nodes": [n for n, o in outcomes.items() if o.ok]})
        return done

    def restart(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._undo(value, ("killed", "stopped"), self.ctx.control.start, {})

    def resume(self, value: dict[str, Any]) -> dict[str, Any]:
        return self._undo(value, ("paused",), self.ctx.control.resume, {"signal": "SIGCONT"})

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        in_force = self.ctx.state.get("process")
        ops: list[tuple[str, dict[str, Any]]] = []
        paused = sorted(n for n, e in in_force.items() if e["state"] == "paused")
        down = sorted(n for n, e in in_force.items() if e["state"] in ("killed", "stopped"))
        if paused:
            ops.append(("resume", {"nodes": paused}))
        if down:
            ops.append(("restart", {"nodes": down}))
        return ops

    def close(self) -> None:
        pass


# ---- the packages: kill (always followed by a restart) and pause (always followed by a resume) ----

def _who(rng: random.Random, cluster: Cluster, spec: str) -> dict[str, Any]:
    """The op value naming `spec`'s nodes: the active controller is resolved when the op fires,
    every other choice now (so the schedule records it and a replay repeats it)."""
    if targets.is_deferred(spec):
        return {"target": spec}
    nodes = targets.resolve(spec, list(cluster.nodes), controllers=list(cluster.controllers),
                            brokers=list(cluster.brokers), rng=rng)
    return {"nodes": nodes, "chosen_as": spec}


def _kill_modes(cluster: Cluster) -> list[tuple[str, float]]:
    modes = [("controller", 3.0), ("voter", 2.0)] if cluster.controllers else []
    if cluster.observers:
        modes.append(("broker", 2.0))
    if len(cluster.controllers) >= 3:
        modes += [("minority-voters", 1.0), ("majority-voters", 0.5)]
    modes.append(("all", 0.3))
    return modes


def draw_kill(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _kill_modes(cluster), enabled)
    f = "graceful-stop" if "graceful" in enabled and rng.random() < 0.25 else "kill"
    how = "stopped (controlled shutdown)" if f == "graceful-stop" else "killed"
    match mode:
        case "controller":
            return Draw(f, _who(rng, cluster, mode), span(rng, 0.3, timing.failover_s + 3),
                        f"the active controller {how}, then restarted: a failover", mode)
        case "voter":
            return Draw(f, _who(rng, cluster, mode), span(rng, 0.3, timing.failover_s + 3),
                        f"a voter {how}, then restarted", mode)
        case "broker":
            if rng.random() < 0.5:
                return Draw(f, _who(rng, cluster, mode), span(rng, timing.fence_s, timing.fence_s + 3),
                            f"a broker {how} past its session: fenced, then registers again", mode)
            return Draw(f, _who(rng, cluster, mode), span(rng, 0.3, 3.0), f"a broker {how} briefly", mode)
        case "minority-voters":
            return Draw(f, _who(rng, cluster, mode), span(rng, 1.0, timing.failover_s + 3),
                        f"a minority of voters {how}", mode)
        case "majority-voters":
            return Draw(f, _who(rng, cluster, mode), span(rng, 0.5, 3.0),
                        f"a majority of voters {how}: no quorum for a moment", mode)
    return Draw("kill", _who(rng, cluster, "all"), span(rng, 0.5, 2.5),
                "every node killed at once (a power cut), briefly", mode)


def _pause_modes(cluster: Cluster) -> list[tuple[str, float]]:
    modes = [("controller", 3.0), ("voter", 1.0)] if cluster.controllers else []
    if cluster.observers:
        modes.append(("broker", 2.0))
    if len(cluster.controllers) >= 3:
        modes += [("minority-voters", 1.0), ("majority-voters", 0.7)]
    modes.append(("all", 0.3))
    return modes


def draw_pause(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _pause_modes(cluster), enabled)
    who = _who(rng, cluster, mode)
    if mode == "broker":
        return Draw("pause", who, span(rng, timing.fence_s, timing.fence_s + 3),
                    "a broker paused past its session: fenced while asleep, wakes believing it is not", mode)
    if mode in ("majority-voters", "all"):
        # woken together just past the fetch timeout, their timers expire at once: several
        # candidacies in one epoch (Jepsen pauses majorities too); a few seconds, not a long stop
        return Draw("pause", who, span(rng, timing.fetch_s + 0.2, timing.fetch_s + 1.0),
                    f"{'every node' if mode == 'all' else 'a majority of voters'} paused past the fetch timeout "
                    "and woken together: timers expiring at once, simultaneous candidacies, split votes", mode)
    if rng.random() < 0.3:
        return Draw("pause", who, span(rng, 0.2, 0.8 * timing.fetch_s),
                    "a pause shorter than the fetch timeout: nothing should change", mode)
    what = "the active controller" if mode == "controller" else "a voter" if mode == "voter" else "a minority of voters"
    return Draw("pause", who, span(rng, timing.failover_s, timing.failover_s + 5),
                f"{what} paused past a failover: a zombie that wakes in an old epoch", mode)


FAULT = FaultKind("process", ProcessFault)
KILL = Package(
    leader_modes=("controller",),
    name="kill", kind="process", windows={"kill": "restart", "graceful-stop": "restart"},
    modes=_kill_modes, draw=draw_kill, gap_s=lambda t: 0.6 * t.failover_s, stop_value=keep_nodes,
    flags=("graceful",),
    doc="SIGKILL (or SIGTERM: controlled shutdown) of the active controller, a voter, a broker, a minority "
        "or majority of voters or every node, always followed by a restart",
)
PAUSE = Package(
    leader_modes=("controller",),
    name="pause", kind="process", windows={"pause": "resume"},
    modes=_pause_modes, draw=draw_pause, gap_s=lambda t: t.failover_s, stop_value=keep_nodes,
    doc="SIGSTOP of the active controller, a voter, a broker, a minority or majority of voters or every node, "
        "then SIGCONT",
)
