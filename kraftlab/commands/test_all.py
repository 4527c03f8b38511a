"""`kraftlab test-all`: workloads × nemeses × --test-count, a summary table, JUnit XML, and the
worst exit code (for a nightly chaos matrix gated on it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.matrix import print_summary, run_matrix, worst_exit, write_junit
from kraftlab.report import run_shape
from kraftlab.runner import BadArguments, run_test, validate
from kraftlab.testargs import add_test_arguments, options_from

HELP = "run a matrix of tests; JUnit XML; exit with the worst result"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test-all", help=HELP)
    add_test_arguments(p, matrix=True)
    p.add_argument("--workloads", default="registry,topics,isr,acl,scram,queue,mixed")
    p.add_argument("--nemeses", default="none,partition,kill,pause,clock,packet,disk,all",
                   help="semicolon-separated nemesis specs, each a comma list (e.g. 'partition;kill,clock')")
    p.add_argument("--test-count", type=int, default=1)
    p.add_argument("--junit", type=Path, default=Path("store/junit.xml"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workloads = [w for w in args.workloads.split(",") if w]
    nemeses = [n for n in args.nemeses.split(";") if n] if ";" in args.nemeses else args.nemeses.split(",")

    try:
        for w in workloads:
            for n in nemeses:
                validate(options_from(args, workload=w, nemesis=n))
    except BadArguments as exc:
        print(f"kraftlab test-all: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS

    def run_one(workload: str, nemesis: str, repeat: int) -> tuple[int, str | None, str]:
        seed = None if args.seed is None else args.seed + repeat
        code, rundir = run_test(options_from(args, workload=workload, nemesis=nemesis, seed=seed))
        return code, str(rundir.path), run_shape(rundir.read_test())

    results = run_matrix(workloads, nemeses, args.test_count, run_one,
                         on_result=lambda r: print(f"{r.workload} × {r.nemesis} #{r.repeat}: {r.verdict} "
                                                   f"({r.seconds:.0f}s) {r.run_dir or ''} {r.message}".rstrip(),
                                                   flush=True))
    print_summary(results)
    write_junit(results, args.junit)
    print(f"JUnit XML: {args.junit}")
    return worst_exit(results)
