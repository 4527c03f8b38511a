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


def one_round() -> tuple[int, float, float]:
    """Events, wall seconds, CPU seconds (the CPU figure is less disturbed by a busy machine)."""
    events = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for params in CASES:
        events += run(params).events
    return events, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    wall_rates, cpu_rates = [], []
    for _ in range(args.rounds):
        events, wall, cpu = one_round()
        wall_rates.append(events / wall)
        cpu_rates.append(events / cpu)
    print(f"simulated events: {events} per round ({len(CASES)} runs, invariants checked after every event)")
    for name, rates in (("wall", wall_rates), ("cpu", cpu_rates)):
        median, low, high = statistics.median(rates), min(rates), max(rates)
        print(f"events/s ({name} clock) median {median:,.0f}  min {low:,.0f}  max {high:,.0f}")


if __name__ == "__main__":
    main()
