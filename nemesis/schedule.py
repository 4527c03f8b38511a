"""Seeded fault schedules, like Jepsen's combined nemesis: every package runs its own lane of
fault windows, the lanes overlap, and each window is sized to the system's timeouts.

`--nemesis partition,kill,pause,clock,packet,disk` (or `none`, `all`) names the packages
(`nemesis.packages`). For each seed, swarm testing (Groce et al., ISSTA 2012) keeps a random
subset of those packages and, within each, a random subset of its modes (topologies, targets)
and flags: a run that never isolates the leader may kill it more often, and two seeds exercise
different mixes. Within a lane a package draws a window (what to start, for how long, and why),
then waits a gap and draws the next one; a window that would end after the run is held until the
final heal. Every random choice is made here and written into the steps (only the active
controller is resolved when a step fires), so the saved schedule replays the same faults.

A window's stop undoes exactly what its start did: the runner hands the stop the nodes the start
resolved (`Package.stop_value`), so a kill of the active controller restarts that node.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.nemesis import packages as registry
from kraftlab.nemesis.package import FLAP_GAP_S, Cluster, Timing
from kraftlab.nemesis.packages import PACKAGES, PackageError

SCHEDULE_FILE = "nemesis-schedule.json"
VERSION = 2

__all__ = ["PACKAGES", "SCHEDULE_FILE", "Schedule", "ScheduleError", "Step", "generate", "load", "parse_packages",
           "save"]


class ScheduleError(PackageError):
    """A bad package list or schedule file (says why)."""


@dataclass(frozen=True, slots=True)
class Step:
    at: float  # seconds after the schedule starts
    package: str
    f: str
    value: dict[str, Any]
    window: int | None = None
    """The fault window this step opens or closes (None: a step of its own, e.g. by hand)."""
    purpose: str | None = None
    """Why the window exists ("the active controller cut off: a failover"); on opening steps."""

    @property
    def opens(self) -> bool:
        package = PACKAGES.get(self.package)
        return package is not None and self.f in package.windows

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "package": self.package, "f": self.f, "value": self.value}
        if self.window is not None:
            out["window"] = self.window
        if self.purpose is not None:
            out["purpose"] = self.purpose
        return out


@dataclass
class Schedule:
    seed: int
    interval: float | None
    """Mean seconds between one package's windows (None: each package's own, from the timeouts)."""
    duration: float
    packages: list[str]
    nodes: list[str]
    controllers: list[str]
    brokers: list[str]
    steps: list[Step] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    swarm: dict[str, list[str]] = field(default_factory=dict)
    """The packages this seed kept → the modes and flags it kept (empty: no swarm selection)."""
    quorum: str = "static"
    """`dynamic` when the lab's quorum was dynamic (KIP-853): a replay deploys it so again."""
    spares: list[str] = field(default_factory=list)
    """The dynamic quorum's spare controllers (formatted `--no-initial-controllers`)."""

    def windows(self) -> list[tuple[Step, Step | None]]:
        """Each window's opening step and its closing step (None: held until the final heal)."""
        closing = {s.window: s for s in self.steps if s.window is not None and not s.opens}
        return [(s, closing.get(s.window)) for s in self.steps if s.window is not None and s.opens]

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "seed": self.seed, "interval": self.interval, "duration": self.duration,
                "packages": self.packages, "nodes": self.nodes, "controllers": self.controllers,
                "brokers": self.brokers, "timing": self.timing, "swarm": self.swarm, "quorum": self.quorum,
                "spares": self.spares, "steps": [s.to_json() for s in self.steps]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Schedule:
        version = data.get("version")
        if version not in (1, VERSION):
            raise ScheduleError(f"unsupported schedule version {version!r} (this kraftlab reads 1 and {VERSION})")
        steps = [Step(float(s["at"]), s["package"], s["f"], dict(s["value"]), s.get("window"), s.get("purpose"))
                 for s in data["steps"]]
        interval = data.get("interval")
        return Schedule(int(data["seed"]), float(interval) if interval is not None else None, float(data["duration"]),
                        list(data["packages"]), list(data["nodes"]), list(data["controllers"]),
                        list(data["brokers"]), steps, dict(data.get("timing", {})),
                        {k: list(v) for k, v in data.get("swarm", {}).items()}, str(data.get("quorum", "static")),
                        list(data.get("spares", [])))


