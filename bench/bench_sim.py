"""Simulated events per second of the deterministic simulator (target >= 50,000/s).

Runs a fixed set of seeded simulations (3 and 5 voters, one observer, a fault mix, the deferred
leader flush on in half of them) with the invariants checked after every event, and prints the
median rate over several rounds both per CPU second of this process (what the simulator costs) and
per wall-clock second (what a user waits, which depends on how busy the machine is), with the
machine's load average before and after, so that a figure from a busy machine reads as one.

    .venv/bin/python bench/bench_sim.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from kraftlab.node.sim.cluster import SimParams, run

CASES = [
    SimParams(
        seed=s, voters=v, observers=1, faults=("partition", "crash", "drop", "delay"), fault_ms=20_000, flush_delay_ms=f
    )
    for s, f in ((1, 0), (2, 5))
    for v in (3, 5)
]


def one_round() -> tuple[int, float, float]:
    """Events, wall seconds, CPU seconds (the CPU figure is less disturbed by a busy machine)."""
    events = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for params in CASES:
        events += run(params).events
    return events, time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {load()}", flush=True)
    wall_rates, cpu_rates = [], []
    events = 0
    for _ in range(args.rounds):
        events, wall, cpu = one_round()
        wall_rates.append(events / wall)
        cpu_rates.append(events / cpu)
    print(f"simulated events: {events} per round ({len(CASES)} runs, invariants checked after every event)")
    for name, rates in (("per CPU second", cpu_rates), ("per wall second", wall_rates)):
        median, low, high = statistics.median(rates), min(rates), max(rates)
        print(f"events/s {name}: median {median:,.0f}  min {low:,.0f}  max {high:,.0f}  (target >= 50,000)")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
