"""Clock faults through each node's clock control file: bump, strobe, rate skew, reset; and real
clock steps (`date -s` after stopping time sync) on hosts that have their own kernel."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from kraftlab.nemesis import clockfile, targets
from kraftlab.nemesis.clockfile import ClockSetting
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.errors import FaultError, Unsupported
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, keep_nodes, pick, span
from kraftlab.nemesis.process import resolve_nodes

MAX_OFFSET_MS = 10 * 60 * 1000.0
_SERVICES = ("chrony", "chronyd", "ntp", "ntpsec", "openntpd", "systemd-timesyncd")


class ClockFault:
    kind = "clock"

    def __init__(self, ctx: FaultContext, rng: random.Random, *, local_boot_id: str | None = None) -> None:
        self.ctx = ctx
        self.rng = rng
        self._strobes: dict[str, tuple[threading.Event, threading.Thread]] = {}
        self._local_boot_id = local_boot_id if local_boot_id is not None else _read_local_boot_id()
        self.strobe_errors: dict[str, str] = {}
        self._own_kernel: dict[str, bool] = {}

    def operations(self) -> dict[str, Handler]:
        return {"clock-bump": self.bump, "clock-strobe": self.strobe, "clock-rate": self.rate,
                "clock-reset": self.reset, "clock-step": self.step, "clock-step-reset": self.step_reset}

    # --- the clock control file -------------------------------------------------------------
    def _current(self, node: str) -> ClockSetting:
        entry = self.ctx.state.get("clock").get(node)
        if not entry:
            return ClockSetting()
        return ClockSetting(entry["offset_ms"], entry["rate"], entry["anchor_mono_ns"])

    def _write(self, settings: dict[str, ClockSetting]) -> None:
        self.ctx.state.merge("clock", {n: self._entry(n, s) for n, s in settings.items()})  # intent first
        self.ctx.run_each({n: clockfile.write_command(self.ctx.control.clock_file(n), s)
                           for n, s in settings.items()})
        self.ctx.state.remove("clock", [n for n, s in settings.items() if s.neutral])

    def _entry(self, node: str, s: ClockSetting) -> dict[str, Any]:
        """The persisted record of a node's clock file: enough for `clean` to reset it."""
        return {"host": self.ctx.host(node).name, "path": self.ctx.control.clock_file(node),
                "offset_ms": s.offset_ms, "rate": s.rate, "anchor_mono_ns": s.anchor_mono_ns}

    def _anchor(self, node: str) -> int:
        """The host's CLOCK_MONOTONIC now: ours when it shares our kernel, else read there."""
        if not self.own_kernel(node):
            return time.monotonic_ns()
        result = self.ctx.host(node).run(clockfile.monotonic_command(), check=True)
        return int(result.stdout.strip())

    def bump(self, value: dict[str, Any]) -> dict[str, Any]:
        delta = float(value["delta_ms"])
        if abs(delta) > MAX_OFFSET_MS:
            raise FaultError(f"bump {delta} ms is beyond ±{MAX_OFFSET_MS:.0f} ms")
        nodes = resolve_nodes(self.ctx, value, self.rng)
        self._stop_strobes(nodes)
        settings = {n: ClockSetting(self._current(n).offset_ms + delta, self._current(n).rate,
                                    self._current(n).anchor_mono_ns) for n in nodes}
        self._write(settings)
        return {"nodes": nodes, "delta_ms": delta, "offset_ms": {n: s.offset_ms for n, s in settings.items()}}

    def rate(self, value: dict[str, Any]) -> dict[str, Any]:
        rate = float(value["rate"])
        if not 0.1 <= rate <= 10.0:
            raise FaultError(f"clock rate {rate} is outside [0.1, 10]")
        nodes = resolve_nodes(self.ctx, value, self.rng)
        settings = {n: ClockSetting(self._current(n).offset_ms, rate, self._anchor(n)) for n in nodes}
        self._write(settings)
        return {"nodes": nodes, "rate": rate, "anchor_mono_ns": {n: s.anchor_mono_ns for n, s in settings.items()}}

    def strobe(self, value: dict[str, Any]) -> dict[str, Any]:
        low, high = float(value.get("low_ms", 0.0)), float(value["high_ms"])
        period = float(value.get("period_ms", 200.0))
        if period < 20:
            raise FaultError("strobe period must be at least 20 ms")
        if low == high:
            raise FaultError("a strobe needs two different offsets")
        nodes = resolve_nodes(self.ctx, value, self.rng)
        self._stop_strobes(nodes)
        settings = {n: ClockSetting(high, self._current(n).rate, self._current(n).anchor_mono_ns) for n in nodes}
        self._write(settings)
        strobe = {"low_ms": low, "high_ms": high, "period_ms": period}
        self.ctx.state.merge("clock", {n: {**self._entry(n, s), "strobe": strobe} for n, s in settings.items()})
        for node in nodes:
            stop = threading.Event()
            thread = threading.Thread(target=self._strobe_loop, args=(node, low, high, period / 1000.0, stop),
                                      name=f"nemesis-strobe-{node}", daemon=True)
            self._strobes[node] = (stop, thread)
            thread.start()
        return {"nodes": nodes, "low_ms": low, "high_ms": high, "period_ms": period}

    def _strobe_loop(self, node: str, low: float, high: float, period_s: float, stop: threading.Event) -> None:
        host, path = self.ctx.host(node), self.ctx.control.clock_file(node)
        flip = False
        while not stop.wait(period_s):
            current = self._current(node)
            offset = high if flip else low
            flip = not flip
            result = host.run(clockfile.write_command(path, ClockSetting(offset, current.rate, current.anchor_mono_ns)))
            if not result.ok:
                self.strobe_errors[node] = result.stderr.strip()[-500:]

    def _stop_strobes(self, nodes: list[str]) -> None:
        for node in nodes:
            entry = self._strobes.pop(node, None)
            if entry is not None:
                entry[0].set()
                entry[1].join(timeout=10)

    def reset(self, value: dict[str, Any]) -> dict[str, Any]:
        in_force = self.ctx.state.get("clock")
        nodes = resolve_nodes(self.ctx, value, self.rng) if ("nodes" in value or "target" in value) \
            else sorted(set(in_force) | set(self._strobes))
        self._stop_strobes(nodes)
        if nodes:
            self._write({n: ClockSetting() for n in nodes})
        failed_writes = {n: self.strobe_errors.pop(n) for n in nodes if n in self.strobe_errors}
        return {"nodes": nodes, "offset_ms": 0.0, "rate": 1.0,
                **({"strobe_write_errors": failed_writes} if failed_writes else {})}

    # --- real clock steps --------------------------------------------------------------------
    def own_kernel(self, node: str) -> bool:
        """True when the node's host runs its own kernel (a VM), not ours (namespace, container)."""
        if node not in self._own_kernel:
            result = self.ctx.host(node).run("cat /proc/sys/kernel/random/boot_id")
            self._own_kernel[node] = result.ok and result.stdout.strip() not in ("", self._local_boot_id)
        return self._own_kernel[node]

    def step(self, value: dict[str, Any]) -> dict[str, Any]:
        delta = float(value["delta_s"])
        if abs(delta) * 1000 > MAX_OFFSET_MS:
            raise FaultError(f"clock step {delta} s is beyond ±{MAX_OFFSET_MS / 1000:.0f} s")
        nodes = resolve_nodes(self.ctx, value, self.rng)
        shared = [n for n in nodes if not self.own_kernel(n)]
        if shared:
            raise Unsupported(f"{', '.join(shared)} share this machine's kernel clock; use clock-bump "
                              "(the node's clock file) there")
        for node in nodes:
            self.ctx.state.put("clock_step", node, {"host": self.ctx.host(node).name, "delta_s": delta,
                                                    "services": list(_SERVICES)})
        results = self.ctx.run_each({n: step_command(delta, stop_sync=True) for n in nodes})
        for node in nodes:
            stopped = results[node].stdout.split()
            self.ctx.state.put("clock_step", node, {"host": self.ctx.host(node).name, "delta_s": delta,
                                                    "services": stopped})
        return {"nodes": nodes, "delta_s": delta, "stopped": {n: results[n].stdout.split() for n in nodes}}

    def step_reset(self, value: dict[str, Any]) -> dict[str, Any]:
        in_force = self.ctx.state.get("clock_step")
        nodes = sorted(in_force)
        self.ctx.run_each({n: step_back_command(in_force[n]["delta_s"], in_force[n]["services"]) for n in nodes})
        for node in nodes:
            self.ctx.state.drop("clock_step", node)
        return {"nodes": nodes, "undone_s": {n: -in_force[n]["delta_s"] for n in nodes}}

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        ops: list[tuple[str, dict[str, Any]]] = []
        if self.ctx.state.get("clock") or self._strobes:
            ops.append(("clock-reset", {}))
        if self.ctx.state.get("clock_step"):
            ops.append(("clock-step-reset", {}))
        return ops

    def close(self) -> None:
        self._stop_strobes(list(self._strobes))


