"""Raft figures of real `kraft-node` processes on loopback, fsync on, repeated for honest medians.

Prints:
- commit latency of single-record appends acknowledged on commit, 3 voters, linger 0 (target p99
  <= 20 ms): p50/p99 of each run, then the median over runs of each, and the p99 of all samples;
- failover from SIGKILL of the leader to the next committed append, default Raft timeouts (target
  median <= 2.5 s, p99 <= 4 s), over `--failovers` kills (>= 20 for a p99 worth the name);
- CPU per commit of each process under the latency load (process CPU time / commits, net of the
  process's idle CPU rate measured just before, so the figure does not grow with a slowed-down run):
  robust to the machine's load where the latency is not;
- the load average around each part: on a shared machine the latency figures follow it.

Reuses bench_node's measurement functions (one definition of each measurement).

    .venv/bin/python bench/bench_raft_node.py [--runs 5] [--appends 300] [--failovers 20]
                                              [--only latency,cpu,failover]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_node import _latencies, bench_failover, bench_latency, percentile

from kraftlab.testing.interrupts import interrupt_on_sigterm
from kraftlab.testing.kraftnode import ProcessCluster

IDLE_S = 3.0  # how long each process's idle CPU rate is measured before the load


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_commit(base: Path, appends: int) -> tuple[float, float, float]:
    """One cluster: (leader, mean follower) CPU ms per commit net of idle, and the run's p99 (ms)."""
    c = ProcessCluster(base, config={"controller.quorum.append.linger.ms": "0"})
    try:
        c.start_all()
        c.append_committed([b"warm-up"])
        leader, _ = c.wait_leader()
        asyncio.run(_latencies(c.ports[leader], 20))
        pids = {i: c.procs[i].pid for i in c.ids}
        t0, idle0 = time.monotonic(), {i: cpu_seconds(p) for i, p in pids.items()}
        time.sleep(IDLE_S)
        t1, busy0 = time.monotonic(), {i: cpu_seconds(p) for i, p in pids.items()}
        lat = asyncio.run(_latencies(c.ports[leader], appends))
        t2, busy1 = time.monotonic(), {i: cpu_seconds(p) for i, p in pids.items()}
        net = {}
        for i in c.ids:
            idle_rate = (busy0[i] - idle0[i]) / (t1 - t0)
            net[i] = max(0.0, busy1[i] - busy0[i] - idle_rate * (t2 - t1)) * 1000.0 / appends
        followers = [net[i] for i in c.ids if i != leader]
        return net[leader], statistics.mean(followers), percentile(lat, 99)
    finally:
        c.close()


def cpu(base: Path, runs: int, appends: int) -> None:
    leaders, followers = [], []
    for r in range(runs):
        lead, follow, p99 = cpu_per_commit(base / f"cpu-{r}", appends)
        leaders.append(lead)
        followers.append(follow)
        print(f"  run {r + 1}/{runs}: leader {lead:.2f} ms  follower {follow:.2f} ms CPU/commit  "
              f"(p99 {p99:.1f} ms, {load()})", flush=True)
    print(
        f"CPU per commit net of idle, single appends, 3 voters, linger 0, {runs} runs x {appends}: "
        f"median leader {statistics.median(leaders):.2f} ms  median follower {statistics.median(followers):.2f} ms",
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
    parser.add_argument("--only", default="latency,cpu,failover")
    args = parser.parse_args()
    interrupt_on_sigterm()  # a stopped benchmark still kills its node processes
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-raft-") as tmp:
        if "latency" in only:
            latency(Path(tmp), args.runs, args.appends)
        if "cpu" in only:
            cpu(Path(tmp), args.runs, args.appends)
        if "failover" in only:
            failover(Path(tmp), args.failovers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
