"""`kraftlab test`: one test against a lab; exits with its verdict (0 valid, 1 invalid,
2 unknown, 254 bad arguments, 255 the run crashed)."""

from __future__ import annotations

import argparse
import sys

from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.matrix import worst_code
from kraftlab.report import run_shape
from kraftlab.runner import BadArguments, run_test
from kraftlab.testargs import add_test_arguments, options_from

HELP = "run a test against a lab and check it"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test", help=HELP)
    add_test_arguments(p)
    p.add_argument("--test-count", type=int, default=1, help="run the test this many times")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    codes = []
    for i in range(args.test_count):
        seed = None if args.seed is None else args.seed + i
        try:
            code, rundir = run_test(options_from(args, seed=seed))
        except BadArguments as exc:
            print(f"kraftlab test: {exc}", file=sys.stderr)
            return EXIT_BAD_ARGS
        verdict = {0: "valid", 1: "INVALID", 2: "unknown"}.get(code, "crashed")
        shape = run_shape(rundir.read_test())
        print(f"{verdict}: {rundir.report}" + (f" ({shape})" if shape else ""))
        codes.append(code)
    return worst_code(codes)
