"""Follower fetchers (sans-IO), as Kafka's ReplicaFetcherThread: one Fetch in flight per leader,
carrying every partition this broker follows from it, at the follower's log end with its last
fetched epoch (Fetch v12). The answer's records are appended as they are; the follower's HW is the
leader's, capped at its own log end; a diverging epoch in the answer truncates the log to where it
and the leader's agree (Kafka's truncation by leader epoch, KIP-320's truncate-on-fetch); a log
wholly below the leader's log start starts over at it. Errors wait `retry_backoff_ms` and retry
with whatever the image says then: a lost connection or an error of the whole answer holds back the
fetches to that leader, an error of one partition (the leader moved, a fenced epoch, a partition the
leader has not learnt of yet) only that partition, as Kafka's fetcher delays the partitions in error
— a new topic's partition that reaches a follower's image before its leader's does not stop the
replication, and so the acks=all produces, of the partitions it already follows from that leader.

A partition this broker starts following from a leader it already has a Fetch parked at (up to
replica.fetch.wait.max.ms) does not wait for that Fetch: a new one naming every partition goes out
at once and supersedes it (the leader answers the superseded one at once: it answers a replica's
parked Fetch when a newer one from that replica comes in). Otherwise the new partition's first
records, and so the acks=all produces to it, would wait for the parked Fetch to return. As Kafka's
fetcher, an answer is applied to a partition only if the partition is still at the offset and leader
epoch it was fetched with (the other Fetch's answer may have moved it on meanwhile).

    FetchFromLeader(leader, token, request) -> send `request` to broker `leader`, then
        on_response(token, response, now_ms) or on_failure(token, now_ms)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest

from kraftlab.node.broker.replication.partition import Partition, Role
from kraftlab.node.broker.replication.producer_state import headers_of
from kraftlab.node.controller.messages import build
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.storage.partition.log import InvalidRecords

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FOLLOWER_MAX_WAIT_MS = 500  # replica.fetch.wait.max.ms
FOLLOWER_MAX_BYTES = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024  # replica.fetch.max.bytes


@dataclass(frozen=True, slots=True)
class FetchFromLeader:
    leader: int
    token: int
    request: Any


@dataclass(frozen=True, slots=True)
class _InFlight:
    leader: int
    positions: dict[TopicPartition, tuple[int, int]]
    """each partition named: (fetch offset, leader epoch) it was fetched with"""


def _position(p: Partition) -> tuple[int, int]:
    return p.log.log_end_offset, p.leader_epoch


class FollowerFetcher:
    def __init__(self, node_id: int, partitions: Mapping[TopicPartition, Partition], wall_ms: Callable[[], int],
                 retry_backoff_ms: int = 100) -> None:  # fmt: skip
        self.node_id = node_id
        self.partitions = partitions
        self.wall_ms = wall_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._tokens = 0
        self._in_flight: dict[int, _InFlight] = {}  # token -> the fetch
        self._current: dict[int, int] = {}  # leader -> the token of the newest fetch in flight to it
        self._resume_at: dict[int, int] = {}  # leader -> when to try again
        self._delayed: dict[TopicPartition, int] = {}  # a partition in error -> when to fetch it again
        self._outbox: list[FetchFromLeader | JournalEvent] = []

    def take_outputs(self) -> list[FetchFromLeader | JournalEvent]:
        out, self._outbox = self._outbox, []
        return out

    def tick(self, now_ms: int) -> None:
        """Start a fetch to every leader this broker follows a partition of and is not fetching from,
        or whose fetch in flight does not name every partition this broker now follows from it."""
        by_leader: dict[int, list[Partition]] = {}
        for key in [k for k, until in self._delayed.items() if until <= now_ms or k not in self.partitions]:
            del self._delayed[key]
        for key, p in self.partitions.items():
            if p.role is Role.FOLLOWER and p.leader >= 0 and p.leader != self.node_id and key not in self._delayed:
                by_leader.setdefault(p.leader, []).append(p)
        for leader, parts in sorted(by_leader.items()):
            if now_ms < self._resume_at.get(leader, 0):
                continue
            current = self._in_flight.get(self._current.get(leader, -1))
            if current is not None and all((p.topic, p.index) in current.positions for p in parts):
                continue
            self._tokens += 1
            parts.sort(key=lambda p: (p.topic, p.index))
            self._in_flight[self._tokens] = _InFlight(leader, {(p.topic, p.index): _position(p) for p in parts})
            self._current[leader] = self._tokens
            self._outbox.append(FetchFromLeader(leader, self._tokens, self._request(parts)))

    def _request(self, parts: list[Partition]) -> Any:
        topics: dict[str, list[dict[str, Any]]] = {}
        for p in parts:
            latest = p.log.latest_epoch()
            topics.setdefault(p.topic, []).append({
                "partition": p.index, "current_leader_epoch": p.leader_epoch, "fetch_offset": p.log.log_end_offset,
                "last_fetched_epoch": -1 if latest is None else latest, "log_start_offset": p.log.log_start_offset,
                "partition_max_bytes": PARTITION_MAX_BYTES,
            })  # fmt: skip
        return build(FetchRequest, {
            "replica_id": self.node_id, "max_wait": FOLLOWER_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": FOLLOWER_MAX_BYTES, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        })  # fmt: skip

    def _settle(self, token: int) -> _InFlight | None:
        """The fetch `token` is over: its record, and the leader free for the next one if it was the newest."""
        fetch = self._in_flight.pop(token, None)
        if fetch is not None and self._current.get(fetch.leader) == token:
            del self._current[fetch.leader]
        return fetch

    def on_failure(self, token: int, now_ms: int) -> None:
        fetch = self._settle(token)
        if fetch is not None and fetch.leader not in self._current:  # a superseded one's failure waits for no one
            self._resume_at[fetch.leader] = now_ms + self.retry_backoff_ms

    def on_response(self, token: int, response: Any, now_ms: int) -> None:
        fetch = self._settle(token)
        if fetch is None:
            return
        leader = fetch.leader
        failed = response.error_code != ErrorCode.none
        for topic in response.responses:
            for part in topic.partitions:
                key = (topic.topic, int(part.partition_index))
                p = self.partitions.get(key)
                if p is None or p.role is not Role.FOLLOWER or p.leader != leader:
                    continue  # the image moved on while the fetch was out
                if fetch.positions.get(key) != _position(p):
                    continue  # moved on meanwhile (the other fetch's answer, a new epoch): fetched again from there
                if not self._apply(p, part):
                    self._delayed[key] = now_ms + self.retry_backoff_ms
        if failed:
            self._resume_at[leader] = now_ms + self.retry_backoff_ms

    def _apply(self, p: Partition, part: Any) -> bool:
        """One partition of the leader's answer; False when it was an error."""
        error = part.error_code
        if error == ErrorCode.offset_out_of_range and p.log.log_end_offset < int(part.log_start_offset):
            self._truncate(p, int(part.log_start_offset), "below the leader's log start", fully=True)
            return True
        if error != ErrorCode.none:
            return False
        diverging = part.diverging_epoch
        if int(diverging.epoch) >= 0 or int(diverging.end_offset) >= 0:
            own = p.log.end_offset_for_epoch(int(diverging.epoch))
            to = int(diverging.end_offset) if own.epoch != int(diverging.epoch) else min(own.offset,
                                                                                      int(diverging.end_offset))
            self._truncate(p, max(to, 0), f"diverging epoch {int(diverging.epoch)}", fully=False)
            return True
        records = bytes(part.records or b"")
        if records:
            try:
                p.log.append_as_follower(records, self.wall_ms())
                p.producers.appended(headers_of(records))
            except InvalidRecords as e:
                log.warning("%s-%d: leader %d sent records that do not continue the log: %s",
                            p.topic, p.index, p.leader, e)
                return False
        p.log.update_high_watermark(min(int(part.high_watermark), p.log.log_end_offset))
        return True

    def _truncate(self, p: Partition, offset: int, reason: str, fully: bool) -> None:
        before = p.log.log_end_offset
        after = p.log.truncate_fully_and_start_at(offset) if fully else p.log.truncate_to(offset)
        p.rebuild_producers()
        self._outbox.append(JournalEvent("partition_truncate", {
            "topic": p.topic, "partition": p.index, "from": before, "to": after, "leader": p.leader,
            "leader_epoch": p.leader_epoch, "reason": reason,
        }))  # fmt: skip
