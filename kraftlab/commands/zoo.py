"""`kraftlab zoo`: run every planted bug (or some) end to end until a checker finds it, then a
clean control run; print the table and exit 1 if any bug was missed or the control was not valid."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kraftlab.deploy import DEFAULT_TOPOLOGY, TOPOLOGIES
from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.runner import BadArguments, TestOptions
from kraftlab.store import DEFAULT_STORE
from kraftlab.zoo import PLANS, Attempt, attempt_line, real_runner, run_zoo, select


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N, got {text!r}") from None
    return k, n

HELP = "run the planted bugs end to end; every one must be found (test-only switches)"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("zoo", help=HELP)
    p.add_argument("bugs", nargs="*", metavar="BUG", help=f"bugs to run (default all): {', '.join(PLANS)}")
    p.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                   help="run every N-th bug starting at K (a rotating CI subset)")
    p.add_argument("--attempt-time", type=float, default=None,
                   help="workload seconds per attempt (default: the bug's plan: 30-60 with random faults, "
                        "17-28 with a targeted schedule)")
    p.add_argument("--budget", type=float, default=120.0,
                   help="wall seconds per bug, attempts repeated with new seeds until found (default 120)")
    p.add_argument("--seed", type=int, default=1, help="seed of each bug's first attempt (default 1)")
    p.add_argument("--nemesis-interval", type=float, default=5.0,
                   help="seconds between nemesis steps (default 5: more faults per bounded attempt)")
    p.add_argument("--no-control", action="store_true", help="skip the clean control run")
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--topology", default=DEFAULT_TOPOLOGY, choices=list(TOPOLOGIES),
                   help=f"node roles (default {DEFAULT_TOPOLOGY}); `combined` makes every node a voter")
    p.add_argument("--backend", default="netns", choices=["netns", "ssh", "docker", "vagrant"])
    p.add_argument("--lab", default=None, help="use this existing lab instead of a fresh one per attempt")
    p.add_argument("--recovery-time", type=float, default=None,
                   help="seconds a healed cluster gets to recover (default: derived from the node's timeouts)")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    p.set_defaults(func=run)


def _print_attempt(bug: str, a: Attempt) -> None:
    print(attempt_line(bug, a), flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        bugs = select(args.bugs, args.shard)
    except ValueError as exc:
        print(f"kraftlab zoo: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if min(x for x in (args.attempt_time, args.budget, args.nemesis_interval) if x is not None) <= 0:
        print("kraftlab zoo: --attempt-time, --budget and --nemesis-interval must be positive", file=sys.stderr)
        return EXIT_BAD_ARGS
    base = TestOptions(nodes=args.nodes, topology=args.topology, backend=args.backend, lab=args.lab,
                       recovery_time=args.recovery_time, store=args.store, nemesis_interval=args.nemesis_interval)
    try:
        report = run_zoo(bugs, base, real_runner, attempt_s=args.attempt_time, budget_s=args.budget,
                         seed=args.seed, control=not args.no_control, on_attempt=_print_attempt)
    except BadArguments as exc:
        print(f"kraftlab zoo: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    print()
    print(report.table())
    return 0 if report.ok else 1
