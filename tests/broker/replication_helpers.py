"""Builders for the replication core's tests: an image with one topic, client record batches,
the data-plane requests at the versions clients use, and brokers' cores wired in memory (`Net`)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.list_offsets.v7.request import ListOffsetsRequest
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest
from kio.schema.produce.v9.request import ProduceRequest

from kraftlab.node.broker.replication import AlterIsr, ClientReply, FetchFromLeader, ReplicaManager
from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.controller.messages import build
from kraftlab.node.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, TopicInfo
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.batches import decode_batches, encode_batch
from kraftlab.node.storage.partition import LogConfig, LogManager

TOPIC_ID = uuid.UUID(int=7)


def image_with(name: str = "t", partitions: dict[int, PartitionInfo] | None = None,
               topic_id: uuid.UUID = TOPIC_ID) -> MetadataImage:  # fmt: skip
    image = MetadataImage()
    set_topic(image, name, partitions or {0: PartitionInfo((1,), (1,), leader=1, leader_epoch=0)}, topic_id)
    return image


def set_topic(image: MetadataImage, name: str, partitions: dict[int, PartitionInfo], topic_id: uuid.UUID) -> None:
    image.topics[topic_id] = TopicInfo(name, topic_id, dict(partitions))
    image.topic_ids[name] = topic_id


def manager(tmp_path: Path, node_id: int = 1, min_isr: int = 1, wall: list[int] | None = None,
            bugs: BugSet = NO_BUGS) -> ReplicaManager:  # fmt: skip
    clock = wall if wall is not None else [1_000_000]
    store = LogManager([tmp_path / f"logs-{node_id}"], lambda topic: LogConfig(min_insync_replicas=min_isr))
    return ReplicaManager(node_id, store, lambda: clock[0], bugs=bugs)


def batch(*values: str, ts: int = 1000) -> bytes:
    return encode_batch(Batch(0, -1, tuple(Record(None, v.encode()) for v in values), False, ts))


def decoded(data: bytes | None) -> list[tuple[int, int, str]]:
    """(offset, leader epoch, value) of each record of a record set."""
    return [(b.base_offset + i, b.epoch, (r.value or b"").decode())
            for b in decode_batches(bytes(data or b"")) for i, r in enumerate(b.records)]  # fmt: skip


def produce(records: bytes, acks: int = 1, topic: str = "t", partition: int = 0, timeout_ms: int = 5000) -> Any:
    return build(ProduceRequest, {"acks": acks, "timeout": timeout_ms, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})


def fetch(offset: int, topic: str = "t", partition: int = 0, replica: int = -1, epoch: int = -1,
          last_fetched_epoch: int = -1, min_bytes: int = 0, max_wait_ms: int = 0) -> Any:  # fmt: skip
    return build(FetchRequest, {
        "replica_id": replica, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
    })  # fmt: skip


def list_offsets(timestamp: int, topic: str = "t", partition: int = 0, epoch: int = -1) -> Any:
    return build(ListOffsetsRequest, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": timestamp}]}]})


def offsets_for_epoch(leader_epoch: int, topic: str = "t", partition: int = 0, replica: int = -1) -> Any:
    return build(OffsetForLeaderEpochRequest, {"replica_id": replica, "topics": [
        {"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "leader_epoch": leader_epoch}]}]})


def replies(m: ReplicaManager) -> dict[Any, Any]:
    return {o.token: o.response for o in m.take_outputs() if isinstance(o, ClientReply)}


def one_partition(response: Any) -> Any:
    """The single partition answer of a data-plane response of any of the four APIs."""
    topics = getattr(response, "responses", None) or response.topics
    t = topics[0]
    parts = getattr(t, "partition_responses", None) or t.partitions
    return parts[0]


def with_brokers(image: MetadataImage, ids: tuple[int, ...] = (1, 2, 3)) -> MetadataImage:
    for b in ids:
        image.brokers[b] = BrokerInfo(b, 10 + b, None, (), (), None, False, False)  # type: ignore[arg-type]
    return image


class Net:
    """Brokers' cores with follower fetches routed between them; `down` brokers neither fetch nor answer."""

    def __init__(self, tmp_path: Path, ids: tuple[int, ...] = (1, 2, 3), min_isr: int = 1,
                 bugs: BugSet = NO_BUGS) -> None:  # fmt: skip
        self.m = {i: manager(tmp_path, i, min_isr=min_isr, bugs=bugs) for i in ids}
        self.down: set[int] = set()
        self.replies: dict[Any, Any] = {}
        self.alters: list[Any] = []
        self.events: list[tuple[int, str, dict[str, Any]]] = []

    def image(self, info: dict[int, PartitionInfo]) -> None:
        for m in self.m.values():
            m.apply_image(with_brokers(image_with(partitions=info)), 0)

    def step(self, now: int, rounds: int = 6) -> None:
        for _ in range(rounds):
            for i, m in self.m.items():
                if i in self.down:
                    m.take_outputs()
                    continue
                m.tick(now)
                for o in m.take_outputs():
                    self._route(i, m, o, now)

    def _route(self, i: int, m: ReplicaManager, o: Any, now: int) -> None:
        if isinstance(o, ClientReply) and isinstance(o.token, tuple):  # a parked follower fetch answered
            _, follower, token = o.token
            if follower in self.down:  # lost with its connection: the follower's request times out
                self.m[follower].fetcher.on_failure(token, now)
            else:
                self.m[follower].fetcher.on_response(token, o.response, now)
        elif isinstance(o, ClientReply):
            self.replies[o.token] = o.response
        elif isinstance(o, JournalEvent):
            self.events.append((i, o.ev, o.fields))
        elif isinstance(o, AlterIsr):
            self.alters.append((i, o.request))
        elif isinstance(o, FetchFromLeader):
            if o.leader in self.down:
                m.fetcher.on_failure(o.token, now)
                return
            leader = self.m[o.leader]
            leader.handle(("fetch", i, o.token), o.request, now)  # answered now or, parked, at a later tick
            for out in leader.take_outputs():
                self._route(o.leader, leader, out, now)


def values(m: ReplicaManager) -> list[tuple[int, int, str]]:
    log = m.partitions[("t", 0)].log
    return decoded(log.read(0, 1 << 20)) if log.log_end_offset else []
