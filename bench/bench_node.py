"""Benchmark of the node process: real `kraft-node start` processes on loopback, fsync on.

Prints:
- commit latency p50/p99 of single-record appends acknowledged on commit, 3 voters (the test-only
  Produce path of a node in `kraftlab.unsafe.test.mode`; target p99 <= 20 ms);
- failover time from SIGKILL of the leader to the next committed append, default Raft timeouts
  (target median <= 2.5 s, p99 <= 4 s);
- time from starting 3 controllers + 5 brokers to all brokers unfenced (target <= 5 s);
- broker restart time (SIGKILL, start, unfenced again) with 100,000 partitions in the image,
  loaded from its snapshot;
- sustained CreateTopics throughput of 1-partition topics sent to the active controller of 3
  voters (several topics per request, many requests in flight), with request latency p99
  (target >= 1,000 topics/s).

    .venv/bin/python bench/bench_node.py [--appends 500] [--failovers 10] [--linger-ms 0]
                                         [--topics 5000] [--topics-per-request 10] [--starts 5]
                                         [--partitions 100000] [--restarts 1]
                                         [--only latency,failover,unfence,topics,restart]

`--linger-ms` sets controller.quorum.append.linger.ms for the latency run (Kafka's default of 25 ms
would add up to 25 ms to every single append by design); the failover run keeps every default.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from kraftlab.node.cli import CommandFailed, append_test_records, describe_cluster
from kraftlab.node.journal import read_journal
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestError
from kraftlab.testing.interrupts import interrupt_on_sigterm
from kraftlab.testing.kraftnode import ProcessCluster


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
    c = ProcessCluster(base, config={"controller.quorum.append.linger.ms": str(linger_ms)})
    try:
        c.start_all()
        c.append_committed([b"warm-up"], timeout=60)
        leader, _ = c.wait_leader()
        asyncio.run(_latencies(c.ports[leader], 20))  # connection and caches warm
        return asyncio.run(_latencies(c.ports[leader], appends))
    finally:
        c.close()


def bench_failover(base: Path, rounds: int, after_kill: Callable[[int], object] | None = None,
                   label: str = "") -> list[float]:
    """Seconds from SIGKILL of the leader to the next committed append, `rounds` times; `after_kill`
    runs on the killed node's id before the clock stops (a power loss on the disk-fault filesystem)."""
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
            if after_kill is not None:
                after_kill(leader)
            c.append_committed([f"after-{r}".encode()], timeout=30)
            times.append(time.monotonic() - t0)
            print(f"  {label}failover {r + 1}/{rounds}: {times[-1]:.2f} s", flush=True)
            c.start(leader)
            time.sleep(1.0)
    finally:
        c.close()
    return times


def _all_listening(ports: list[int]) -> bool:
    for port in ports:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return False
    return True


def _first_ts(c: ProcessCluster, i: int, wanted: Callable[[dict[str, Any]], bool]) -> float | None:
    """Wall time (s) of the first journal event of node `i` that `wanted` accepts."""
    with contextlib.suppress(OSError):
        for e in read_journal(c.journal(i)):
            if wanted(e):
                return float(e["ts"]) / 1000.0
    return None


def _unfence_breakdown(c: ProcessCluster, wall0: float) -> dict[str, float]:
    """Milestones (s after launch) from the nodes' journals: the last process to start its core, the
    first leader, the last broker registered (RECOVERY: caught up), the last broker RUNNING."""
    nodes = c.ids + c.broker_ids
    marks = {
        "cores started": [_first_ts(c, i, lambda e: e["ev"] == "start") for i in nodes],
        "leader elected": [
            min(
                (t for i in c.ids if (t := _first_ts(c, i, lambda e: e["ev"] == "role" and e.get("role") == "leader"))),
                default=None,
            )
        ],
        "brokers caught up": [
            _first_ts(c, i, lambda e: e["ev"] == "broker_state" and e.get("state") == "RECOVERY") for i in c.broker_ids
        ],
        "brokers running": [
            _first_ts(c, i, lambda e: e["ev"] == "broker_state" and e.get("state") == "RUNNING") for i in c.broker_ids
        ],
    }
    # a milestone some node never reached is left out
    known = {k: [t for t in v if t is not None] for k, v in marks.items()}
    return {k: max(known[k]) - wall0 for k, v in marks.items() if v and len(known[k]) == len(v)}


