"""In-memory partition logs with Kafka's semantics: the `QueueClient` seam's fake.

`FakeLogs` is the cluster's data: per topic-partition an append-only list of records, offsets
from the log start, a high-water mark (every acknowledged append is committed: the fake is a
correct, fully replicated log). `append` and `fetch` are the two places a log can go wrong, so a
test plants a bug by overriding one of them in a subclass. Faults (seeded, the same ones a real
cluster shows a producer): `p_timeout` — the append happens or not, and the producer hears
REQUEST_TIMED_OUT (indefinite); `p_refuse` — NOT_ENOUGH_REPLICAS before any append (definite).

`FakeQueueClient` is one process's producer and assign-mode consumer over the logs:
`FakeLogs.connector` hands one out per (node, process), as `queue_confluent` does for real.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftlab.workloads.client import DefiniteFailure
from kraftlab.workloads.kafka import IndefiniteError
from kraftlab.workloads.queue_client import Records, TopicPartition

MAX_POLL_RECORDS = 50


@dataclass
class PartitionLog:
    start: int = 0
    records: list[bytes | None] = field(default_factory=list)

    @property
    def end(self) -> int:
        """The log end offset (the high-water mark: the fake commits every append)."""
        return self.start + len(self.records)


@dataclass
class FakeLogs:
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    p_timeout: float = 0.0
    p_refuse: float = 0.0
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)
    """topic → partition count."""

    def create(self, topic: str, partitions: int) -> None:
        if topic in self.topics:
            return
        if partitions < 1:
            raise DefiniteFailure("INVALID_PARTITIONS")
        self.topics[topic] = partitions
        for p in range(partitions):
            self.logs[(topic, p)] = PartitionLog()

    def log(self, tp: TopicPartition) -> PartitionLog:
        pl = self.logs.get(tp)
        if pl is None:
            raise DefiniteFailure("UNKNOWN_TOPIC_OR_PARTITION")
        return pl

    def produce(self, tp: TopicPartition, value: bytes) -> int:
        """A Produce with acks=all as the producer sees it: faults, then `append`."""
        self.log(tp)  # UNKNOWN_TOPIC_OR_PARTITION before any fault
        r = self.rng.random()
        if r < self.p_refuse:
            raise DefiniteFailure("NOT_ENOUGH_REPLICAS")
        if r < self.p_refuse + self.p_timeout:
            if self.rng.random() < 0.5:
                self.append(tp, value)
            raise IndefiniteError("REQUEST_TIMED_OUT")
        return self.append(tp, value)

    def append(self, tp: TopicPartition, value: bytes) -> int:
        """Append one record; its offset."""
        pl = self.log(tp)
        pl.records.append(value)
        return pl.end - 1

    def fetch(self, tp: TopicPartition, offset: int, max_records: int) -> list[tuple[int, bytes | None]]:
        """Records from `offset` up to the high-water mark (OFFSET_OUT_OF_RANGE outside the log)."""
        pl = self.log(tp)
        if not pl.start <= offset <= pl.end:
            raise DefiniteFailure("OFFSET_OUT_OF_RANGE")
        i = offset - pl.start
        return [(pl.start + j, pl.records[j]) for j in range(i, min(len(pl.records), i + max_records))]

    def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        pl = self.log(tp)
        return pl.start, pl.end

    def connector(self, node: str, process: int) -> FakeQueueClient:
        return FakeQueueClient(self)


@dataclass
class FakeQueueClient:
    """The `QueueClient` protocol over `FakeLogs`."""

    logs: FakeLogs
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    closed: bool = False

    def _open(self) -> None:
        if self.closed:
            raise DefiniteFailure("not-sent: client closed")

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str]) -> None:
        self._open()
        self.logs.create(topic, partitions)

    async def send(self, tp: TopicPartition, value: bytes) -> int:
        self._open()
        await asyncio.sleep(0)
        return self.logs.produce(tp, value)

    async def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        self._open()
        return self.logs.watermarks(tp)

    async def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        self._open()
        self.positions = dict(positions)

    async def poll(self, max_wait: float) -> Records:
        self._open()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        while True:
            out: Records = {}
            for tp, pos in self.positions.items():
                got = self.logs.fetch(tp, pos, MAX_POLL_RECORDS)
                if got:
                    out[tp] = got
                    self.positions[tp] = got[-1][0] + 1
            if out or loop.time() >= deadline:
                return out
            await asyncio.sleep(min(0.01, max(0.0, deadline - loop.time())))

    async def close(self) -> None:
        self.closed = True
