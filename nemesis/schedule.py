"""Nemesis packages and their seeded schedules, like Jepsen's nemesis packages.

`--nemesis partition,kill,pause,clock,packet,disk` (or `none`, `all`) names the packages. A
schedule is a list of timed steps; every random choice is made here, from the seed, and written
into the step's value (the active controller is the one thing resolved when the step fires), so
saving the schedule with the run and replaying it against a lab repeats the same faults. Each
package alternates start and stop; the runner's final phase heals everything.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.nemesis import grudge, targets
from kraftlab.nemesis.disk import DAMAGES
from kraftlab.nemesis.packet import PACKET_KINDS

PACKAGES: tuple[str, ...] = ("partition", "kill", "pause", "clock", "packet", "disk")
SCHEDULE_FILE = "nemesis-schedule.json"
STOPS: dict[str, tuple[str, dict[str, Any]]] = {
    "partition": ("stop-partition", {}),
    "kill": ("restart", {}),
    "pause": ("resume", {}),
    "clock": ("clock-reset", {}),
    "packet": ("stop-packet", {}),
    "disk": ("stop-disk", {}),
}
_PROCESS_TARGETS = ("one", "minority", "majority", "all", "controller", "brokers")


class ScheduleError(ValueError):
    """A bad package list or schedule file (says why)."""


def parse_packages(spec: str) -> list[str]:
    """`partition,kill` → ["partition", "kill"]; `none` → []; `all` → every package."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        raise ScheduleError(f"unknown nemesis {', '.join(unknown)}; known: none, all, {', '.join(PACKAGES)}")
    return list(dict.fromkeys(names))


@dataclass(frozen=True, slots=True)
class Step:
    at: float  # seconds after the schedule starts
    package: str
    f: str
    value: dict[str, Any]


@dataclass
class Schedule:
    seed: int
    interval: float
    duration: float
    packages: list[str]
    nodes: list[str]
    controllers: list[str]
    brokers: list[str]
    steps: list[Step] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, **asdict(self)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Schedule:
        if data.get("version") != 1:
            raise ScheduleError(f"unsupported schedule version {data.get('version')!r}")
        steps = [Step(float(s["at"]), s["package"], s["f"], dict(s["value"])) for s in data["steps"]]
        return Schedule(int(data["seed"]), float(data["interval"]), float(data["duration"]), list(data["packages"]),
                        list(data["nodes"]), list(data["controllers"]), list(data["brokers"]), steps)


def generate(packages: Sequence[str], *, seed: int, interval: float, duration: float, nodes: Sequence[str],
             controllers: Sequence[str], brokers: Sequence[str]) -> Schedule:
    """Every `interval` seconds until `duration`, one package (chosen from the seed) starts its
    fault, or stops it if it is in force."""
    if interval <= 0:
        raise ScheduleError("--nemesis-interval must be positive")
    rng = random.Random(seed)
    sched = Schedule(seed, interval, duration, list(packages), list(nodes), list(controllers), list(brokers))
    usable = [p for p in packages if p != "disk" or _observers(sched)]  # disk faults hit broker-only nodes
    active: set[str] = set()
    at = interval
    while usable and at < duration:
        package = rng.choice(usable)
        if package in active:
            f, value = STOPS[package]
            active.discard(package)
        else:
            f, value = _start(package, rng, sched)
            active.add(package)
        sched.steps.append(Step(round(float(at), 3), package, f, dict(value)))
        at += interval
    return sched


def _start(package: str, rng: random.Random, s: Schedule) -> tuple[str, dict[str, Any]]:
    match package:
        case "partition":
            return "start-partition", {"topology": rng.choice(_topologies(s)), "seed": rng.randrange(2**31)}
        case "kill":
            return ("kill" if rng.random() < 0.8 else "graceful-stop"), _targets(rng, s, _PROCESS_TARGETS)
        case "pause":
            return "pause", _targets(rng, s, _PROCESS_TARGETS)
        case "clock":
            who = _targets(rng, s, ("one", "minority", "controller"))
            kind = rng.choice(("bump", "strobe", "rate"))
            if kind == "bump":
                return "clock-bump", {**who, "delta_ms": float(rng.choice((-1, 1)) * rng.randint(100, 120_000))}
            if kind == "strobe":
                return "clock-strobe", {**who, "low_ms": 0.0, "high_ms": float(rng.randint(100, 10_000)),
                                        "period_ms": float(rng.randint(100, 500))}
            return "clock-rate", {**who, "rate": rng.choice((0.5, 0.8, 1.25, 2.0))}
        case "packet":
            kind = rng.choice(PACKET_KINDS)
            value: dict[str, Any] = {"kind": kind, "target": "all"}
            if kind == "loss":
                value["probability"] = rng.choice((0.05, 0.1, 0.2, 0.3))
            elif kind == "bandwidth":
                value["rate"] = rng.choice(("256kbit", "1mbit", "10mbit"))
            return "start-packet", value
        case "disk":
            # Raft assumes stable storage on voters: a voter that loses fsynced entries (a cut tail) or
            # its quorum-state may help elect a leader without committed data or vote twice in an
            # epoch, and one with damage below its high-water mark must refuse to start. Either way a
            # correct node would be judged by a fault outside its model, so generated schedules damage
            # broker-only nodes (observers), whose logs can be rebuilt from the quorum; damaging a
            # voter stays possible by hand (`kraftlab nemesis start-disk --nodes n1`).
            damage = rng.choice(DAMAGES)
            return "start-disk", {"nodes": [rng.choice(_observers(s))], "damage": damage, "seed": rng.randrange(2**31)}
    raise ScheduleError(f"unknown package {package!r}")


def _observers(s: Schedule) -> list[str]:
    return [b for b in s.brokers if b not in s.controllers]


def _topologies(s: Schedule) -> list[str]:
    usable = ["halves", "random-halves", "isolate-node", "isolate-controller", "bridge", "one-way"]
    if len(s.controllers) >= 2:
        usable.append("minority-controllers")
    if len(s.nodes) >= 4:
        usable.append("majorities-ring")
    if [b for b in s.brokers if b not in s.controllers] and s.controllers:
        usable.append("controllers-brokers")
    return [t for t in grudge.TOPOLOGIES if t in usable]


def _targets(rng: random.Random, s: Schedule, choices: Sequence[str]) -> dict[str, Any]:
    spec = rng.choice(list(choices))
    if targets.is_deferred(spec):
        return {"target": spec}
    nodes = targets.resolve(spec, s.nodes, controllers=s.controllers, brokers=s.brokers, rng=rng)
    return {"nodes": nodes, "chosen_as": spec}


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
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ScheduleError(f"{p}: not a nemesis schedule: {exc}") from None