def step_command(delta_s: float, *, stop_sync: bool) -> str:
    """Stop time-sync services that run (printing their names), then step the clock by delta."""
    stop = ("for s in " + " ".join(_SERVICES) + "; do if systemctl is-active --quiet $s 2>/dev/null; "
            "then systemctl stop $s && echo $s; fi; done; ") if stop_sync else ""
    return (f"{stop}date -s \"@$(python3 -c 'import time; print(f\"{{time.time() + {delta_s!r}:.6f}}\")')\" "
            ">/dev/null")


def step_back_command(delta_s: float, services: list[str]) -> str:
    start = "".join(f"; systemctl start {s} 2>/dev/null || true" for s in services)
    return step_command(-delta_s, stop_sync=False) + start


def _read_local_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


# ---- the package: skew on one node, a minority or the active controller, for a window ------------

def _clock_modes(cluster: Cluster) -> list[tuple[str, float]]:
    return [("bump", 2.0), ("strobe", 1.0), ("rate", 2.0)]


def draw_clock(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    kind = pick(rng, _clock_modes(cluster), enabled)
    spec = rng.choice(("one", "minority", "controller"))
    who: dict[str, Any] = {"target": spec} if targets.is_deferred(spec) else {
        "nodes": targets.resolve(spec, list(cluster.nodes), controllers=list(cluster.controllers),
                                 brokers=list(cluster.brokers), rng=rng), "chosen_as": spec}
    duration = span(rng, timing.session_s / 2, timing.session_s * 1.5)
    if kind == "bump":
        # up to twice the session: leases, self-fence bounds and timers must use monotonic time
        delta = rng.choice((-1, 1)) * rng.uniform(0.1, 2 * timing.session_s) * 1000
        return Draw("clock-bump", {**who, "delta_ms": round(delta, 1)}, duration,
                    "the wall clock jumps: nothing may depend on it", kind)
    if kind == "strobe":
        return Draw("clock-strobe", {**who, "low_ms": 0.0, "high_ms": float(rng.randint(100, 10_000)),
                                     "period_ms": float(rng.randint(100, 500))}, duration,
                    "the clock flips back and forth", kind)
    return Draw("clock-rate", {**who, "rate": rng.choice((0.5, 0.8, 1.25, 2.0))}, duration,
                "a node's time runs fast or slow: its timeouts fire early or late", kind)


FAULT = FaultKind("clock", ClockFault, options=("local_boot_id",))
PACKAGE = Package(
    name="clock", kind="clock",
    windows={"clock-bump": "clock-reset", "clock-strobe": "clock-reset", "clock-rate": "clock-reset"},
    modes=_clock_modes, draw=draw_clock, gap_s=lambda t: t.session_s / 2, stop_value=keep_nodes,
    extra_windows={"clock-step": "clock-step-reset"},
    doc="clock skew through each node's clock file: bumps, strobes and rate changes (real steps on VMs by hand)",
)