def parse_packages(spec: str) -> list[str]:
    """`partition,kill` → ["partition", "kill"]; `none` → []; `all` → every package."""
    try:
        return registry.parse_packages(spec)
    except PackageError as exc:
        raise ScheduleError(str(exc)) from None


def swarm(rng: random.Random, packages: Sequence[str], cluster: Cluster) -> dict[str, list[str]]:
    """The packages (each kept with probability 4/5; at least two when two are usable, and at least
    one that moves leadership when one is named) and, per package, the modes (each kept with
    probability 2/3, at least one, and at least one aimed at the active controller when the package
    has such modes) and flags (1/2) this seed uses."""
    usable = [p for p in packages if PACKAGES[p].modes(cluster)]
    kept = [p for p in usable if rng.random() < 0.8]
    movers = [p for p in usable if PACKAGES[p].moves_leadership]
    if movers and not set(movers) & set(kept):
        kept.append(rng.choice(movers))
    for p in rng.sample(usable, len(usable)):
        if len(kept) >= min(2, len(usable)):
            break
        if p not in kept:
            kept.append(p)
    chosen: dict[str, list[str]] = {}
    for p in usable:
        if p not in kept:
            continue
        modes = [m for m, _ in PACKAGES[p].modes(cluster)]
        on = [m for m in modes if rng.random() < 2 / 3] or [rng.choice(modes)]
        aimed = [m for m in PACKAGES[p].leader_modes if m in modes]
        if aimed and not set(aimed) & set(on):
            on.append(rng.choice(aimed))
        chosen[p] = on + [f for f in PACKAGES[p].flags if rng.random() < 0.5]
    return chosen


def generate(packages: Sequence[str], *, seed: int, duration: float, nodes: Sequence[str],
             controllers: Sequence[str], brokers: Sequence[str], timing: Timing | None = None,
             interval: float | None = None, use_swarm: bool = True, diskfs: bool = False,
             spares: Sequence[str] | None = None) -> Schedule:
    """A combined schedule: one lane of windows per package kept by the swarm, overlapping; a
    package declared `around` another kept one encloses each of its windows instead (`diskfs`: the
    nodes' data is on the disk-fault filesystem, which some packages need; `spares`: the quorum is
    dynamic, these controllers formatted to join it later — None: a static quorum)."""
    if interval is not None and interval <= 0:
        raise ScheduleError("--nemesis-interval must be positive")
    unknown = [p for p in packages if p not in PACKAGES]
    if unknown:
        raise ScheduleError(f"unknown nemesis {', '.join(unknown)}; known: {', '.join(PACKAGES)}")
    timing = timing or Timing()
    cluster = Cluster(tuple(nodes), tuple(controllers), tuple(brokers), diskfs, spares is not None, tuple(spares or ()))
    rng = random.Random(seed)
    if use_swarm:
        chosen = swarm(rng, packages, cluster)
    else:
        chosen = {p: [m for m, _ in PACKAGES[p].modes(cluster)] + list(PACKAGES[p].flags)
                  for p in packages if PACKAGES[p].modes(cluster)}
    sched = Schedule(seed, interval, duration, list(packages), list(nodes), list(controllers), list(brokers),
                     timing=timing.to_json(), swarm=chosen if use_swarm else {},
                     quorum="static" if spares is None else "dynamic", spares=list(spares or ()))
    lanes: list[tuple[Step, Step | None]] = []
    enclosing = {name: PACKAGES[name].around for name in chosen}
    for name, enabled in chosen.items():
        around = enclosing[name]
        if around is None or around.package not in chosen:
            lanes += _lane(name, enabled, seed=seed, duration=duration, cluster=cluster, timing=timing,
                           interval=interval)
    for name, around in enclosing.items():
        if around is not None and around.package in chosen:
            enclosed = [w for w in lanes if w[0].package == around.package]
            lanes += _enclose(name, chosen[name], enclosed, seed=seed, cluster=cluster, timing=timing)
    lanes.sort(key=lambda w: (w[0].at, w[0].package))
    for window, (start, stop) in enumerate(lanes):
        sched.steps.append(Step(start.at, start.package, start.f, start.value, window, start.purpose))
        if stop is not None:
            sched.steps.append(Step(stop.at, stop.package, stop.f, stop.value, window))
    sched.steps.sort(key=lambda s: (s.at, 0 if not s.opens else 1, s.window or 0))
    return sched