def bench_unfence(base: Path, brokers: int = 5) -> tuple[float, float, dict[str, float]]:
    """(seconds from launching the processes to every broker unfenced, seconds of that spent
    until every process listened: Python start-up and imports, the journal's milestones)."""
    c = ProcessCluster(base, brokers=brokers)
    try:
        t0 = time.monotonic()
        wall0 = time.time()
        c.start_all()
        ports = [*c.ports.values(), *c.broker_ports.values()]
        ready: float | None = None
        address = ("127.0.0.1", c.broker_ports[c.broker_ids[0]])
        while True:
            if ready is None and _all_listening(ports):
                ready = time.monotonic() - t0
            if ready is not None:
                with contextlib.suppress(CommandFailed):
                    if len(asyncio.run(describe_cluster(address, 1.0))["brokers"]) == brokers:
                        elapsed = time.monotonic() - t0
                        return elapsed, ready, _unfence_breakdown(c, wall0)
            if time.monotonic() - t0 > 120:
                raise TimeoutError("brokers not unfenced within 120 s")
            time.sleep(0.05)
    finally:
        c.close()


def _create_topics_request(names: list[str], partitions: int) -> Any:
    """A CreateTopicsRequest (v7) of `names`, each with `partitions` partitions of 3 replicas, 30 s timeout."""
    from kio.schema.create_topics.v7 import request as ct

    topics = tuple(
        ct.CreatableTopic(name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(3),
                          assignments=(), configs=())
        for name in names
    )
    return ct.CreateTopicsRequest(topics=topics, timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)))


async def _create_topics(
    port: int, n: int, in_flight: int, per_request: int, partitions: int = 1
) -> tuple[float, list[float]]:
    from kio.schema.create_topics.v7 import response as ct_resp

    latencies: list[float] = []
    starts = iter(range(0, n, per_request))

    async def worker(client: ProtocolClient) -> None:
        for first in starts:
            request = _create_topics_request([f"bench-{i}" for i in range(first, min(n, first + per_request))],
                                             partitions)
            t0 = time.perf_counter()
            response = await client.send_typed(request, ct_resp.CreateTopicsResponse)
            failed = [t for t in response.topics if int(t.error_code) != 0]
            if failed:
                raise RuntimeError(f"CreateTopics {failed[0].name}: {failed[0].error_code!r}")
            latencies.append((time.perf_counter() - t0) * 1000.0)

    clients = [ProtocolClient("127.0.0.1", port, request_timeout=30) for _ in range(4)]
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(clients[k % len(clients)]) for k in range(in_flight)))
        return time.perf_counter() - t0, latencies
    finally:
        for client in clients:
            await client.close()


def bench_topics(base: Path, topics: int, per_request: int, in_flight: int = 64) -> tuple[float, list[float]]:
    c = ProcessCluster(base, brokers=3)
    try:
        c.start_all()
        address = ("127.0.0.1", c.broker_ports[c.broker_ids[0]])
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(CommandFailed):
                if len(asyncio.run(describe_cluster(address, 1.0))["brokers"]) == 3:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("brokers not unfenced")
            time.sleep(0.1)
        leader, _ = c.wait_leader()
        return asyncio.run(_create_topics(c.ports[leader], topics, in_flight, per_request))
    finally:
        c.close()


def _wait_unfenced(c: ProcessCluster, count: int, timeout: float = 120.0) -> None:
    """Until a broker's DescribeCluster lists exactly `count` (unfenced) brokers."""
    address = ("127.0.0.1", c.broker_ports[c.broker_ids[0]])
    deadline = time.monotonic() + timeout
    seen: list[Any] | str | None = None
    while True:
        try:
            seen = [b["id"] for b in asyncio.run(describe_cluster(address, 5.0))["brokers"]]
            if len(seen) == count:
                return
        except CommandFailed as e:
            seen = str(e)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} brokers not unfenced within {timeout} s (last seen: {seen})")
        time.sleep(0.05)


async def _send_once(port: int, request: Any) -> Any:
    async with ProtocolClient("127.0.0.1", port, request_timeout=30) as client:
        return await client.send(request)


def _create_until_done(c: ProcessCluster, topics: int, partitions: int, per_request: int = 5) -> None:
    """Create `topics` topics of `partitions` partitions, following the active controller across
    elections (an already existing topic counts as created)."""
    for first in range(0, topics, per_request):
        request = _create_topics_request([f"big-{i}" for i in range(first, min(topics, first + per_request))],
                                         partitions)
        deadline = time.monotonic() + 120
        while True:
            leader, _ = c.wait_leader()

            with contextlib.suppress(RequestError, OSError):
                response = asyncio.run(_send_once(c.ports[leader], request))
                codes = {int(t.error_code) for t in response.topics}
                if codes <= {0, 36}:  # NONE, TOPIC_ALREADY_EXISTS
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics from big-{first} not created within 120 s")
            time.sleep(0.2)


