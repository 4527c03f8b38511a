"""`kraftlab clean --lab NAME | --all`: remove what a killed run left behind. First the faults in
force are healed on hosts that survive (the nemesis ledger: iptables chains, qdiscs, clock files,
paused nodes); then, when a test deployed the node there and was killed before it collected the
node logs and journals, they are collected into its run directory (so `kraftlab analyze` can
still judge Raft, fencing and metadata); then the lab is removed: namespaces, links, bridge, iptables rules, processes,
hosts files and state file for namespace labs (found by prefix even without a state file);
daemons and state file for SSH/Vagrant labs; containers, network and (for a `--diskfs` lab) the disk-fault
filesystem's mounts and directories on this machine for Docker labs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kraftlab.control.host import HostError
from kraftlab.control.labs import clean, load_lab
from kraftlab.control.preflight import SetupError, require_root
from kraftlab.control.state import list_states

HELP = "remove leftovers of killed runs"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("clean", help=HELP)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--lab", help="the lab's name")
    g.add_argument("--all", action="store_true", help="every kraftlab lab on this machine")
    p.set_defaults(func=_clean)


def heal_faults(name: str) -> str:
    """Undo nemesis faults on the lab's hosts (best effort); a line saying what happened."""
    from kraftlab.nemesis.cleanup import clean_lab

    try:
        with load_lab(name) as lab:
            outcome = clean_lab(lab)
    except (LookupError, HostError, OSError, ValueError) as exc:
        return f"{name}: faults not healed ({exc})"
    failed = outcome.get("failed") or {}
    return f"{name}: faults healed on {len(outcome.get('hosts', []))} hosts" + (f", failed on {failed}" if failed
                                                                               else "")


def keep_journals(name: str) -> str | None:
    """Before a lab goes: if a test deployed the node on it and its run directory lacks the node
    journals (the runner was killed before it collected them), collect them there now. A line
    saying what happened, or None when there is nothing to keep."""
    from pathlib import Path

    from kraftlab.deploy import Deployment, DeploymentState

    try:
        state = DeploymentState.load(name)
    except (LookupError, OSError, ValueError):
        return None
    if not state.run_dir or not Path(state.run_dir).is_dir():
        return None
    nodes = Path(state.run_dir) / "nodes"
    if nodes.is_dir() and any(nodes.glob("*/journal.jsonl")):
        return None
    try:
        with load_lab(name) as lab:
            got = Deployment(lab, state).collect(nodes)
    except (LookupError, HostError, OSError, ValueError) as exc:
        return f"{name}: node journals not collected into {state.run_dir} ({exc})"
    kept = sum("journal.jsonl" in files for files in got.values())
    return (f"{name}: kept {kept} node journal(s) in {nodes}; judge the run with "
            f"`kraftlab analyze {state.run_dir}`")


def _clean(args: argparse.Namespace) -> int:
    try:
        require_root("kraftlab clean")
        names = [s.name for s in list_states()] if args.all else [args.lab]
        for name in names:
            if any(s.name == name for s in list_states()):
                print(heal_faults(name))
                if (kept := keep_journals(name)) is not None:
                    print(kept)
        report = clean(args.lab, everything=args.all)
    except (SetupError, ValueError, OSError) as exc:
        print(f"kraftlab clean: {exc}", file=sys.stderr)
        return 1
    print(f"removed labs: {', '.join(report.labs) or 'none'}; kernel objects: {report.found.summary()}")
    return 0
