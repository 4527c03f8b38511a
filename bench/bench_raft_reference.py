"""How much of Kafka's Raft request validation the simulators exercise, and whether the real core
keeps ExactError, ExactLeaderAndEpoch and ErrorAnswerFields (node.sim.raft_reference) over many seeds.

Runs N seeds of the Raft simulator (3 to 5 voters, an observer every other seed, every fault kind,
the rogue client on) and M seeds of the membership simulator (KIP-853: voters added, removed,
disks replaced), counts the violations of any rule (0 expected: a false alarm otherwise; a run
that ends without a leader is counted apart, as Liveness) and prints every branch of the reference
with the number of answers that reached it.

    .venv/bin/python bench/bench_raft_reference.py [--seeds 200] [--membership-seeds 100]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from kraftlab.node.sim import raft_reference as ref
from kraftlab.node.sim.cluster import LivenessViolation, SimParams, run
from kraftlab.node.sim.faults import FAULT_KINDS
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams
from kraftlab.node.sim.membership import run as run_membership

MEMBERSHIP_FAULTS = ("crash", "partition", "drop", "delay", "duplicate", "oneway")


def raft_seed(seed: int) -> None:
    run(SimParams(seed=seed, voters=3 + seed % 3, observers=seed % 2, faults=FAULT_KINDS, rogue=True))


def membership_seed(seed: int) -> None:
    faults = MEMBERSHIP_FAULTS[: 1 + seed % len(MEMBERSHIP_FAULTS)]
    sim = SimParams(seed=seed, voters=5, faults=faults, flush_delay_ms=(seed % 3) * 15)
    run_membership(MembershipParams(sim, initial=1 + seed % 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--membership-seeds", type=int, default=100)
    args = parser.parse_args()
    for name, seeds, one in (("raft", args.seeds, raft_seed), ("membership", args.membership_seeds, membership_seed)):
        before = Counter(ref.REACHED)
        failures: Counter[str] = Counter()
        start = time.perf_counter()
        for seed in range(seeds):
            try:
                one(seed)
            except InvariantViolation as exc:
                failures[exc.name] += 1
                print(f"  {name} seed {seed}: {str(exc)[:300]}")
            except LivenessViolation as exc:  # not a rule of the reference: counted apart
                failures["Liveness"] += 1
                print(f"  {name} seed {seed}: {exc}")
        reached = {b: ref.REACHED[b] - before[b] for b in ref.BRANCHES}
        hit = sum(1 for n in reached.values() if n)
        print(
            f"{name}: {seeds} seeds in {time.perf_counter() - start:.0f} s, violations {dict(failures) or 0}, "
            f"reference branches reached {hit}/{len(ref.BRANCHES)}"
        )
        for branch, n in reached.items():
            print(f"  {n:>8}  {branch}")


if __name__ == "__main__":
    main()
