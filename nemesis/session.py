"""One test run's nemesis, for the runner (`kraftlab test`): build or replay the schedule, save it
into the run directory, record every op into the history, fire the steps in the background, and
heal everything at the end.

    run = prepare_run(lab.name, deployment, packages="partition,kill", interval=10, duration=60,
                      seed=7, run_dir=run_dir, recorder=history_recorder(writer))
    with guarded(run.nemesis):   # heals on exceptions, SIGINT, SIGTERM
        run.start(); …workload…; run.stop()   # stop() ends the schedule and heals
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kraftlab.checker.history import Completion
from kraftlab.nemesis.cleanup import ledger_for
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.diskrules import on_diskfs
from kraftlab.nemesis.package import Timing
from kraftlab.nemesis.packages import PACKAGES
from kraftlab.nemesis.ports import Ledger, NodeControl, OpRecorder, VoterControl
from kraftlab.nemesis.runner import ScheduleRunner
from kraftlab.nemesis.schedule import Schedule, ScheduleError, generate, load, parse_packages, save


def add_run_arguments(parser: argparse.ArgumentParser, *, default: str = "none") -> None:
    """`--nemesis`, `--nemesis-interval`, `--replay-nemesis` for a command that runs a test."""

    def packages(text: str) -> str:
        try:
            parse_packages(text)
        except ScheduleError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    def interval(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return value

    parser.add_argument("--nemesis", type=packages, default=default,
                        help="faults: none, all, or a comma list of " + ",".join(PACKAGES)
                        + " (each seed keeps a random subset of them and of their modes: swarm testing)")
    parser.add_argument("--nemesis-interval", type=interval, default=None, metavar="SECONDS",
                        help="mean seconds between one package's fault windows (default: each package's own, "
                             "derived from the node's timeouts)")
    parser.add_argument("--no-swarm", dest="swarm", action="store_false",
                        help="use every named package and all of its modes in every run (no swarm selection)")
    parser.add_argument("--replay-nemesis", metavar="RUN_DIR",
                        help="replay the nemesis schedule saved in an earlier run's directory")


class HistoryLike(Protocol):
    def record(self, process: int | str, type_: Any, f: str, value: Any = None, *, node: str | None = None,
               error: str | None = None) -> Any: ...


def history_recorder(writer: HistoryLike) -> OpRecorder:
    """An OpRecorder appending to a history writer as process "nemesis"."""

    def record(type_: str, f: str, value: Any = None, *, node: str | None = None, error: str | None = None) -> None:
        writer.record("nemesis", type_, f, value, node=node, error=error)

    return record


def quorum_for(packages: str, replay_from: str | Path | None = None) -> str:
    """The quorum a run deploys: `dynamic` when its packages name `membership` (not merely `all`: a
    lab is made dynamic only on purpose) or the replayed schedule ran on a dynamic quorum."""
    if replay_from is not None:
        return load(replay_from).quorum
    return "dynamic" if "membership" in [p.strip() for p in packages.split(",")] else "static"


def spare_controllers(control: NodeControl) -> list[str] | None:
    """The spare controllers of a lab whose quorum is dynamic (None: a static quorum)."""
    if isinstance(control, VoterControl) and control.dynamic_quorum():
        return control.spare_controllers()
    return None


@dataclass
class NemesisRun:
    nemesis: Nemesis
    schedule: Schedule
    runner: ScheduleRunner
    schedule_path: Path

    def start(self) -> None:
        self.runner.start()

    def stop(self, timeout: float = 120.0) -> list[Completion]:
        """Stop firing steps and heal everything (idempotent); the healing completions."""
        self.runner.stop(timeout)
        return self.runner.healed + self.nemesis.heal_all()


def prepare_run(lab: str, control: NodeControl, *, packages: str, interval: float | None, duration: float,
                seed: int, run_dir: str | Path, recorder: OpRecorder, replay_from: str | Path | None = None,
                ledger: Ledger | None = None, timing: Timing | None = None, swarm: bool = True) -> NemesisRun:
    """A new seeded schedule (or the one saved in `replay_from`), saved as the run's schedule;
    windows are sized to `timing` (the deployed nodes' timeouts)."""
    if replay_from is not None:
        schedule = load(replay_from)
        missing = sorted(set(schedule.nodes) - set(control.nodes()))
        if missing:
            raise ScheduleError(f"the schedule in {replay_from} names nodes this lab lacks: {', '.join(missing)}")
    else:
        controllers = control.controllers()
        schedule = generate(parse_packages(packages), seed=seed, interval=interval, duration=duration,
                            nodes=control.nodes(), controllers=controllers, brokers=control.brokers(),
                            timing=timing, use_swarm=swarm, diskfs=on_diskfs(control),
                            spares=spare_controllers(control))
    path = save(schedule, run_dir)
    nemesis = Nemesis(lab, control, recorder=recorder, ledger=ledger if ledger is not None else ledger_for(lab),
                      seed=schedule.seed, active_wait_s=(timing or Timing()).election_wait_s)
    return NemesisRun(nemesis, schedule, ScheduleRunner(nemesis, schedule), path)
