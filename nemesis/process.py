"""Process faults: SIGKILL + restart, graceful stop (SIGTERM) + restart, SIGSTOP/SIGCONT.

A kill of a node started with `kraftlab.unsafe.lose.unflushed=true` also loses the writes the node
had not fsynced (the node keeps them in process memory in that mode), which emulates a power loss
of the page cache: the nemesis only sends SIGKILL; the node's storage makes the loss real.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kraftlab.nemesis import targets
from kraftlab.nemesis.context import FaultContext, check_outcomes
from kraftlab.nemesis.errors import FaultError
from kraftlab.nemesis.fault import Handler


def resolve_nodes(ctx: FaultContext, value: dict[str, Any], rng: random.Random) -> list[str]:
    """The nodes an op value names: `nodes` (a list) or `target` (a spec resolved now)."""
    control = ctx.control
    spec = value.get("target", "list" if "nodes" in value else "one")
    active = control.active_controller() if spec == "controller" else None
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
        return self._apply(value, "killed", self.ctx.control.kill, {"signal": "SIGKILL"})

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
