"""ReplicaManager: the partitions this broker holds, and the data-plane requests on them (sans-IO).

Driven by the metadata image (`apply_image`), client requests (`handle`: Produce, Fetch,
ListOffsets, OffsetsForLeaderEpoch, each with a token) and time (`tick`); it answers through
`take_outputs()` (`ClientReply`, `JournalEvent`). Disk is reached only through the `LogStore` /
`ReplicaLog` seams; time comes in as `now_ms` (the node's monotonic clock) and `wall_ms()` (record
timestamps: LogAppendTime, ListOffsets by time).

Kafka's rules kept here:
- a partition this broker is a replica of gets a log (in the directory the controller placed it
  on); one whose directory failed here is offline on this broker (dropped, never fetched); the
  leader of an epoch starts that epoch at its log end (leader-epoch-checkpoint) before appending
  anything of it;
- Produce (acks 0, 1, -1) only on the leader; acks=-1 is refused with NOT_ENOUGH_REPLICAS when the
  ISR is smaller than `min.insync.replicas`, and answered once the high-water mark passes the
  batch (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below it meanwhile, REQUEST_TIMED_OUT
  after the request's timeout); acks=0 gets no answer;
- the leader's high-water mark is the smallest log end offset among the ISR (followers report
  theirs with each Fetch: its fetch offset) and never goes back;
- consumers read up to the high-water mark (last stable offset = HW: no transactions), followers
  up to the log end; a follower whose last fetched epoch diverges from the leader's log gets the
  diverging epoch and its end offset instead of records; a Fetch with less than `min_bytes` waits
  up to `max_wait_ms` for more — a follower's only until its next Fetch comes in (its fetcher sends
  one before the parked one returns when it starts following more partitions from this leader, and
  a connection's answers go out in request order);
- ListOffsets from a client on a new leader whose HW has not yet reached the start of its epoch gets
  OFFSET_NOT_AVAILABLE (the previous leader's HW may have been higher: a latest offset must not go back);
- a request's current leader epoch older than the partition's gets FENCED_LEADER_EPOCH, a newer one
  UNKNOWN_LEADER_EPOCH; a partition this broker does not lead gets NOT_LEADER_OR_FOLLOWER, one the
  image does not have UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.broker.outputs import ClientReply
from kraftlab.node.broker.replication.fetcher import FetchFromLeader, FollowerFetcher
from kraftlab.node.broker.replication.isr import AlterIsr, IsrManager
from kraftlab.node.broker.replication.partition import FollowerProgress, Partition, Role
from kraftlab.node.broker.replication.ports import LogStore
from kraftlab.node.broker.replication.producer_state import Duplicate, headers_of
from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.controller.messages import api_name, respond
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import RESOURCE_TOPIC
from kraftlab.node.protocol.durations import millis
from kraftlab.node.storage.partition.log import InvalidRecords, OffsetOutOfRange, RecordTooLarge

TopicPartition = tuple[str, int]
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
NO_EPOCH = -1

DATA_PLANE_APIS = ("Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch")


Output = ClientReply | JournalEvent | FetchFromLeader | AlterIsr


@dataclass
class _ParkedProduce:
    token: Any
    request: Any
    results: dict[TopicPartition, dict[str, Any]]
    waiting: dict[TopicPartition, int]
    """partition -> the offset the high-water mark must reach (last appended offset + 1)"""
    epochs: dict[TopicPartition, int]
    deadline_ms: int


@dataclass
class _ParkedFetch:
    token: Any
    request: Any
    deadline_ms: int
    min_bytes: int
    replica: int


@dataclass
class _FetchResult:
    values: dict[str, Any]
    size: int = 0
    errors: bool = False
    partitions: list[TopicPartition] = field(default_factory=list)


class ReplicaManager:
    def __init__(self, node_id: int, store: LogStore, wall_ms: Callable[[], int],
                 replica_lag_time_max_ms: int = 30_000, broker_epoch: Callable[[], int] = lambda: -1,
                 retry_backoff_ms: int = 100, bugs: BugSet = NO_BUGS) -> None:  # fmt: skip
        self.node_id = node_id
        self.bugs = bugs
        """Test-only planted bugs (node.bugs, the bug zoo); none by default."""
        self.store = store
        self.wall_ms = wall_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.image = MetadataImage()
        self._produces: list[_ParkedProduce] = []
        self._fetches: list[_ParkedFetch] = []
        self._outbox: list[Output] = []
        self._configs: dict[str, dict[str, str]] = {}
        self.fetcher = FollowerFetcher(node_id, self.partitions, wall_ms, retry_backoff_ms)
        self.isr = IsrManager(node_id, self.partitions, lambda: self.image, broker_epoch, replica_lag_time_max_ms,
                              retry_backoff_ms)

    def take_outputs(self) -> list[Output]:
        out, self._outbox = self._outbox, []
        return out + self.fetcher.take_outputs() + self.isr.take_outputs()

    # ---- the metadata image -------------------------------------------------------------------

    def apply_image(self, image: MetadataImage, now_ms: int) -> None:
        """Take the roles the image gives this broker: a log for each partition it is a replica
        of, leadership of those it leads (the epoch begins at the log end), followership of the rest;
        partitions it no longer holds are dropped (their logs deleted when the topic is gone)."""
        self.image = image
        seen: set[TopicPartition] = set()
        for topic in image.topics.values():
            configs = image.configs.get((RESOURCE_TOPIC, topic.name), {})
            if self._configs.get(topic.name, {}) != configs:
                self._configs[topic.name] = dict(configs)
                self.store.reconfigure(topic.name)
            for pid, info in topic.partitions.items():
                if self.node_id not in info.replicas or not image.replica_online(info, self.node_id):
                    continue  # not ours, or on a log directory that failed here: offline on this broker
                key = (topic.name, pid)
                seen.add(key)
                current = self.partitions.get(key)
                if current is not None and current.topic_id != topic.topic_id:
                    self._drop(key, delete_log=True)  # a deleted topic's name reused
                    current = None
                role = Role.LEADER if info.leader == self.node_id else Role.FOLLOWER
                if current is None:
                    log = self.store.get_or_create(topic.name, pid, topic.topic_id, self.wall_ms(),
                                                   directory=info.directory(self.node_id))
                    current = Partition(topic.name, pid, topic.topic_id, log, role, info.leader, -1, (), ())
                    current.rebuild_producers()
                    self.partitions[key] = current
                changed = current.role is not role or current.leader_epoch != info.leader_epoch
                current.replicas, current.isr, current.partition_epoch = info.replicas, info.isr, info.partition_epoch
                if changed:
                    self._become(current, role, info.leader, info.leader_epoch, now_ms)
                # BUG ZOO: hw-back-on-leader-change — a new leader's HW is the minimum of the ends it knows
                never_back = not (changed and self.bugs.on("hw-back-on-leader-change"))
                if role is Role.LEADER and current.maybe_advance_high_watermark(self.node_id, never_back):
                    self._journal_hw(current)
        for key in [k for k in self.partitions if k not in seen]:
            gone = self.image.topic(key[0]) is None
            self._drop(key, delete_log=gone)
        self._recheck(now_ms)
        self.fetcher.tick(now_ms)  # a partition followed from now on is fetched now, not at the next tick

    def _become(self, p: Partition, role: Role, leader: int, epoch: int, now_ms: int) -> None:
        p.role, p.leader, p.leader_epoch = role, leader, epoch
        p.followers = {}
        if role is Role.LEADER:
            if self.bugs.on("truncate-to-hw-on-leader") and p.log.high_watermark < p.log.log_end_offset:
                # BUG ZOO: truncate-to-hw-on-leader (KAFKA-1211, before KIP-101) — cut to its own HW
                before, after = p.log.log_end_offset, p.log.truncate_to(p.log.high_watermark)
                self._outbox.append(JournalEvent("partition_truncate", {
                    "topic": p.topic, "partition": p.index, "from": before, "to": after,
                    "leader": leader, "leader_epoch": epoch, "reason": "becoming leader: to its high-water mark",
                }))  # fmt: skip
                p.rebuild_producers()
            latest = p.log.latest_epoch()
            if latest is None or latest < epoch:
                p.log.assign_epoch_start(epoch, p.log.log_end_offset)
            p.followers = {r: FollowerProgress(last_caught_up_ms=now_ms) for r in p.replicas if r != self.node_id}
            p.leader_epoch_start = p.log.log_end_offset
        self._outbox.append(JournalEvent("partition_role", {
            "topic": p.topic, "partition": p.index, "role": role.value, "leader": leader, "leader_epoch": epoch,
            "log_end_offset": p.log.log_end_offset, "hw": p.log.high_watermark, "isr": list(p.isr),
            "topic_id": str(p.topic_id),
        }))  # fmt: skip
        self._fail_parked_produces(p, ErrorCode.not_leader_or_follower)

    def _drop(self, key: TopicPartition, delete_log: bool) -> None:
        p = self.partitions.pop(key, None)
        if p is not None:
            self._fail_parked_produces(p, ErrorCode.not_leader_or_follower)
        if delete_log:
            self.store.delete(*key)

    # ---- requests -----------------------------------------------------------------------------

    def handle(self, token: Any, request: Any, now_ms: int) -> None:
        api = api_name(request)
        if api == "Produce":
            self._produce(token, request, now_ms)
        elif api == "Fetch":
            self._fetch(token, request, now_ms)
        elif api == "ListOffsets":
            self._outbox.append(ClientReply(token, self._list_offsets(request)))
        elif api == "OffsetForLeaderEpoch":
            self._outbox.append(ClientReply(token, self._offsets_for_leader_epoch(request)))
        else:
            raise ValueError(f"{api} is not a data-plane API")

    def _lookup(
        self, topic: str, index: int, current_epoch: int, leader_only: bool
    ) -> tuple[Partition | None, ErrorCode]:
        p = self.partitions.get((topic, index))
        if p is None:
            t = self.image.topic(topic)
            if t is None or index not in t.partitions:
                return None, ErrorCode.unknown_topic_or_partition
            return None, ErrorCode.not_leader_or_follower
        if current_epoch != NO_EPOCH and current_epoch < p.leader_epoch:
            return None, ErrorCode.fenced_leader_epoch
        if current_epoch != NO_EPOCH and current_epoch > p.leader_epoch:
            return None, ErrorCode.unknown_leader_epoch
        if leader_only and p.role is not Role.LEADER:
            return None, ErrorCode.not_leader_or_follower
        return p, ErrorCode.none

    # ---- Produce ------------------------------------------------------------------------------

    def _produce(self, token: Any, request: Any, now_ms: int) -> None:
        acks = int(request.acks)
        results: dict[TopicPartition, dict[str, Any]] = {}
        waiting: dict[TopicPartition, int] = {}
        epochs: dict[TopicPartition, int] = {}
        for topic in request.topic_data:
            for part in topic.partition_data:
                key = (topic.name, int(part.index))
                result: dict[str, Any] = {"index": key[1], "base_offset": -1, "log_start_offset": -1}
                results[key] = result
                if acks not in (0, 1, -1):
                    result["error_code"] = ErrorCode.invalid_required_acks
                    continue
                p, error = self._lookup(key[0], key[1], NO_EPOCH, leader_only=True)
                if p is None:
                    result["error_code"] = error
                    continue
                below_min = len(p.isr) < p.min_insync_replicas and not self.bugs.on("acks-all-below-min-insync")
                if acks == -1 and below_min:  # BUG ZOO: acks-all-below-min-insync never compares (KAFKA-1555)
                    result["error_code"] = ErrorCode.not_enough_replicas
                    result["error_message"] = (f"the ISR {list(p.isr)} is smaller than min.insync.replicas "
                                               f"{p.min_insync_replicas}")
                    continue
                records = bytes(part.records or b"")
                headers = headers_of(records)
                verdict = p.producers.check(headers)
                if isinstance(verdict, Duplicate):  # a retry of a batch it holds: its offsets of then
                    result.update(error_code=ErrorCode.none, base_offset=verdict.first_offset,
                                  log_start_offset=p.log.log_start_offset)
                    if acks == -1:
                        waiting[key] = verdict.last_offset + 1
                        epochs[key] = p.leader_epoch
                    continue
                if verdict is not None:
                    result["error_code"] = verdict
                    continue
                try:
                    info = p.log.append_as_leader(records, p.leader_epoch, self.wall_ms())
                except InvalidRecords as e:
                    result.update(error_code=ErrorCode.corrupt_message, error_message=str(e))
                    continue
                except RecordTooLarge as e:
                    result.update(error_code=ErrorCode.message_too_large, error_message=str(e))
                    continue
                p.producers.appended(headers, info.first_offset)
                self._outbox.append(JournalEvent("partition_append", {
                    "topic": key[0], "partition": key[1], "first": info.first_offset, "last": info.last_offset,
                    "leader_epoch": p.leader_epoch, "acks": acks,
                }))  # fmt: skip
                result.update(error_code=ErrorCode.none, base_offset=info.first_offset,
                              log_start_offset=p.log.log_start_offset)
                if info.log_append_time_ms >= 0:
                    result["log_append_time"] = datetime.datetime.fromtimestamp(
                        info.log_append_time_ms / 1000, tz=datetime.UTC)
                if p.maybe_advance_high_watermark(self.node_id):
                    self._journal_hw(p)
                if acks == -1:
                    waiting[key] = info.last_offset + 1
                    epochs[key] = p.leader_epoch
        parked = _ParkedProduce(token, request, results, waiting, epochs, now_ms + max(millis(request.timeout), 0))
        if acks == 0:
            self._outbox.append(ClientReply(token, None))
        elif not self._try_complete_produce(parked, now_ms):
            self._produces.append(parked)
        self._recheck(now_ms)

    def _try_complete_produce(self, parked: _ParkedProduce, now_ms: int) -> bool:
        for key, needed in list(parked.waiting.items()):
            p = self.partitions.get(key)
            if p is None or p.role is not Role.LEADER or p.leader_epoch != parked.epochs[key]:
                parked.results[key].update(error_code=ErrorCode.not_leader_or_follower, base_offset=-1)
            elif p.log.high_watermark >= needed:
                # BUG ZOO: acks-all-below-min-insync — acknowledged whatever the ISR's size
                if len(p.isr) < p.min_insync_replicas and not self.bugs.on("acks-all-below-min-insync"):
                    parked.results[key]["error_code"] = ErrorCode.not_enough_replicas_after_append
                else:
                    self._journal_ack(p, parked.results[key]["base_offset"], needed - 1)
            elif now_ms >= parked.deadline_ms:
                parked.results[key].update(error_code=ErrorCode.request_timed_out)
            else:
                continue
            del parked.waiting[key]
        if parked.waiting:
            return False
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, _), result in parked.results.items():
            by_topic.setdefault(topic, []).append(result)
        response = respond(parked.request, {
            "responses": [{"name": t, "partition_responses": rs} for t, rs in by_topic.items()],
        })  # fmt: skip
        self._outbox.append(ClientReply(parked.token, response))
        return True

    def _fail_parked_produces(self, p: Partition, error: ErrorCode) -> None:
        key = (p.topic, p.index)
        for parked in self._produces:
            if key in parked.waiting:
                parked.results[key].update(error_code=error, base_offset=-1)
                del parked.waiting[key]

    # ---- Fetch --------------------------------------------------------------------------------

    def _fetch(self, token: Any, request: Any, now_ms: int) -> None:
        replica = int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))
        if replica >= 0:
            self._note_follower_fetches(request, replica, now_ms)
            for parked in self._fetches:  # superseded (the follower fetches more partitions now): answered at once
                if parked.replica == replica:
                    parked.deadline_ms = now_ms
        result = self._read(request)
        min_bytes = int(request.min_bytes)
        max_wait = millis(request.max_wait)
        if result.errors or result.size >= min_bytes or max_wait <= 0:
            self._outbox.append(ClientReply(token, respond(request, result.values)))
        else:
            self._fetches.append(_ParkedFetch(token, request, now_ms + max_wait, min_bytes, replica))
        self._recheck(now_ms)

    def _note_follower_fetches(self, request: Any, replica: int, now_ms: int) -> None:
        for topic in request.topics:
            for part in topic.partitions:
                p = self.partitions.get((topic.topic, int(part.partition)))
                if p is None or p.role is not Role.LEADER or replica not in p.replicas:
                    continue
                if int(getattr(part, "current_leader_epoch", NO_EPOCH)) not in (NO_EPOCH, p.leader_epoch):
                    continue
                if self._diverging(p, part) is not None:
                    continue
                p.follower_fetched(replica, int(part.fetch_offset), now_ms)
                if p.maybe_advance_high_watermark(self.node_id):
                    self._journal_hw(p)

    @staticmethod
    def _diverging(p: Partition, part: Any) -> tuple[int, int] | None:
        """(epoch, end offset) of the leader's log where a follower's log diverges from it (Kafka's
        diverging epoch: the follower's last fetched epoch ends earlier here, or is unknown here)."""
        last_epoch = int(getattr(part, "last_fetched_epoch", NO_EPOCH))
        if last_epoch < 0:
            return None
        end = p.log.end_offset_for_epoch(last_epoch)
        if end.epoch != last_epoch or end.offset < int(part.fetch_offset):
            return end.epoch, end.offset
        return None

    def _read(self, request: Any) -> _FetchResult:
        replica = int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))
        budget = int(getattr(request, "max_bytes", 2**31 - 1))
        result = _FetchResult({"error_code": ErrorCode.none, "session_id": 0, "responses": []})
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                index = int(part.partition)
                epoch = int(getattr(part, "current_leader_epoch", NO_EPOCH))
                entry: dict[str, Any] = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1,
                                         "log_start_offset": -1, "records": b""}
                parts.append(entry)
                p, error = self._lookup(topic.topic, index, epoch, leader_only=True)
                if p is None:
                    entry["error_code"] = error
                    entry["records"] = None
                    result.errors = True
                    own = self.partitions.get((topic.topic, index))
                    if own is not None:
                        entry["current_leader"] = {"leader_id": own.leader, "leader_epoch": own.leader_epoch}
                    continue
                hw, log_start = p.log.high_watermark, p.log.log_start_offset
                entry.update(error_code=ErrorCode.none, high_watermark=hw, last_stable_offset=hw,
                             log_start_offset=log_start)
                if replica >= 0:
                    diverging = self._diverging(p, part)
                    if diverging is not None:
                        entry["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
                        result.errors = True
                        continue
                offset = int(part.fetch_offset)
                bound = None if replica >= 0 else hw
                try:
                    data = p.log.read(offset, min(int(part.partition_max_bytes), max(budget, 0)), bound,
                                      min_one=not result.size)
                except OffsetOutOfRange:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                    entry["records"] = None
                    result.errors = True
                    continue
                entry["records"] = data
                result.size += len(data)
                budget -= len(data)
            result.values["responses"].append({"topic": topic.topic, "partitions": parts})
        return result

    # ---- ListOffsets and OffsetForLeaderEpoch -------------------------------------------------

    def _list_offsets(self, request: Any) -> Any:
        replica = int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                index = int(part.partition_index)
                entry: dict[str, Any] = {"partition_index": index, "timestamp": -1, "offset": -1, "leader_epoch": -1}
                parts.append(entry)
                epoch = int(getattr(part, "current_leader_epoch", NO_EPOCH))
                p, error = self._lookup(topic.name, index, epoch, leader_only=replica != DEBUGGING_REPLICA_ID)
                entry["error_code"] = error
                if p is None:
                    continue
                ts = int(part.timestamp)
                hw = p.log.high_watermark if replica < 0 else p.log.log_end_offset
                if replica < 0 and ts != EARLIEST_TIMESTAMP and hw < p.leader_epoch_start:
                    # a new leader whose HW has not reached its epoch's start yet: what a client
                    # would see as the end may be below what it saw from the previous leader
                    entry["error_code"] = ErrorCode.offset_not_available
                    continue
                if ts == EARLIEST_TIMESTAMP:
                    entry.update(offset=p.log.log_start_offset, leader_epoch=p.log.epoch_at(p.log.log_start_offset))
                elif ts == LATEST_TIMESTAMP:
                    latest = p.log.latest_epoch()
                    entry.update(offset=hw, leader_epoch=-1 if latest is None else latest)
                else:
                    found = p.log.max_timestamp() if ts == MAX_TIMESTAMP else p.log.offset_for_timestamp(ts)
                    if found is not None and found[0] < hw:
                        entry.update(offset=found[0], timestamp=found[1], leader_epoch=found[2])
            topics.append({"name": topic.name, "partitions": parts})
        return respond(request, {"topics": topics})

    def _offsets_for_leader_epoch(self, request: Any) -> Any:
        replica = int(getattr(request, "replica_id", DEBUGGING_REPLICA_ID))
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                index = int(part.partition)
                entry: dict[str, Any] = {"partition": index, "leader_epoch": -1, "end_offset": -1}
                parts.append(entry)
                epoch = int(getattr(part, "current_leader_epoch", NO_EPOCH))
                p, error = self._lookup(topic.topic, index, epoch, leader_only=replica != DEBUGGING_REPLICA_ID)
                entry["error_code"] = error
                if p is None:
                    continue
                end = p.log.end_offset_for_epoch(int(part.leader_epoch))
                entry.update(leader_epoch=end.epoch, end_offset=end.offset)
            topics.append({"topic": topic.topic, "partitions": parts})
        return respond(request, {"topics": topics})

    # ---- time ---------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Parked requests whose time is up, follower fetches to start, ISR changes to ask for."""
        self._recheck(now_ms)
        self.fetcher.tick(now_ms)
        self.isr.tick(now_ms)

    def _recheck(self, now_ms: int) -> None:
        """Answer the parked requests that can be answered now (or whose time is up)."""
        if self._produces:
            self._produces = [q for q in self._produces if not self._try_complete_produce(q, now_ms)]
        if self._fetches:
            keep = []
            for f in self._fetches:
                result = self._read(f.request)
                if result.errors or result.size >= f.min_bytes or now_ms >= f.deadline_ms:
                    self._outbox.append(ClientReply(f.token, respond(f.request, result.values)))
                else:
                    keep.append(f)
            self._fetches = keep

    def next_deadline_ms(self) -> int | None:
        deadlines = [q.deadline_ms for q in self._produces] + [f.deadline_ms for f in self._fetches]
        return min(deadlines) if deadlines else None

    def _journal_ack(self, p: Partition, first: int, last: int) -> None:
        """An acks=all Produce acknowledged for one partition: the HW and ISR it was acknowledged with."""
        self._outbox.append(JournalEvent("partition_ack", {
            "topic": p.topic, "partition": p.index, "first": first, "last": last, "leader_epoch": p.leader_epoch,
            "hw": p.log.high_watermark, "isr": list(p.isr), "min_insync_replicas": p.min_insync_replicas,
            "topic_id": str(p.topic_id),
        }))  # fmt: skip

    def _journal_hw(self, p: Partition) -> None:
        self._outbox.append(JournalEvent("partition_hw", {
            "topic": p.topic, "partition": p.index, "hw": p.log.high_watermark, "leader_epoch": p.leader_epoch,
            "isr": list(p.isr), "min_insync_replicas": p.min_insync_replicas,
        }))  # fmt: skip

