"""test-all: every cell runs, a crashing cell is recorded, the worst result wins, JUnit is valid."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from kraftlab.matrix import print_summary, run_matrix, worst_exit, write_junit


def test_matrix_runs_every_cell_and_reports_the_worst(tmp_path: Path) -> None:
    outcomes = {("topics", "none"): 0, ("topics", "kill"): 1, ("isr", "none"): 2}

    def run_one(workload: str, nemesis: str, repeat: int):
        if (workload, nemesis) == ("isr", "kill"):
            raise RuntimeError("lab exploded")
        return outcomes[(workload, nemesis)], f"store/{workload}-{nemesis}/{repeat}", ""

    results = run_matrix(["topics", "isr"], ["none", "kill"], 2, run_one)
    assert len(results) == 8
    assert [r.exit_code for r in results if r.workload == "isr" and r.nemesis == "kill"] == [255, 255]
    assert "lab exploded" in results[-1].message
    assert worst_exit(results) == 255
    assert worst_exit([r for r in results if r.exit_code != 255]) == 1  # invalid beats unknown
    assert worst_exit([r for r in results if r.exit_code == 0]) == 0

    junit = tmp_path / "junit.xml"
    write_junit(results, junit)
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "8" and suite.get("failures") == "2" and suite.get("errors") == "4"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert "topics-kill-1" in names
    out = io.StringIO()
    print_summary(results, Console(file=out, width=200))
    assert "INVALID" in out.getvalue() and "crashed" in out.getvalue()


def test_test_all_runs_every_workload_by_default() -> None:
    import argparse

    from kraftlab.commands.test_all import register
    from kraftlab.workloads.catalog import WORKLOADS

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["test-all"])
    assert sorted(args.workloads.split(",")) == sorted(WORKLOADS)
