"""`kraftlab check FILE [--model M] [--journal J ...]`: check any history file (and node
journals) and exit with the verdict: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input.

FILE may be the project's history.jsonl, a Jepsen/Knossos EDN history or a Jepsen etcd log.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kraftlab.exits import EXIT_BAD_ARGS, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID

HELP = "check a history file (and node journals)"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(subparsers: Any) -> None:
    from kraftlab.checker.formats import FORMATS
    from kraftlab.checker.models import MODELS

    p = subparsers.add_parser("check", help=HELP)
    p.add_argument("file", nargs="?", help="history: .jsonl, .edn or a Jepsen etcd log")
    p.add_argument("--model", choices=(*MODELS, "queue"),
                   help="model for linearizability (default: per op's workload); queue: the whole history is a "
                        "Kafka queue history (Jepsen's Kafka workload) for the queue checker")
    p.add_argument("--format", choices=FORMATS, help="history format (default: detected)")
    p.add_argument("--init", help="initial state of the model, as JSON (e.g. 0)")
    p.add_argument("--nil-read-any", action="store_true",
                   help="a read of nil says nothing (Knossos semantics) instead of 'absent'")
    p.add_argument("--journal", action="append", default=[],
                   help="a node journal.jsonl, or a directory searched for journal*.jsonl (repeatable)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds for the linearizability search")
    p.add_argument("--memory-mb", type=int, default=1500, help="resident memory budget of the search, MB")
    p.add_argument("--hard-limit", type=float, default=None, metavar="SECONDS",
                   help="wall-clock limit of each checker's process, then it is killed (default: --time-limit + 120)")
    p.add_argument("--process-memory-mb", type=int, default=None,
                   help="address-space limit of each checker's process, MB (default: none)")
    p.add_argument("--session-timeout-ms", type=float, default=9000.0)
    p.add_argument("--fence-slack-ms", type=float, default=3000.0)
    p.add_argument("--out", help="directory for results.json and pictures")
    p.add_argument("--json", action="store_true", help="print results.json to stdout")
    p.set_defaults(func=_check)


def _verdict_code(valid: Any) -> int:
    return EXIT_VALID if valid is True else EXIT_INVALID if valid is False else EXIT_UNKNOWN


def _check(args: argparse.Namespace) -> int:
    from kraftlab.checker.history import HistoryError
    from kraftlab.checker.linear.budget import Budget
    from kraftlab.checker.run import check_run

    if args.file is None and not args.journal:
        print("kraftlab check: give a history FILE and/or --journal files", file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        initial = json.loads(args.init) if args.init is not None else None
    except json.JSONDecodeError as exc:
        print(f"kraftlab check: --init is not JSON: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    budget = Budget(seconds=args.time_limit, max_rss_bytes=args.memory_mb * 1_000_000)
    journals: list[Path] = []
    for j in args.journal:
        found = sorted(Path(j).rglob("journal*.jsonl")) if Path(j).is_dir() else [Path(j)]
        if not found:
            print(f"kraftlab check: no journal*.jsonl under {j}", file=sys.stderr)
            return EXIT_BAD_ARGS
        journals += found
    try:
        memory = args.process_memory_mb * 1_000_000 if args.process_memory_mb else None
        results = check_run(args.file, list(journals), args.model, args.out, budget, initial, args.format,
                            args.nil_read_any, args.session_timeout_ms, args.fence_slack_ms, args.hard_limit, memory)
    except (HistoryError, ValueError, OSError) as exc:
        print(f"kraftlab check: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        _print_summary(results)
    return _verdict_code(results["valid"])


def _print_summary(results: dict[str, Any]) -> None:
    word = {True: "valid", False: "INVALID"}.get(results["valid"], "unknown")
    print(f"verdict: {word}")
    for name, res in results["checkers"].items():
        v = {True: "valid", False: "INVALID"}.get(res.get("valid"), "unknown")
        print(f"  {name}: {v}")
        for line in str(res.get("explanation", "")).splitlines()[:12]:
            print(f"    {line}")
        for a in res.get("anomalies", [])[:5]:
            pics = a.get("pictures")
            if pics:
                print(f"    picture: {pics[0]}")
