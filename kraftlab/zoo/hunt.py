"""The end-to-end hunt: for each planted bug, its plan (kraftlab.zoo.plans) run as real tests
(`kraftlab.runner.run_test`) of bounded length, repeated with new seeds until a checker finds the
bug or the bug's budget runs out; then a clean control run that must come out valid.

The node refuses the bug switch unless `kraftlab.unsafe.test.mode=true` (node/config.py); the
zoo sets both keys. `ZooRunner` is the seam to the runner.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kraftlab.deploy import DEFAULT_TOPOLOGY
from kraftlab.nemesis.schedule import save
from kraftlab.runner import TestOptions
from kraftlab.zoo.plans import CONTROL, PLANS, Plan
from kraftlab.zoo.recipes import targeted


class ZooRunner(Protocol):
    """Runs one test: (exit code, run directory holding results.json)."""

    def __call__(self, opts: TestOptions) -> tuple[int, Path]: ...


def real_runner(opts: TestOptions) -> tuple[int, Path]:
    from kraftlab.runner import run_test

    code, run = run_test(opts)
    return code, run.path


@dataclass(slots=True)
class Attempt:
    seed: int
    code: int
    run_dir: Path
    seconds: float
    found_by: list[str]
    verdict_s: float | None = None
    """Seconds from the attempt's start until its verdict (results.json) was written; the report
    rendered after it is not part of detection."""


def attempt_line(bug: str, a: Attempt) -> str:
    """One progress line: what an attempt (or the control, `bug` "control") came to."""
    if a.found_by:
        outcome = f"{'INVALID' if bug == 'control' else 'found'} by {','.join(a.found_by)}"
    else:
        outcome = ("valid" if a.code == 0 else f"exit {a.code}") if bug == "control" else f"not found (exit {a.code})"
    verdict = f" (verdict at {a.verdict_s:.0f} s)" if a.verdict_s is not None else ""
    return f"{bug} seed {a.seed}: {outcome} in {a.seconds:.0f} s{verdict} — {a.run_dir}"


@dataclass(slots=True)
class BugResult:
    bug: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return any(a.found_by for a in self.attempts)

    @property
    def found_by(self) -> list[str]:
        return next((a.found_by for a in self.attempts if a.found_by), [])

    @property
    def time_to_detection(self) -> float | None:
        """Wall seconds from the first attempt's start until the finding attempt's verdict: every
        earlier attempt whole, then the finding one up to its results.json."""
        total = 0.0
        for a in self.attempts:
            if a.found_by:
                return total + (a.verdict_s if a.verdict_s is not None else a.seconds)
            total += a.seconds
        return None

    @property
    def run_dir(self) -> Path | None:
        hit = [a for a in self.attempts if a.found_by] or self.attempts[-1:]
        return hit[0].run_dir if hit else None


def failed_checkers(run_dir: Path) -> list[str]:
    """The checkers whose verdict in `results.json` is false (empty when valid, unknown or missing)."""
    try:
        results: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return []
    if results.get("valid") is not False:
        return []
    found = sorted(name for name, r in results.get("checkers", {}).items()
                   if isinstance(r, dict) and r.get("valid") is False)
    return found or ["results"]


def options_for(base: TestOptions, bug: str | None, plan: Plan, seed: int, attempt_s: float) -> TestOptions:
    config = {**base.config, **plan.config}
    if bug is not None:
        config["kraftlab.unsafe.bug"] = bug
    if any(k.startswith("kraftlab.unsafe.") for k in config):  # the node refuses them outside test mode
        config["kraftlab.unsafe.test.mode"] = "true"
    name = f"zoo-{bug or 'control'}"
    return replace(base, workload=plan.workload, nemesis=plan.nemesis, seed=seed, time_limit=attempt_s,
                   config=config, name=name, diskfs=base.diskfs or plan.diskfs)


@contextlib.contextmanager
def scheduled(opts: TestOptions, plan: Plan) -> Iterator[TestOptions]:
    """`opts` as they are, or, for a targeted plan, replaying the recipe's schedule for this seed
    (written to a temporary directory for the run; the run keeps its own copy)."""
    if plan.recipe is None:
        yield opts
        return
    schedule = targeted(plan.recipe, seed=opts.seed or 0, duration=opts.time_limit, nodes=opts.nodes,
                        topology=opts.topology or DEFAULT_TOPOLOGY)
    folder = Path(tempfile.mkdtemp(prefix="kraftlab-zoo-"))
    try:
        save(schedule, folder)
        yield replace(opts, replay_nemesis=str(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_one(runner: ZooRunner, opts: TestOptions, plan: Plan) -> Attempt:
    """One attempt: run it, read which checkers failed and when the verdict was written."""
    started, wall = time.monotonic(), time.time()
    with scheduled(opts, plan) as ready:
        code, run_dir = runner(ready)
    seconds = time.monotonic() - started
    try:
        verdict_s: float | None = min(seconds, max(0.0, (run_dir / "results.json").stat().st_mtime - wall))
    except OSError:
        verdict_s = None
    return Attempt(opts.seed or 0, code, run_dir, seconds, failed_checkers(run_dir), verdict_s)


def hunt(bug: str, base: TestOptions, runner: ZooRunner, *, attempt_s: float | None, budget_s: float, seed: int,
         on_attempt: Callable[[str, Attempt], None] | None = None) -> BugResult:
    """Attempts with seeds `seed`, `seed + 1`, … until a checker finds `bug` or `budget_s` is spent;
    each runs `attempt_s` seconds of workload (None: the plan's)."""
    result = BugResult(bug)
    spent = 0.0
    while spent < budget_s:
        plan = PLANS[bug]
        limit = plan.attempt_s if attempt_s is None else attempt_s
        opts = options_for(base, bug, plan, seed + len(result.attempts), min(limit, budget_s - spent))
        attempt = run_one(runner, opts, plan)
        spent += attempt.seconds
        result.attempts.append(attempt)
        if on_attempt is not None:
            on_attempt(bug, attempt)
        if attempt.found_by:
            break
    return result


@dataclass(slots=True)
class ZooReport:
    bugs: list[BugResult]
    control: Attempt | None

    @property
    def ok(self) -> bool:
        control_ok = self.control is None or (self.control.code == 0 and not self.control.found_by)
        return control_ok and all(b.found for b in self.bugs)

    def table(self) -> str:
        rows = [("bug", "found?", "found by", "time to detection", "attempts", "run directory")]
        for b in self.bugs:
            ttd = b.time_to_detection
            crashed = sum(1 for a in b.attempts if a.code == 255)  # a crashed run is no finding, but say so
            missed = f"NO ({crashed} crashed)" if crashed else "NO"
            rows.append((b.bug, "yes" if b.found else missed, ",".join(b.found_by) or "-",
                         f"{ttd:.0f} s" if ttd is not None else "-", str(len(b.attempts)), str(b.run_dir or "-")))
        if self.control is not None:
            c = self.control
            verdict = "valid" if c.code == 0 else f"exit {c.code}"
            rows.append(("(control: no bug)", verdict, ",".join(c.found_by) or "-", f"{c.seconds:.0f} s", "1",
                         str(c.run_dir)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def select(names: Sequence[str], shard: tuple[int, int] | None) -> list[str]:
    """The bugs to run: `names` (validated), or one shard `(k, n)` of them (every n-th from k) for CI rotation."""
    unknown = [n for n in names if n not in PLANS]
    if unknown:
        raise ValueError(f"unknown bug(s) {', '.join(unknown)}; known: {', '.join(PLANS)}")
    chosen = list(names) or list(PLANS)
    if shard is not None:
        k, n = shard
        if not 0 <= k < n:
            raise ValueError(f"shard {k}/{n}: need 0 <= k < n")
        chosen = chosen[k::n]
    return chosen


def run_zoo(bugs: Sequence[str], base: TestOptions, runner: ZooRunner, *, attempt_s: float | None, budget_s: float,
            seed: int, control: bool = True,
            on_attempt: Callable[[str, Attempt], None] | None = None) -> ZooReport:
    results = [hunt(b, base, runner, attempt_s=attempt_s, budget_s=budget_s, seed=seed, on_attempt=on_attempt)
               for b in bugs]
    clean: Attempt | None = None
    if control:
        clean = control_run(base, runner, attempt_s=attempt_s, seed=seed)
        if on_attempt is not None:
            on_attempt("control", clean)
    return ZooReport(results, clean)


def control_run(base: TestOptions, runner: ZooRunner, *, attempt_s: float | None, seed: int,
                plan: Plan = CONTROL) -> Attempt:
    """One clean run (no bug) of the control plan, or of another plan: any failed checker is a false alarm."""
    limit = plan.attempt_s if attempt_s is None else attempt_s
    return run_one(runner, options_for(base, None, plan, seed, limit), plan)
