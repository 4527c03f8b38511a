"""`kraftlab clean --lab NAME | --all`: remove what a killed run left behind (namespaces, links,
bridge, iptables rules, processes, hosts files, state files, containers)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from control.labs import clean
from control.preflight import SetupError, require_root


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("clean", help="remove leftovers of killed runs")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--lab", help="the lab's name")
    g.add_argument("--all", action="store_true", help="every kraftlab lab on this machine")
    p.set_defaults(func=_clean)


def _clean(args: argparse.Namespace) -> int:
    try:
        require_root("kraftlab clean")
        report = clean(args.lab, everything=args.all)
    except (SetupError, ValueError, OSError) as exc:
        print(f"kraftlab clean: {exc}", file=sys.stderr)
        return 1
    print(f"removed labs: {', '.join(report.labs) or 'none'}; kernel objects: {report.found.summary()}")
    return 0
