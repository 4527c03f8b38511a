"""Replay one simulation exactly from its parameters (the line a failing property test prints).

.venv/bin/python -m kraftlab.node.sim.replay --seed 7 --voters 3 --observers 1 --faults partition,crash
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TypeVar

from kraftlab.node.sim.cluster import SimParams, run
from kraftlab.node.sim.faults import FAULT_KINDS
from kraftlab.node.sim.invariants import InvariantViolation

R = TypeVar("R")

_DEFAULTS = SimParams(seed=0)


def parse(argv: list[str] | None = None) -> SimParams:
    parser = argparse.ArgumentParser(prog="python -m kraftlab.node.sim.replay", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=0)
    parser.add_argument("--faults", default="none", help=f"comma-separated: {', '.join(FAULT_KINDS)} (or none)")
    parser.add_argument("--fault-ms", type=int, default=_DEFAULTS.fault_ms)
    parser.add_argument("--settle-ms", type=int, default=_DEFAULTS.settle_ms)
    parser.add_argument("--snapshot-every", type=int, default=_DEFAULTS.snapshot_every)
    parser.add_argument("--append-interval-ms", type=int, default=_DEFAULTS.append_interval_ms)
    parser.add_argument("--snapshot-chunk-bytes", type=int, default=_DEFAULTS.snapshot_chunk_bytes)
    parser.add_argument("--flush-delay-ms", type=int, default=_DEFAULTS.flush_delay_ms)
    parser.add_argument("--refusals", action="store_true", help="crashed nodes refuse connections")
    parser.add_argument("--first-id", type=int, default=_DEFAULTS.first_id, help="the first node id (0 as Kafka's)")
    parser.add_argument("--observers-first", action="store_true", help="observers take the first ids")
    parser.add_argument("--rogue", action="store_true", help="a rogue client sends requests nodes must refuse")
    parser.add_argument("--wire", action="store_true", help="every message through Kafka's wire format")
    parser.add_argument("--journal", action="store_true",
                        help="the cores journal, and every step's journal is judged (node.sim.journal_truth)")
    parser.add_argument("--retention-bytes", type=int, default=None,
                        help="metadata.max.retention.bytes of every node (default: drawn from the seed)")
    args = parser.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f and f != "none")
    return SimParams(
        seed=args.seed,
        voters=args.voters,
        observers=args.observers,
        faults=faults,
        fault_ms=args.fault_ms,
        settle_ms=args.settle_ms,
        snapshot_every=args.snapshot_every,
        append_interval_ms=args.append_interval_ms,
        snapshot_chunk_bytes=args.snapshot_chunk_bytes,
        flush_delay_ms=args.flush_delay_ms,
        refusals=args.refusals,
        first_id=args.first_id,
        observers_first=args.observers_first,
        rogue=args.rogue,
        wire=args.wire,
        journal=args.journal,
        retention_bytes=args.retention_bytes,
    )


def report(simulate: Callable[[], R], describe: Callable[[R], str]) -> int:
    """Run a replayed simulation: `FAILED: <the broken invariant>` and exit 1, or `ok: <describe>` and 0."""
    try:
        result = simulate()
    except (InvariantViolation, AssertionError) as exc:
        print(f"FAILED: {exc}")
        return 1
    print(f"ok: {describe(result)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    params = parse(argv)
    return report(lambda: run(params), lambda result: (
        f"{result.events} events, {result.appended} appends, committed offset {result.committed_offset}, "
        f"max epoch {result.max_epoch}, snapshots loaded {result.snapshots_loaded}; after healing: leader in "
        f"{result.leader_after_heal_ms} ms, first commit in {result.commit_after_heal_ms} ms"))


if __name__ == "__main__":
    sys.exit(main())