def bench_broker_restart(base: Path, partitions: int) -> tuple[float, int, float]:
    """SIGKILL a broker of an image with `partitions` partitions, restart it: seconds until it is
    unfenced again (it loads its latest snapshot, then replays the log after it), the number of
    snapshot files it had, and the seconds from the kill until the controller had fenced it."""
    # about three snapshots while the image is built (a partition record is ~80 bytes)
    snapshot_bytes = max(1 << 20, partitions * 80 // 3)
    c = ProcessCluster(base, brokers=3, config={"metadata.snapshot.max.new.record.bytes": str(snapshot_bytes)})
    try:
        c.start_all()
        _wait_unfenced(c, 3)
        _create_until_done(c, partitions // 100, 100)
        victim = c.broker_ids[-1]
        time.sleep(2.0)  # the broker applied everything (and snapshotted at least once)
        snapshots = len(list((c.meta_dir(victim) / "__cluster_metadata-0").glob("*.checkpoint")))
        c.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        _wait_unfenced(c, 2, timeout=300)  # the controller fenced it (session timeout, then every ISR)
        fenced = time.monotonic() - killed
        t0 = time.monotonic()
        c.start(victim)
        _wait_unfenced(c, 3, timeout=300)
        return time.monotonic() - t0, snapshots, fenced
    finally:
        c.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--linger-ms", type=int, default=0)
    parser.add_argument("--starts", type=int, default=5, help="runs of the start-to-unfenced measure")
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--topics-per-request", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--restarts", type=int, default=1, help="runs of the broker restart measure (minutes each)")
    parser.add_argument("--only", default="latency,failover,unfence,topics,restart")
    args = parser.parse_args()
    interrupt_on_sigterm()  # a stopped benchmark still kills its node processes
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        if "latency" in only:
            lat = bench_latency(Path(tmp) / "latency", args.appends, args.linger_ms)
            print(
                f"commit latency, single appends, 3 voters, fsync on, linger {args.linger_ms} ms, n={len(lat)}: "
                f"p50 {percentile(lat, 50):.2f} ms  p99 {percentile(lat, 99):.2f} ms  max {max(lat):.2f} ms "
                f"(target p99 <= 20 ms)",
                flush=True,
            )
        if "failover" in only:
            fo = bench_failover(Path(tmp) / "failover", args.failovers)
            print(
                f"failover, SIGKILL leader -> next committed append, default timeouts, n={len(fo)}: "
                f"median {statistics.median(fo):.2f} s  p99 {percentile(fo, 99):.2f} s  max {max(fo):.2f} s "
                f"(target median <= 2.5 s, p99 <= 4 s)",
                flush=True,
            )
        if "unfence" in only:
            runs = [bench_unfence(Path(tmp) / f"unfence-{r}") for r in range(args.starts)]
            for t, ready, marks in runs:
                steps = ", ".join(f"{k} {v:.2f}" for k, v in marks.items())
                print(f"  start {t:.2f} s: every process listening {ready:.2f}, {steps}", flush=True)
            t = statistics.median(r[0] for r in runs)
            ready = statistics.median(r[1] for r in runs)
            print(
                f"start of 3 controllers + 5 brokers -> all brokers unfenced, median of {len(runs)}: {t:.2f} s "
                f"(target <= 5 s); {ready:.2f} s of it until every process listened",
                flush=True,
            )
        if "topics" in only:
            elapsed, lats = bench_topics(Path(tmp) / "topics", args.topics, args.topics_per_request)
            print(
                f"CreateTopics to the active controller, 1 partition x RF 3, {args.topics} topics, "
                f"{args.topics_per_request} per request, 64 requests in flight: {args.topics / elapsed:.0f} "
                f"topics/s committed, request latency p50 {percentile(lats, 50):.1f} ms "
                f"p99 {percentile(lats, 99):.1f} ms (target >= 1,000 topics/s)",
                flush=True,
            )
        if "restart" in only:
            try:
                runs3 = [
                    bench_broker_restart(Path(tmp) / f"restart-{r}", args.partitions) for r in range(args.restarts)
                ]
                for t, snaps, fenced in runs3:
                    print(f"  restart {t:.2f} s ({snaps} snapshot files), fenced after {fenced:.1f} s", flush=True)
                print(
                    f"broker restart with {args.partitions} partitions in the image, median of {len(runs3)}: "
                    f"{statistics.median(r[0] for r in runs3):.2f} s from start to unfenced (the kill was fenced, "
                    f"out of every ISR, after {statistics.median(r[2] for r in runs3):.1f} s)",
                    flush=True,
                )
            except TimeoutError as e:
                print(f"broker restart with {args.partitions} partitions: FAILED: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
