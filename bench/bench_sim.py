"""Simulated events per second of the deterministic simulator (target >= 50,000/s).

Runs a fixed set of seeded simulations (3 and 5 voters, one observer, a fault mix) with the
invariants checked after every event, and prints the median rate over several rounds.

    .venv/bin/python bench/bench_sim.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from node.sim.cluster import SimParams, run

CASES = [
    SimParams(seed=s, voters=v, observers=1, faults=("partition", "crash", "drop", "delay"), fault_ms=20_000)
    for s in (1, 2)
    for v in (3, 5)
]


def one_round() -> tuple[int, float]:
    events = 0
    start = time.perf_counter()
    for params in CASES:
        events += run(params).events
    return events, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rates = []
    for _ in range(args.rounds):
        events, seconds = one_round()
        rates.append(events / seconds)
    print(f"simulated events: {events} per round ({len(CASES)} runs)")
    print(f"events/s median {statistics.median(rates):,.0f}  min {min(rates):,.0f}  max {max(rates):,.0f}")


if __name__ == "__main__":
    main()
