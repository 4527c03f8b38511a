"""ISR changes a leader asks the controller for (sans-IO), as Kafka's Partition.maybeShrinkIsr /
maybeExpandIsr: an ISR follower not caught up with the leader's log end for
`replica.lag.time.max.ms` is dropped; a replica outside the ISR whose log reached the high-water
mark and the start of the leader's epoch (and whose broker is usable) is added. Each change is one
AlterPartition (v3: the ISR with the brokers' epochs, the partition epoch it applies to); one in
flight per partition, until the answer or the image shows a new partition epoch. The ISR in use
stays the image's until the change is committed (a shrink waits for the commit before the HW
stops waiting for the dropped follower: the conservative half of Kafka's "maximal ISR").

    AlterIsr(token, request) -> send to the active controller, then on_response / on_failure
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.alter_partition.v3.request import AlterPartitionRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.broker.replication.partition import Partition, Role
from kraftlab.node.controller.messages import build
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class AlterIsr:
    token: int
    request: Any


@dataclass
class _Pending:
    token: int
    partition_epoch: int
    isr: tuple[int, ...]
    resend_at: int | None = None
    """Set when the request's fate is unknown (no answer): the same change is sent again then."""


class IsrManager:
    def __init__(self, node_id: int, partitions: Mapping[TopicPartition, Partition], image: Callable[[], MetadataImage],
                 broker_epoch: Callable[[], int], max_lag_ms: int, retry_backoff_ms: int = 100) -> None:  # fmt: skip
        self.node_id = node_id
        self.partitions = partitions
        self.image = image
        self.broker_epoch = broker_epoch
        self.max_lag_ms = max_lag_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._tokens = 0
        self._pending: dict[TopicPartition, _Pending] = {}
        self._by_token: dict[int, TopicPartition] = {}
        self._resume_at: dict[TopicPartition, int] = {}
        self._outbox: list[AlterIsr | JournalEvent] = []

    def take_outputs(self) -> list[AlterIsr | JournalEvent]:
        out, self._outbox = self._outbox, []
        return out

    def wanted_isr(self, p: Partition, now_ms: int) -> tuple[int, ...]:
        image = self.image()
        lagging = set(p.lagging(self.node_id, now_ms, self.max_lag_ms))
        joining = [r for r in p.caught_up(self.node_id)
                   if image.is_usable(r) and p.end_offset_of(r, self.node_id) >= p.leader_epoch_start]  # fmt: skip
        return tuple(r for r in p.replicas if (r in p.isr and r not in lagging) or r in joining)

    def tick(self, now_ms: int) -> None:
        for key, p in self.partitions.items():
            pending = self._pending.get(key)
            if pending is not None and pending.partition_epoch != p.partition_epoch:
                self._by_token.pop(pending.token, None)
                del self._pending[key]
                p.pending_isr = ()
                pending = None
            if p.role is not Role.LEADER:
                if pending is not None:
                    self._by_token.pop(pending.token, None)
                    del self._pending[key]
                p.pending_isr = ()
                continue
            if pending is not None:
                if pending.resend_at is not None and now_ms >= pending.resend_at:
                    self._send(key, p, pending.isr)
                continue
            p.pending_isr = ()
            if now_ms < self._resume_at.get(key, 0):
                continue
            wanted = self.wanted_isr(p, now_ms)
            if set(wanted) == set(p.isr) or self.node_id not in wanted:
                continue
            self._send(key, p, wanted)

    def _send(self, key: TopicPartition, p: Partition, isr: tuple[int, ...]) -> None:
        brokers = self.image().brokers
        old = self._pending.get(key)
        if old is not None:
            self._by_token.pop(old.token, None)
        self._tokens += 1
        self._pending[key] = _Pending(self._tokens, p.partition_epoch, isr)
        p.pending_isr = isr
        self._by_token[self._tokens] = key
        request = build(AlterPartitionRequest, {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "topics": [{"topic_id": p.topic_id, "partitions": [{
                "partition_index": p.index, "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                "new_isr_with_epochs": [{"broker_id": r, "broker_epoch": brokers[r].epoch if r in brokers else -1}
                                        for r in isr],
            }]}],
        })  # fmt: skip
        self._outbox.append(AlterIsr(self._tokens, request))
        self._outbox.append(JournalEvent("isr_change_requested", {
            "topic": p.topic, "partition": p.index, "leader_epoch": p.leader_epoch,
            "partition_epoch": p.partition_epoch, "isr": list(p.isr), "new_isr": list(isr),
        }))  # fmt: skip

    def on_response(self, token: int, response: Any, now_ms: int) -> None:
        key = self._by_token.pop(token, None)
        if key is None:
            return
        errors = [int(part.error_code) for t in response.topics for part in t.partitions]
        if response.error_code != ErrorCode.none or any(errors):  # refused: the committed ISR stands
            self._pending.pop(key, None)
            self._resume_at[key] = now_ms + self.retry_backoff_ms
            p = self.partitions.get(key)
            if p is not None:
                p.pending_isr = ()
        # success: the change shows up in the image (a new partition epoch), which clears it

    def on_failure(self, token: int, now_ms: int) -> None:
        """No answer: the change may have been committed, so its ISR stays pending (the HW keeps
        waiting for the union) and the same change is sent again after the backoff."""
        key = self._by_token.pop(token, None)
        pending = self._pending.get(key) if key is not None else None
        if pending is not None:
            pending.resend_at = now_ms + self.retry_backoff_ms
