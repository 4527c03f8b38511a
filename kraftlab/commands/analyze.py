"""`kraftlab analyze RUN_DIR`: re-check a stored run (also one whose runner was killed) and
re-render its report; exits with the verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kraftlab.checking import check_run, exit_code
from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.report import render
from kraftlab.runner import session_timeout_ms
from kraftlab.store import RunDir
from kraftlab.workloads import catalog

HELP = "re-check a stored run and re-render its report"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help=HELP)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--spark", default=None, metavar="MASTER", help="check on Spark (e.g. local[2])")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dir = RunDir(args.run_dir)
    if not run_dir.history.is_file():
        print(f"kraftlab analyze: {args.run_dir} has no history.jsonl", file=sys.stderr)
        return EXIT_BAD_ARGS
    test = run_dir.read_test()
    timeout_ms = session_timeout_ms(test.get("config") or {})
    if args.spark:
        from kraftlab.spark_analysis.job import analyze_run

        models = list(catalog.MODELS.get(test.get("workload", "mixed"), catalog.MODELS["mixed"]))
        results = analyze_run(run_dir, models, master=args.spark)
    else:
        results = check_run(run_dir, session_timeout_ms=timeout_ms)
    render(run_dir)
    print(f"{results.get('valid')}: {run_dir.report}")
    return exit_code(results.get("valid"))
