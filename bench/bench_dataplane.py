"""Benchmark of the broker data plane (issue 18's targets): confluent-kafka, unmodified, against
real `kraft-node start` processes on loopback — 1 controller and 3 brokers — producing 1 KiB
messages with acks=all to a topic of replication factor 3 (min.insync.replicas=2), then reading
them back with an assign-mode consumer.

Prints, per run and as medians over runs:
- produce throughput (MB/s of values acknowledged, all sent at once; target >= 50 MB/s) and the
  latency of that flood (from produce() to the delivery report: mostly time queued in the client);
- produce latency p50/p99 of a paced phase (--rate messages/s; target p99 <= 50 ms), with the time
  the node processes spent on a CPU and waiting in a run queue for one meanwhile (/proc/PID/schedstat:
  on a shared machine the waiting, not the node, makes the tail);
- consume throughput (MB/s of values read from offset 0 by a consumer that has the topic's metadata,
  from assign and from the first record; target >= 100 MB/s).

    .venv/bin/python bench/bench_dataplane.py [--messages 20000] [--partitions 3] [--runs 1]
                                              [--linger-ms 5] [--paced 5000] [--rate 2000] [--nagle]

Real processes: run it through the machine's end-to-end slot wrapper when the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraftlab.node.admin import AdminError, describe_cluster_now
from kraftlab.testing.kraftnode import ProcessCluster

VALUE_BYTES = 1024


def sched_ns(pids: list[int]) -> tuple[int, int]:
    """(ns on a CPU, ns waiting in a run queue) summed over `pids` (/proc/PID/schedstat; 0, 0 where absent)."""
    on, waiting = 0, 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        except OSError:
            continue
        on, waiting = on + int(fields[0]), waiting + int(fields[1])
    return on, waiting


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1)))]


def wait_unfenced(cluster: ProcessCluster, timeout: float = 120.0) -> None:
    port = next(iter(cluster.broker_ports.values()))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ids = sorted(b["id"] for b in describe_cluster_now("127.0.0.1", port)["brokers"])
        except AdminError:
            ids = []
        if ids == cluster.broker_ids:
            return
        time.sleep(0.2)
    raise TimeoutError("brokers not unfenced")


def create_topic(bootstrap: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
                        request_timeout=30)[name].result()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every partition led before the clock starts
        parts = admin.list_topics(name, timeout=10).topics[name].partitions
        if len(parts) == partitions and all(p.leader >= 0 and len(p.isrs) == 3 for p in parts.values()):
            return name
        time.sleep(0.2)
    raise TimeoutError("topic not ready")


def produce(bootstrap: str, topic: str, n: int, linger_ms: int, rate: float = 0.0,
            nagle_off: bool = True) -> tuple[float, list[float]]:
    """(seconds for all n to be acknowledged, per-message latencies in ms); `rate` > 0 paces the
    sends at that many messages per second (latency without a queue of unsent messages)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                         # librdkafka leaves Nagle on by default (Kafka's Java client sets TCP_NODELAY):
                         # on loopback a small request can wait for the delayed ACK of the previous one
                         "socket.nagle.disable": nagle_off})
    value = b"x" * VALUE_BYTES
    latencies: list[float] = []
    errors: list[Any] = []

    def report(sent: float) -> Callable[[Any, Any], None]:
        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)
            latencies.append((time.perf_counter() - sent) * 1000.0)

        return delivered

    began = time.perf_counter()
    for i in range(n):
        if rate > 0:
            due = began + i / rate
            while time.perf_counter() < due:
                producer.poll(max(0.0, min(0.001, due - time.perf_counter())))
        sent = time.perf_counter()
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=report(sent))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(300) != 0 or errors:
        raise RuntimeError(f"produce failed: {len(errors)} errors, e.g. {errors[:3]}")
    return time.perf_counter() - began, latencies


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> tuple[float, float]:
    """(seconds from assign to the last record, seconds from the first record to the last)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        # The partitions' leaders known before the clock starts: librdkafka assigned a partition whose
        # leader it does not know yet waits a fixed 500 ms before looking its offset up (whatever the
        # broker), which alone made a 20 MB read look like 35 MB/s.
        consumer.list_topics(topic, timeout=30)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        began = time.perf_counter()
        first: float | None = None
        while got < n:
            if time.perf_counter() - began > 300:
                raise TimeoutError(f"read {got} of {n}")
            batch = sum(1 for m in consumer.consume(10_000, 0.5) if m.error() is None)
            if batch and first is None:
                first = time.perf_counter()
            got += batch
        end = time.perf_counter()
        return end - began, end - (first or began)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--paced", type=int, default=5000, help="messages of the paced latency phase (0: none)")
    parser.add_argument("--rate", type=float, default=2000.0, help="messages/s of the paced latency phase")
    parser.add_argument("--nagle", action="store_true", help="leave librdkafka's default (Nagle on) for the producer")
    args = parser.parse_args()
    mb = args.messages * VALUE_BYTES / 1e6
    produce_mbs, p50s, p99s, consume_mbs, steady_mbs, paced_p50s, paced_p99s = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-dataplane-") as tmp:
        cluster = ProcessCluster(Path(tmp), n=1, brokers=3)
        try:
            cluster.start_all()
            wait_unfenced(cluster)
            for run in range(args.runs):
                topic = create_topic(cluster.bootstrap, args.partitions)
                took, lat = produce(cluster.bootstrap, topic, args.messages, args.linger_ms, nagle_off=not args.nagle)
                read, steady = consume(cluster.bootstrap, topic, args.partitions, args.messages)
                produce_mbs.append(mb / took)
                p50s.append(percentile(lat, 50))
                p99s.append(percentile(lat, 99))
                consume_mbs.append(mb / read)
                steady_mbs.append(mb / steady)
                print(f"run {run + 1}: produce {mb / took:.1f} MB/s ({args.messages} x 1 KiB in {took:.2f} s, "
                      f"all sent at once: latency p50 {p50s[-1]:.1f} ms p99 {p99s[-1]:.1f} ms); consume "
                      f"{mb / read:.1f} MB/s from assign, {mb / steady:.1f} MB/s from the first record")
                if args.paced:
                    paced_topic = create_topic(cluster.bootstrap, args.partitions)
                    nodes = [proc.pid for proc in cluster.procs.values()]
                    (cpu0, wait0), began = sched_ns(nodes), time.perf_counter()
                    _, paced = produce(cluster.bootstrap, paced_topic, args.paced, args.linger_ms, args.rate,
                                       not args.nagle)
                    (cpu1, wait1), took = sched_ns(nodes), time.perf_counter() - began
                    paced_p50s.append(percentile(paced, 50))
                    paced_p99s.append(percentile(paced, 99))
                    # the machine's share in the figure: how long the node processes waited for a CPU
                    print(f"run {run + 1}: paced {args.paced} at {args.rate:.0f}/s: "
                          f"latency p50 {paced_p50s[-1]:.1f} ms p99 {paced_p99s[-1]:.1f} ms; node processes "
                          f"on a CPU {(cpu1 - cpu0) / 1e6 / took:.0f} ms/s, waiting for one (run queue) "
                          f"{(wait1 - wait0) / 1e6 / took:.0f} ms/s")
        finally:
            cluster.close()
    print(f"median over {args.runs}: produce {statistics.median(produce_mbs):.1f} MB/s (target >= 50), "
          f"flood latency p99 {statistics.median(p99s):.1f} ms p50 {statistics.median(p50s):.1f} ms; "
          f"consume {statistics.median(consume_mbs):.1f} MB/s from assign, "
          f"{statistics.median(steady_mbs):.1f} MB/s steady (target >= 100)")
    if paced_p99s:
        print(f"median over {args.runs}: paced produce latency p99 {statistics.median(paced_p99s):.1f} ms "
              f"(target <= 50), p50 {statistics.median(paced_p50s):.1f} ms")


if __name__ == "__main__":
    main()
