"""One partition as this broker sees it: its role (leader, follower), the leader and leader epoch,
the replicas and ISR from the metadata image, and — on the leader — what each follower has
fetched, from which the high-water mark follows (Kafka's Partition)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum

from kraftlab.node.broker.replication.ports import ReplicaLog
from kraftlab.node.broker.replication.producer_state import ProducerState

READ_CHUNK = 1 << 20


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower: its log end offset (-1 unknown) and when it was
    last caught up with the leader's log end (Kafka's lastCaughtUpTimeMs)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_end: int = -1
    last_fetch_ms: int = 0


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: ReplicaLog
    role: Role
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0
    leader_epoch_start: int = 0
    """The log end offset when this broker became leader in `leader_epoch` (a replica joins the ISR
    only once it has everything before it)."""
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    pending_isr: tuple[int, ...] = ()
    """The ISR of an AlterPartition in flight: until it is committed the HW waits for the union of
    both (Kafka's maximal ISR) — a replica being added must hold everything below the HW the
    moment the controller may commit it, and one being dropped is still in the committed ISR."""

    producers: ProducerState = field(default_factory=ProducerState)
    """Idempotent producers' epochs and last batches, from the batches of this replica's log."""

    def rebuild_producers(self) -> None:
        """The producer state from the log as it is now (a new replica, a restart, a truncation)."""
        self.producers = ProducerState.rebuild(lambda offset: self.log.read(offset, READ_CHUNK),
                                               self.log.log_start_offset, self.log.log_end_offset)

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int) -> None:
        """A follower's Fetch at `fetch_offset`: everything below it is on that follower. It is
        caught up when it asked for the leader's log end, or for the end the leader had at its
        previous fetch (then it was caught up as of that fetch)."""
        p = self.followers.setdefault(replica, FollowerProgress())
        end = self.log.log_end_offset
        if fetch_offset >= end:
            p.last_caught_up_ms = now_ms
        elif fetch_offset >= p.last_fetch_leader_end >= 0:
            p.last_caught_up_ms = max(p.last_caught_up_ms, p.last_fetch_ms)
        p.log_end_offset = fetch_offset
        p.last_fetch_leader_end = end
        p.last_fetch_ms = now_ms

    def end_offset_of(self, replica: int, own_id: int) -> int:
        if replica == own_id:
            return self.log.log_end_offset
        p = self.followers.get(replica)
        return p.log_end_offset if p is not None else -1

    def maybe_advance_high_watermark(self, own_id: int, never_back: bool = True) -> bool:
        """The leader's HW: the smallest log end offset among the ISR; it never goes back.
        True when it moved."""
        if self.role is not Role.LEADER:
            return False
        maximal = set(self.isr) | set(self.pending_isr)
        candidate = min(self.end_offset_of(r, own_id) for r in maximal) if own_id in self.isr else -1
        if candidate > self.log.high_watermark:
            self.log.update_high_watermark(candidate)
            return True
        if not never_back:  # BUG ZOO: hw-back-on-leader-change — a lower minimum (unknown ends) is taken too
            before = self.log.high_watermark
            return self.log.update_high_watermark(candidate) != before
        return False

    def lagging(self, own_id: int, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
        """ISR followers not caught up within `replica.lag.time.max.ms` (candidates to shrink)."""
        out = []
        for r in self.isr:
            if r == own_id:
                continue
            p = self.followers.get(r)
            if p is None or now_ms - p.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return tuple(out)

    def caught_up(self, own_id: int) -> tuple[int, ...]:
        """Replicas outside the ISR whose log reached the high-water mark (candidates to expand)."""
        hw = self.log.high_watermark
        return tuple(
            r for r in self.replicas
            if r not in self.isr and r != own_id and self.end_offset_of(r, own_id) >= hw
            and self.end_offset_of(r, own_id) >= 0
        )  # fmt: skip