def _lane(name: str, enabled: Sequence[str], *, seed: int, duration: float, cluster: Cluster, timing: Timing,
          interval: float | None) -> list[tuple[Step, Step | None]]:
    """A package's own lane: a window, a gap, the next window, until the run's end."""
    package = PACKAGES[name]
    lane = random.Random(f"{seed}/{name}")  # a package's lane does not move when another is added
    gap = interval if interval is not None else package.gap_s(timing)
    at = timing.election_s + lane.uniform(0, gap)  # the first operations meet a healthy cluster
    windows: list[tuple[Step, Step | None]] = []
    while at < duration:
        first = package.draw(lane, cluster, timing, enabled)
        for draw in (first, *first.then):  # a flapping series: its windows back to back
            start = Step(round(at, 3), name, draw.f, dict(draw.value), purpose=draw.purpose)
            end = at + draw.duration
            stop = Step(round(end, 3), name, package.windows[draw.f], {}) if end < duration else None
            windows.append((start, stop))
            at = end + FLAP_GAP_S
            if stop is None or at >= duration:
                break
        at = end + lane.uniform(0.5, 1.5) * gap
    return windows


def _enclose(name: str, enabled: Sequence[str], enclosed: list[tuple[Step, Step | None]], *, seed: int,
             cluster: Cluster, timing: Timing) -> list[tuple[Step, Step | None]]:
    """One window of package `name` around each enclosed window: opened the draw's lead before it
    (never before the previous one closed), closed with it (held to the final heal with it)."""
    package = PACKAGES[name]
    assert package.around is not None
    lane = random.Random(f"{seed}/{name}")
    windows: list[tuple[Step, Step | None]] = []
    free_at = 0.0
    for inner_start, inner_stop in sorted(enclosed, key=lambda w: w[0].at):
        draw = package.around.draw(lane, cluster, timing, enabled, inner_start.value)
        at = round(max(inner_start.at - draw.duration, free_at, 0.0), 3)
        start = Step(at, name, draw.f, dict(draw.value), purpose=draw.purpose)
        stop = Step(inner_stop.at, name, package.windows[draw.f], {}) if inner_stop is not None else None
        windows.append((start, stop))
        if stop is None:
            break
        free_at = stop.at + 0.001
    return windows


def save(schedule: Schedule, run_dir: str | Path) -> Path:
    path = Path(run_dir) / SCHEDULE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schedule.to_json(), indent=1), encoding="utf-8")
    return path


def load(path: str | Path) -> Schedule:
    """Read a schedule from its file, or from a run directory holding `nemesis-schedule.json`."""
    p = Path(path)
    if p.is_dir():
        p = p / SCHEDULE_FILE
    try:
        return Schedule.from_json(json.loads(p.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ScheduleError(f"no nemesis schedule at {p}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ScheduleError):
            raise
        raise ScheduleError(f"{p}: not a nemesis schedule: {exc}") from None
