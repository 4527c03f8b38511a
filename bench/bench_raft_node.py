"""Raft figures of real `kraft-node` processes on loopback, fsync on, repeated for honest medians.

Prints:
- commit latency of single-record appends acknowledged on commit, 3 voters, linger 0 (target p99
  <= 20 ms): p50/p99 of each run, then the median over runs of each, and the p99 of all samples;
- failover from SIGKILL of the leader to the next committed append, default Raft timeouts (target
  median <= 2.5 s, p99 <= 4 s), over `--failovers` kills (>= 20 for a p99 worth the name);
- the load average around each part: on a shared machine the latency figures follow it.

Reuses bench_node's measurement functions (one definition of each measurement).

    .venv/bin/python bench/bench_raft_node.py [--runs 5] [--appends 300] [--failovers 20] [--only latency,failover]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_node import bench_failover, bench_latency, percentile


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


def latency(base: Path, runs: int, appends: int) -> None:
    p50s, p99s, pooled = [], [], []
    for r in range(runs):
        lat = bench_latency(base / f"latency-{r}", appends, 0)
        p50s.append(percentile(lat, 50))
        p99s.append(percentile(lat, 99))
        pooled.extend(lat)
        print(f"  run {r + 1}/{runs}: p50 {p50s[-1]:.2f} ms  p99 {p99s[-1]:.2f} ms  ({load()})", flush=True)
    print(
        f"commit latency, single appends, 3 voters, fsync on, linger 0, {runs} runs x {appends}: "
        f"median p50 {statistics.median(p50s):.2f} ms  median p99 {statistics.median(p99s):.2f} ms  "
        f"p99 of all {percentile(pooled, 99):.2f} ms (target p99 <= 20 ms)",
        flush=True,
    )


def failover(base: Path, rounds: int) -> None:
    print(f"  failovers start ({load()})", flush=True)
    times = bench_failover(base / "failover", rounds)
    print(
        f"failover, SIGKILL leader -> next committed append, default timeouts, n={len(times)}: "
        f"median {statistics.median(times):.2f} s  p99 {percentile(times, 99):.2f} s  max {max(times):.2f} s "
        f"(target median <= 2.5 s, p99 <= 4 s; {load()})",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--failovers", type=int, default=20)
    parser.add_argument("--only", default="latency,failover")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-raft-") as tmp:
        if "latency" in only:
            latency(Path(tmp), args.runs, args.appends)
        if "failover" in only:
            failover(Path(tmp), args.failovers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
