"""`kraftlab test-all`: a matrix of tests (workloads × nemeses × repeats), a summary table,
JUnit XML for CI systems, and the worst exit code (crashed > unknown > invalid > valid)."""

from __future__ import annotations

import itertools
import json
import statistics
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kraftlab.checker.coverage import headline
from kraftlab.exits import EXIT_BAD_ARGS, EXIT_CRASHED, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID

# exit codes ordered from best to worst, for "exit with the worst result"
SEVERITY = {EXIT_VALID: 0, EXIT_INVALID: 2, EXIT_UNKNOWN: 1, EXIT_BAD_ARGS: 3, EXIT_CRASHED: 4}
VERDICT = {EXIT_VALID: "valid", EXIT_INVALID: "INVALID", EXIT_UNKNOWN: "unknown", EXIT_BAD_ARGS: "bad arguments",
           EXIT_CRASHED: "crashed"}


@dataclass
class MatrixResult:
    workload: str
    nemesis: str
    repeat: int
    exit_code: int
    seconds: float
    run_dir: str | None
    message: str = ""

    @property
    def verdict(self) -> str:
        return VERDICT.get(self.exit_code, f"exit {self.exit_code}")


RunOne = Callable[[str, str, int], tuple[int, str | None, str]]
"""(workload, nemesis, repeat) -> (exit code, run dir, message)."""


def run_matrix(workloads: Sequence[str], nemeses: Sequence[str], test_count: int, run_one: RunOne,
               on_result: Callable[[MatrixResult], None] | None = None) -> list[MatrixResult]:
    results = []
    for workload, nemesis, repeat in itertools.product(workloads, nemeses, range(test_count)):
        t0 = time.monotonic()
        try:
            code, run_dir, message = run_one(workload, nemesis, repeat)
        except Exception as e:  # one crashed cell must not stop the matrix
            code, run_dir, message = 255, None, f"{type(e).__name__}: {e}"
        res = MatrixResult(workload, nemesis, repeat, code, time.monotonic() - t0, run_dir, message)
        results.append(res)
        if on_result:
            on_result(res)
    return results


def worst_code(codes: Iterable[int]) -> int:
    return max(codes, key=lambda c: SEVERITY.get(c, 4), default=0)


def worst_exit(results: Sequence[MatrixResult]) -> int:
    return worst_code(r.exit_code for r in results)


def summary_table(results: Sequence[MatrixResult]) -> Table:
    table = Table(title="kraftlab test-all")
    for col in ("workload", "nemesis", "#", "verdict", "seconds", "run"):
        table.add_column(col)
    for r in results:
        style = {"valid": "green", "INVALID": "red"}.get(r.verdict, "yellow")
        table.add_row(r.workload, r.nemesis, str(r.repeat), f"[{style}]{r.verdict}[/{style}]",
                      f"{r.seconds:.1f}", r.run_dir or r.message)
    return table


def _coverage_of(run_dir: str | None) -> dict[str, Any] | None:
    """A run's results.json `coverage` section, or None without one."""
    if not run_dir:
        return None
    try:
        cov = json.loads((Path(run_dir) / "results.json").read_text(encoding="utf-8")).get("coverage")
    except (OSError, ValueError, AttributeError):
        return None
    return cov if isinstance(cov, dict) else None


def run_coverage(run_dir: str | None) -> dict[str, int | None] | None:
    """A run's headline coverage figures (checker.coverage), or None without a results.json carrying them."""
    cov = _coverage_of(run_dir)
    return headline(cov) if cov is not None else None


def coverage_table(results: Sequence[MatrixResult]) -> Table | None:
    """Coverage summed over the matrix's runs, with the median and the least per run: a nightly
    matrix whose runs stopped reaching failovers or fences says so even when every run is valid."""
    covs = [c for c in (run_coverage(r.run_dir) for r in results) if c is not None]
    if not covs:
        return None
    table = Table(title=f"coverage over {len(covs)} run(s)")
    for col in ("", "total", "median per run", "least per run"):
        table.add_column(col)
    for label in covs[0]:
        values = [v for c in covs if (v := c.get(label)) is not None]
        if values:
            table.add_row(label, str(sum(values)), f"{statistics.median(values):g}", str(min(values)))
    return table


def run_reach(run_dir: str | None) -> dict[str, Any] | None:
    """A run's rule reach (results.json `coverage` → `rules`, checker.reach), or None without one."""
    cov = _coverage_of(run_dir)
    reach = cov.get("rules") if cov is not None else None
    return reach if isinstance(reach, dict) and isinstance(reach.get("rules"), dict) else None


def reach_table(results: Sequence[MatrixResult]) -> Table | None:
    """Rule reach over the matrix: per rule, the opportunities summed, the median and the least per
    run, and in how many runs the rule was not reached (a rule no run reached is judged by nothing)."""
    reaches = [r for r in (run_reach(x.run_dir) for x in results) if r is not None]
    if not reaches:
        return None
    table = Table(title=f"rule reach over {len(reaches)} run(s): opportunities to break each rule")
    for col in ("rule", "total", "median per run", "least per run", "not reached in"):
        table.add_column(col)
    for rule in reaches[0]["rules"]:
        values = [int(r["rules"][rule]) for r in reaches if rule in r["rules"] and rule not in (r.get("unknown") or ())]
        if not values:
            table.add_row(rule, "–", "–", "–", "not countable")
            continue
        zero = sum(v == 0 for v in values)
        table.add_row(rule, str(sum(values)), f"{statistics.median(values):g}", str(min(values)),
                      f"[red]{zero} run(s): not reached[/red]" if zero else "0 runs")
    return table


def print_summary(results: Sequence[MatrixResult], console: Console | None = None) -> None:
    console = console or Console()
    console.print(summary_table(results))
    cov = coverage_table(results)
    if cov is not None:
        console.print(cov)
    reach = reach_table(results)
    if reach is not None:
        console.print(reach)


def write_junit(results: Sequence[MatrixResult], path: Path) -> None:
    suite = ET.Element("testsuite", name="kraftlab", tests=str(len(results)),
                       failures=str(sum(r.exit_code == 1 for r in results)),
                       errors=str(sum(r.exit_code not in (0, 1) for r in results)),
                       time=f"{sum(r.seconds for r in results):.3f}")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"kraftlab.{r.workload}",
                             name=f"{r.workload}-{r.nemesis}-{r.repeat}", time=f"{r.seconds:.3f}")
        detail = f"run: {r.run_dir}\n{r.message}".strip()
        if r.exit_code == 1:
            ET.SubElement(case, "failure", message="history is not valid").text = detail
        elif r.exit_code != 0:
            ET.SubElement(case, "error", message=r.verdict).text = detail
        if r.run_dir:
            ET.SubElement(case, "system-out").text = f"run directory: {r.run_dir}"
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
