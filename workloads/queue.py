"""The `queue` workload (Jepsen's Kafka workload): producers send unique values to partitions,
assign-mode consumers poll them and record each record's offset; the queue checker judges it.

Ops (history field `workload: "queue"`; docs/workload-ops.md, "queue"; checker `checker.queue`):
- `send` {"key": "queue-2", "value": 17} → {"key", "value", "offset"}: one record produced with
  acks=all by an idempotent producer (KIP-98) to the partition the key names (Kafka's `topic-partition`); values are
  unique across the test. fail only when Kafka's error proves nothing was appended
  (`queue_client.definite_send_error`), info otherwise.
- `assign` {"keys": [...]} → {"keys", "positions"}: the consumer takes these partitions from their
  log start (ListOffsets earliest). A read: unanswered, it is `fail`.
- `poll` {"positions": {key: fetch offset}} → {"records": {key: [[offset, value], ...]}}: fetch
  from the consumer's positions (which the invocation records, so the checker judges skips);
  the final reads ({"positions": {key: 0}, "final": true}, after the heal, one per partition per
  broker) read a partition from offset 0 up to the high-water mark it had when the read began →
  also {"high_water_marks": {key: hw}}; a final read that does not get there within `final_wait`
  (ListOffsets asked again while a partition has no leader yet) is `fail`.

Each process is one Kafka client (a producer and a consumer, bootstrapped at its node's broker,
over the `QueueClient` seam). The generator steers a process's polls by `ConsumerBook`: where each
process's consumer stands, which only that process's client updates after its own ops. The topic
(`partitions`, replication factor min(3, brokers), `min.insync.replicas` one less, at least 1 —
or the run's `default.replication.factor` and `min.insync.replicas` when it sets them: see
`catalog.build`) is created when the first client opens.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.workloads.client import Completion, DefiniteFailure, Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import IndefiniteError
from kraftlab.workloads.ops import OncePer, op
from kraftlab.workloads.queue_client import QueueClient, QueueConnector, Records, key_of, partition_of

WORKLOAD = "queue"
TOPIC = "queue"


def decode(value: bytes | None) -> Any:
    """A polled record's value as the history records it: the sent integer, else its text."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace")
    try:
        return int(text)
    except ValueError:
        return text


@dataclass
class ConsumerBook:
    """process → (history key → the consumer's next fetch offset), for assigned processes."""

    positions: dict[int, dict[str, int]] = field(default_factory=dict)


@dataclass
class QueueWorkload:
    brokers: Sequence[str]
    connector: QueueConnector
    partitions: int = 4
    topic: str = TOPIC
    send_share: float = 0.5
    reassign_share: float = 0.03
    poll_wait: float = 0.2
    final_wait: float = 4.0
    replicas: int | None = None
    """The topic's replication factor; None: min(3, brokers)."""
    min_isr: int | None = None
    """Its min.insync.replicas; None: one less than the replication factor, at least 1."""
    book: ConsumerBook = field(default_factory=ConsumerBook)
    _values: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _topic_ready: bool = False
    _topic_lock: asyncio.Lock | None = None

    @property
    def replication_factor(self) -> int:
        return self.replicas if self.replicas is not None else max(1, min(3, len(self.brokers)))

    @property
    def min_insync_replicas(self) -> int:
        return self.min_isr if self.min_isr is not None else max(1, self.replication_factor - 1)

    @property
    def keys(self) -> list[str]:
        return [key_of((self.topic, p)) for p in range(self.partitions)]

    # --- generator -------------------------------------------------------------------------

    def _next(self, ctx: Context) -> Invocation:
        mine = self.book.positions.get(ctx.process)
        if mine is None or ctx.rng.random() < self.reassign_share:
            keys = sorted(ctx.rng.sample(self.keys, ctx.rng.randint(1, self.partitions)))
            return op(WORKLOAD, "assign", {"keys": keys})
        if ctx.rng.random() < self.send_share:
            return op(WORKLOAD, "send", {"key": ctx.rng.choice(self.keys), "value": next(self._values)})
        return op(WORKLOAD, "poll", {"positions": dict(mine)})

    def generator(self) -> FnGen:
        return FnGen(self._next)

    def final_reads(self) -> OncePer:
        """One final read per partition per broker: a partition still without a leader fails its
        own reads only, and the others' are judged."""
        return OncePer([k for _ in self.brokers for k in self.keys],
                       lambda key: op(WORKLOAD, "poll", {"positions": {key: 0}, "final": True}))

    # --- clients ---------------------------------------------------------------------------

    async def ensure_topic(self, qc: QueueClient) -> None:
        """Create the topic once per test (the first client to open does it; the lock belongs to
        the main phase's event loop, and later phases find the topic made)."""
        if self._topic_ready:
            return
        if self._topic_lock is None:
            self._topic_lock = asyncio.Lock()
        async with self._topic_lock:
            if not self._topic_ready:
                await qc.create_topic(self.topic, self.partitions, self.replication_factor,
                                      {"min.insync.replicas": str(self.min_insync_replicas)})
                self._topic_ready = True

    def factory(self) -> QueueClientFactory:
        return QueueClientFactory(self)


