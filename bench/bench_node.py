"""Benchmark of the node process: three real `kraft-node start` voters on loopback, fsync on.

Prints, for single-record appends acknowledged on commit (the test-only Produce path of a node in
`kraftlab.unsafe.test.mode`): commit latency p50/p99 (target p99 <= 20 ms); and failover time from
SIGKILL of the leader to the next committed append with default Raft timeouts (target median
<= 2.5 s, p99 <= 4 s).

    .venv/bin/python bench/bench_node.py [--appends 500] [--failovers 10] [--linger-ms 0]

`--linger-ms` sets controller.quorum.append.linger.ms for the latency run (Kafka's default of 25 ms
would add up to 25 ms to every single append by design); the failover run keeps every default.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "node"))

from kraftnode_helpers import ProcessCluster

from node.cli import append_test_records
from node.protocol.client import ProtocolClient


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1)))]


async def _latencies(port: int, n: int) -> list[float]:
    out = []
    async with ProtocolClient("127.0.0.1", port) as client:
        for i in range(n):
            t0 = time.perf_counter()
            error, _ = await append_test_records(client, [f"lat-{i}".encode()])
            if error != "NONE":
                raise RuntimeError(f"append {i} failed: {error}")
            out.append((time.perf_counter() - t0) * 1000.0)
    return out


def bench_latency(base: Path, appends: int, linger_ms: int) -> list[float]:
    c = ProcessCluster(base, **{"controller.quorum.append.linger.ms": str(linger_ms)})
    try:
        c.start_all()
        c.append_committed([b"warm-up"])
        leader, _ = c.wait_leader()
        asyncio.run(_latencies(c.ports[leader], 20))  # connection and caches warm
        return asyncio.run(_latencies(c.ports[leader], appends))
    finally:
        c.close()


def bench_failover(base: Path, rounds: int) -> list[float]:
    c = ProcessCluster(base)
    times = []
    try:
        c.start_all()
        for r in range(rounds):
            c.append_committed([f"before-{r}".encode()], timeout=30)
            leader, _ = c.wait_leader()
            time.sleep(0.5)  # followers settled on this leader
            t0 = time.monotonic()
            c.kill(leader, signal.SIGKILL)
            c.append_committed([f"after-{r}".encode()], timeout=30)
            times.append(time.monotonic() - t0)
            print(f"  failover {r + 1}/{rounds}: {times[-1]:.2f} s", flush=True)
            c.start(leader)
            time.sleep(1.0)
    finally:
        c.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--linger-ms", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        lat = bench_latency(Path(tmp) / "latency", args.appends, args.linger_ms)
        print(f"commit latency, single appends, 3 voters, fsync on, linger {args.linger_ms} ms, n={len(lat)}: "
              f"p50 {percentile(lat, 50):.2f} ms  p99 {percentile(lat, 99):.2f} ms  max {max(lat):.2f} ms "
              f"(target p99 <= 20 ms)")
        fo = bench_failover(Path(tmp) / "failover", args.failovers)
        print(f"failover, SIGKILL leader -> next committed append, default timeouts, n={len(fo)}: "
              f"median {statistics.median(fo):.2f} s  p99 {percentile(fo, 99):.2f} s  max {max(fo):.2f} s "
              f"(target median <= 2.5 s, p99 <= 4 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
