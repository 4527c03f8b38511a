"""The queue workload's Kafka client seam: one process's producer and assign-mode consumer.

`QueueClient` is what the `queue` workload (workloads.queue) needs from Kafka, in Kafka's terms:
create the topic, send one record to one partition and learn its offset (acks=all), ask a
partition's log start and high-water mark (ListOffsets), assign partitions at fetch positions and
poll records from them. Two implementations: `workloads.queue_confluent` (confluent-kafka, the
real client) and `workloads.fake_queue` (in-memory partition logs, for tests).

Errors keep Jepsen's meaning: a client raises `DefiniteFailure(name)` when Kafka's error proves
nothing was appended (`definite_send_error`), `IndefiniteError(name)` when the record may still
be in the log (timeouts, NOT_LEADER_OR_FOLLOWER: a delayed produce may have appended), with
Kafka's error names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

TopicPartition = tuple[str, int]
Records = dict[TopicPartition, list[tuple[int, bytes | None]]]
"""Per partition, the polled records as (offset, value) in the order the consumer got them."""

DEFINITE_SEND_ERRORS = frozenset({
    "NOT_ENOUGH_REPLICAS",  # checked before the append (NOT_ENOUGH_REPLICAS_AFTER_APPEND is not definite)
    "UNKNOWN_TOPIC_OR_PARTITION",
    "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE",
    "CORRUPT_MESSAGE",
    "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "UNSUPPORTED_VERSION",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "not-sent",
})
"""Produce errors after which the record certainly is not in the log (plus every INVALID_*)."""


def definite_send_error(name: str) -> bool:
    """Whether a send refused with Kafka error `name` certainly appended nothing."""
    return name in DEFINITE_SEND_ERRORS or name.startswith(("INVALID_", "not-sent"))


def key_of(tp: TopicPartition) -> str:
    """A partition as the history names it: Kafka's `topic-partition`."""
    return f"{tp[0]}-{tp[1]}"


def partition_of(key: str) -> TopicPartition:
    """The partition a history key names (the inverse of `key_of`)."""
    topic, sep, p = key.rpartition("-")
    if not sep or not topic or not p.isdigit():
        raise ValueError(f"{key!r} is not a topic-partition")
    return topic, int(p)


class QueueClient(Protocol):
    """One client process's producer and consumer (assign mode: no group, no commits)."""

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str]) -> None:
        """Create `topic`; one that already exists is fine (another process created it)."""
        ...

    async def send(self, tp: TopicPartition, value: bytes) -> int:
        """Produce one record with acks=all, no retries; its offset once acknowledged."""
        ...

    async def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        """(log start offset, high-water mark) of a partition, asked of its leader."""
        ...

    async def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        """Consume exactly these partitions, each from its fetch position."""
        ...

    async def poll(self, max_wait: float) -> Records:
        """The records fetched from the assigned partitions, waiting up to `max_wait` s for some."""
        ...

    async def close(self) -> None: ...


QueueConnector = Callable[[str, int], QueueClient]
"""(node, process) → that process's client, bootstrapped at the node's broker."""
