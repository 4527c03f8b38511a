"""Benchmark of the disk-fault filesystem's cost: the node's commit latency and failover time with
each node's directory on kraftlab's FUSE filesystem (kraftlab.nemesis.diskfs) and without it.

Three `kraft-node start` voters on loopback, fsync on (the same cluster as bench/bench_node.py). On
the filesystem, each node's directory (its metadata log and its journal) is its own mount, and a
failover's SIGKILL is a power loss: the killed leader's un-fsynced writes are dropped before it
restarts, as `kraftlab test --diskfs` does.

Prints, for each setup: commit latency p50/p99 of single-record appends acknowledged on commit, and
the failover time from SIGKILL of the leader to the next committed append (median, max); then the
ratios (FUSE / plain) of the p99 latency and the median failover.

    .venv/bin/python bench/bench_diskfs.py [--appends 300] [--failovers 5] [--linger-ms 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench_node import (  # a sibling script: run as a file, bench/ is sys.path[0]
    bench_failover,
    bench_latency,
    percentile,
)

from kraftlab.testing.diskfs_mounts import Mounted, fuse_available, mounted


@contextmanager
def node_dirs(base: Path, fuse: bool, n: int = 3) -> Iterator[dict[int, Mounted]]:
    """`base/n1` … `base/nN`: plain directories, or each a diskfs mount (unmounted afterwards)."""
    base.mkdir(parents=True)
    with ExitStack() as stack:
        mounts: dict[int, Mounted] = {}
        for i in range(1, n + 1):
            if fuse:
                (base / f"fs-n{i}").mkdir()
                m = stack.enter_context(mounted(base / f"fs-n{i}", seed=i))
                (base / f"n{i}").symlink_to(m.mountpoint)
                mounts[i] = m
        yield mounts


def bench_latency_on(base: Path, fuse: bool, appends: int, linger_ms: int) -> list[float]:
    with node_dirs(base, fuse):
        return bench_latency(base, appends, linger_ms)


def bench_failover_on(base: Path, fuse: bool, rounds: int) -> list[float]:
    with node_dirs(base, fuse) as mounts:
        def power_loss(leader: int) -> None:  # the killed leader's un-fsynced writes dropped before it restarts
            mounts[leader].ctl(cmd="crash")

        return bench_failover(base, rounds, power_loss if fuse else None, "fuse " if fuse else "plain ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--linger-ms", type=int, default=0)
    args = parser.parse_args()
    why = fuse_available()
    if why is not None:
        print(f"bench_diskfs: cannot mount the filesystem here: {why}", file=sys.stderr)
        return 2
    results: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-diskfs-") as tmp:
        for setup in ("plain", "fuse"):
            fuse = setup == "fuse"
            lat = bench_latency_on(Path(tmp) / f"{setup}-latency", fuse, args.appends, args.linger_ms)
            fo = bench_failover_on(Path(tmp) / f"{setup}-failover", fuse, args.failovers)
            results[setup] = (lat, fo)
            print(f"{setup}: commit latency (3 voters, fsync on, linger {args.linger_ms} ms, n={len(lat)}) "
                  f"p50 {percentile(lat, 50):.2f} ms  p99 {percentile(lat, 99):.2f} ms; "
                  f"failover (SIGKILL leader -> next commit, n={len(fo)}) median {statistics.median(fo):.2f} s  "
                  f"max {max(fo):.2f} s", flush=True)
    (pl, pf), (fl, ff) = results["plain"], results["fuse"]
    print(f"ratio fuse/plain: commit p50 {percentile(fl, 50) / percentile(pl, 50):.2f}x  "
          f"p99 {percentile(fl, 99) / percentile(pl, 99):.2f}x  "
          f"failover median {statistics.median(ff) / statistics.median(pf):.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
