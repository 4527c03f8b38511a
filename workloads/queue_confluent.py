"""The `QueueClient` seam over confluent-kafka (librdkafka): the queue workload's real client.

One process = one idempotent Producer (KIP-98: acks=all, one request in flight; librdkafka re-sends
within `message.timeout.ms` and the broker appends each batch once, by producer id and sequence, so
a duplicate in the log is the cluster's doing — without idempotence librdkafka was seen re-sending a
record even with `retries=0`, and a duplicate would prove nothing; a fatal producer error drops the
producer, and the next send starts a new one with a new producer id) and
one Consumer in assign mode (a group id librdkafka insists on, but no subscribe and no commits;
`auto.offset.reset=earliest`, so a fetch position the log lost shows as a jump the checker sees).
Both are used without blocking the event loop: produce + `poll(0)` until the delivery report,
`consume(timeout=0)` until records or the wait is over; ListOffsets (`get_watermark_offsets`)
runs in a thread. Errors carry Kafka's names (librdkafka's own `_LOCAL` errors keep theirs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kraftlab.workloads.client import DefiniteFailure
from kraftlab.workloads.kafka import IndefiniteError, error_name
from kraftlab.workloads.queue_client import QueueConnector, Records, TopicPartition, definite_send_error

LOG = logging.getLogger("kraftlab.workloads.queue.rdkafka")
LOCAL_DEFINITE = frozenset({"_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_QUEUE_FULL", "_MSG_SIZE_TOO_LARGE",
                            "_INVALID_ARG", "_PURGE_QUEUE"})
"""librdkafka's local errors for a record that never left the client."""
TICK = 0.005
FETCH_WAIT_MS = 100


def kafka_name(err: KafkaError) -> str:
    """Kafka's name of a broker error; librdkafka's name for its local ones (negative codes)."""
    code = err.code()
    return error_name(code) if code >= 0 else str(err.name())


RETRIED_BY_THE_CLIENT = frozenset({"NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PARTITION"})
"""Broker errors that prove nothing was appended by the attempt they answer, but that librdkafka
retries: its delivery report carries the last attempt's error, and an earlier attempt may have
been appended (a run: the old leader appended it, the new leader whose ISR shrank in the failover
answered NOT_ENOUGH_REPLICAS, the record was read back)."""


def raise_send_error(err: KafkaError) -> None:
    name = kafka_name(err)
    if name in LOCAL_DEFINITE or (definite_send_error(name) and name not in RETRIED_BY_THE_CLIENT):
        raise DefiniteFailure(name)
    raise IndefiniteError(name)


class ConfluentQueueClient:
    """A process's producer and consumer; `bootstrap` is librdkafka's list ("h:p,h:p")."""

    def __init__(self, bootstrap: str, process: int, request_timeout: float = 3.0) -> None:
        ms = max(500, int(request_timeout * 1000))
        self.common: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "client.id": f"kraftlab-queue-{process}", "logger": LOG,
            "log_level": 3,
            "broker.address.family": "v4", "topic.metadata.refresh.interval.ms": 1000,
            "socket.timeout.ms": max(ms, FETCH_WAIT_MS + 1000), "reconnect.backoff.max.ms": 500}
        self.producer_conf = {**self.common, "acks": "all", "enable.idempotence": True,
                              "max.in.flight.requests.per.connection": 1,
                              "linger.ms": 0, "request.timeout.ms": ms, "message.timeout.ms": ms}
        self.consumer_conf = {**self.common, "group.id": f"kraftlab-queue-{process}", "enable.auto.commit": False,
                              "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
                              "isolation.level": "read_uncommitted", "fetch.wait.max.ms": FETCH_WAIT_MS,
                              "enable.partition.eof": False}
        self.timeout = request_timeout
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self.producer_conf)
        return self._producer

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self.consumer_conf)
        return self._consumer

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str]) -> None:
        admin = AdminClient(self.common)
        futures = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=dict(configs))],
                                      request_timeout=self.timeout, operation_timeout=self.timeout)
        try:
            await asyncio.wrap_future(futures[topic])
        except KafkaException as e:
            err = e.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise

    async def send(self, tp: TopicPartition, value: bytes) -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[KafkaError | None, Any]] = loop.create_future()

        def report(err: KafkaError | None, msg: Any) -> None:
            if not done.done():
                done.set_result((err, msg))

        p = self.producer
        try:
            p.produce(tp[0], value=value, partition=tp[1], on_delivery=report)
        except BufferError as e:
            raise DefiniteFailure("not-sent: _QUEUE_FULL") from e
        except KafkaException as e:  # refused before it was queued
            raise DefiniteFailure(f"not-sent: {kafka_name(e.args[0])}") from e
        tick = TICK
        while not done.done():
            p.poll(0)
            if not done.done():
                await asyncio.sleep(tick)
                tick = min(tick * 1.5, 0.05)
        err, msg = done.result()
        if err is not None:
            if err.fatal():  # the idempotent producer is unusable: the next send makes a new one
                self._producer = None
            raise_send_error(err)
        return int(msg.offset())

    async def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        c = self.consumer
        try:
            low, high = await asyncio.to_thread(c.get_watermark_offsets, CkTopicPartition(tp[0], tp[1]),
                                                timeout=self.timeout, cached=False)
        except KafkaException as e:
            raise IndefiniteError(kafka_name(e.args[0])) from e
        return int(low), int(high)

    async def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        self.consumer.assign([CkTopicPartition(t, p, o) for (t, p), o in positions.items()])

    async def poll(self, max_wait: float) -> Records:
        c = self.consumer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        out: Records = {}
        tick = TICK
        while True:
            for m in c.consume(num_messages=500, timeout=0):
                err = m.error()
                if err is not None:
                    if err.fatal():
                        raise IndefiniteError(kafka_name(err))
                    LOG.debug("consumer: %s", err)
                    continue
                topic, part, offset = m.topic(), m.partition(), m.offset()
                if topic is None or part is None or offset is None:
                    continue
                out.setdefault((topic, part), []).append((int(offset), m.value()))
            if out or loop.time() >= deadline:
                return out
            await asyncio.sleep(min(tick, max(0.0, deadline - loop.time())))
            tick = min(tick * 1.5, 0.05)

    async def close(self) -> None:
        p, c = self._producer, self._consumer
        self._producer = self._consumer = None
        if p is not None:
            p.purge(in_queue=True, in_flight=True)  # a retired process's record in doubt stays in doubt
            p.poll(0)
        if c is not None:
            await asyncio.to_thread(c.close)


def connector(bootstraps: Mapping[str, str], request_timeout: float = 3.0) -> QueueConnector:
    """A `QueueConnector`: node → a client bootstrapped at that node's broker address first, then
    the others' (a Kafka client talks to each partition's leader anyway; the others let a client
    whose own node is down or cut off still find the cluster, as a real application's would)."""

    def connect(node: str, process: int) -> ConfluentQueueClient:
        if node not in bootstraps:
            raise DefiniteFailure(f"not-sent: {node} has no broker listener")
        others = [a for n, a in sorted(bootstraps.items()) if n != node]
        return ConfluentQueueClient(",".join([bootstraps[node], *others]), process, request_timeout)

    return connect
