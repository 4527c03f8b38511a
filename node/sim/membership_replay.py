"""Replay one dynamic-quorum simulation (node.sim.membership) exactly from its parameters.

.venv/bin/python -m kraftlab.node.sim.membership_replay --seed 7 --voters 5 --faults partition,crash --initial 3

Every option of `python -m kraftlab.node.sim.replay` applies (`--voters` is the number of nodes),
plus the administrator's: --initial, --max-voters, --change-every-ms, --replace-chance, --no-disks;
and --no-requests (no voter change client, node.sim.voter_requests).
"""

from __future__ import annotations

import argparse
import sys

from kraftlab.node.sim import replay
from kraftlab.node.sim.membership import MembershipParams, run

_DEFAULTS = MembershipParams(replay.SimParams(seed=0))


def parse(argv: list[str] | None = None) -> MembershipParams:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--initial", type=int, default=_DEFAULTS.initial)
    parser.add_argument("--max-voters", type=int, default=_DEFAULTS.max_voters)
    parser.add_argument("--change-every-ms", type=int, default=_DEFAULTS.change_every_ms)
    parser.add_argument("--replace-chance", type=float, default=_DEFAULTS.replace_chance)
    parser.add_argument("--no-disks", action="store_true", help="never replace a disk")
    parser.add_argument("--no-requests", action="store_true", help="no voter change client")
    args, rest = parser.parse_known_args(argv)
    return MembershipParams(
        replay.parse(rest),
        initial=args.initial,
        max_voters=args.max_voters,
        change_every_ms=args.change_every_ms,
        replace_disks=not args.no_disks,
        replace_chance=args.replace_chance,
        requests=not args.no_requests,
    )


def main(argv: list[str] | None = None) -> int:
    params = parse(argv)
    return replay.report(lambda: run(params), lambda r: (
        f"{r.changes_committed} voter changes committed, {r.leader_removals} leader removals asked, "
        f"{r.disks_replaced} disks replaced, final voters {list(r.final_voters)}, answers {r.answers}; "
        f"committed offset {r.sim.committed_offset}"))


if __name__ == "__main__":
    sys.exit(main())