@dataclass
class QueueProcess:
    """The `Client` protocol for one process: invocations → QueueClient calls → completions."""

    node_name: str
    process: int
    qc: QueueClient
    workload: QueueWorkload
    current: dict[str, int] | None = None
    """Where the consumer stands as this client left it (None: not assigned, or unknown after an error)."""

    @property
    def node(self) -> str:
        return self.node_name

    async def invoke(self, inv: Invocation) -> Completion:
        try:
            if inv.f == "send":
                return Completion("ok", await self._send(inv.value))
            if inv.f == "assign":
                return Completion("ok", await self._read(self._assign(inv.value["keys"])))
            if inv.f == "poll":
                run = self._final(inv.value) if inv.value.get("final") else self._poll(inv.value["positions"])
                return Completion("ok", await self._read(run))
        except IndefiniteError as e:
            return Completion("info", None, e.error)
        raise DefiniteFailure(f"not-sent: the queue workload has no op {inv.f!r}")

    async def _read(self, run: Any) -> Any:
        """A consumer op: changes nothing in the logs, so unanswered it is `fail` (and the
        consumer's position is unknown: the next poll assigns anew at the recorded positions)."""
        try:
            return await run
        except DefiniteFailure:
            self.current = None
            raise
        except Exception as e:
            self.current = None
            raise DefiniteFailure(f"read-unanswered: {getattr(e, 'error', None) or type(e).__name__}") from e

    async def _send(self, v: Mapping[str, Any]) -> dict[str, Any]:
        offset = await self.qc.send(partition_of(v["key"]), str(v["value"]).encode())
        return {"key": v["key"], "value": v["value"], "offset": offset}

    async def _seek(self, positions: Mapping[str, int]) -> None:
        self.current = None
        await self.qc.assign({partition_of(k): o for k, o in positions.items()})
        self.current = dict(positions)

    async def _assign(self, keys: Sequence[str]) -> dict[str, Any]:
        starts = {k: (await self.qc.watermarks(partition_of(k)))[0] for k in keys}
        await self._seek(starts)
        self.workload.book.positions[self.process] = dict(starts)
        return {"keys": list(keys), "positions": starts}

    def _advance(self, got: Records, into: dict[str, list[list[Any]]]) -> None:
        assert self.current is not None
        for tp, rs in got.items():
            k = key_of(tp)
            into.setdefault(k, []).extend([o, decode(v)] for o, v in rs)
            if rs:
                self.current[k] = max(self.current.get(k, 0), rs[-1][0] + 1)

    async def _poll(self, positions: Mapping[str, int]) -> dict[str, Any]:
        if self.current != dict(positions):
            await self._seek(positions)
        records: dict[str, list[list[Any]]] = {}
        self._advance(await self.qc.poll(self.workload.poll_wait), records)
        assert self.current is not None
        self.workload.book.positions[self.process] = dict(self.current)
        return {"records": records}

    async def _final(self, v: Mapping[str, Any]) -> dict[str, Any]:
        positions: dict[str, int] = {k: int(o) for k, o in v["positions"].items()}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.workload.final_wait
        hws: dict[str, int] = {}
        for k in positions:  # after the heal a partition may still be electing its leader: ask again
            while k not in hws:
                try:
                    hws[k] = (await self.qc.watermarks(partition_of(k)))[1]
                except (DefiniteFailure, IndefiniteError):
                    if loop.time() >= deadline:
                        raise
                    await asyncio.sleep(0.2)
        await self._seek(positions)
        records: dict[str, list[list[Any]]] = {}
        while True:
            assert self.current is not None
            behind = {k: hw for k, hw in hws.items() if self.current.get(k, 0) < hw}
            if not behind:
                return {"records": records, "high_water_marks": hws}
            left = deadline - loop.time()
            if left <= 0:
                where = ", ".join(f"{k} at {self.current.get(k)} < {hw}" for k, hw in sorted(behind.items()))
                raise DefiniteFailure(f"final-read-incomplete: below the high-water mark: {where}")
            self._advance(await self.qc.poll(min(left, self.workload.poll_wait)), records)

    async def close(self) -> None:
        await self.qc.close()


@dataclass
class QueueClientFactory:
    """The `ClientFactory` protocol: a fresh QueueClient per process (the topic made first)."""

    workload: QueueWorkload

    async def open(self, node: str, process: int) -> QueueProcess:
        qc = self.workload.connector(node, process)
        try:
            await self.workload.ensure_topic(qc)
        except BaseException:
            await qc.close()
            raise
        return QueueProcess(node, process, qc, self.workload)
