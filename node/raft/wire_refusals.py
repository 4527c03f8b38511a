"""Raft requests refused before the core sees them, answered as Kafka answers them: a request of
another cluster, one not for the metadata partition, one its sender may not make.

Kafka's `KafkaRaftClient` checks a request's cluster id first, then its topic-partition, and
only then hands the partition's fields to its handler; the controller's request handler checks
the sender's cluster permission before that. Each refusal has Kafka's shape:

- another cluster id (`INCONSISTENT_CLUSTER_ID`) and a missing permission
  (`CLUSTER_AUTHORIZATION_FAILED`, `AbstractRequest.getErrorResponse`) refuse the whole request:
  the response's top-level error code, every other field at its default (no topics, no
  partitions — `new VoteResponseData().setErrorCode(code)`);
- a Vote, BeginQuorumEpoch, EndQuorumEpoch or Fetch not for exactly partition 0 of
  `__cluster_metadata` is refused as a whole too, with `INVALID_REQUEST` (`hasValidTopicPartition`);
- a FetchSnapshot for one partition that is not ours gets `UNKNOWN_TOPIC_OR_PARTITION` on that
  partition (one that does not ask for exactly one partition: `INVALID_REQUEST` as a whole);
- a DescribeQuorum not for our partition gets `UNKNOWN_TOPIC_OR_PARTITION` on every partition it
  names (`DescribeQuorumRequest.getPartitionLevelErrorResponse`), top-level error NONE.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import Records, i32Timedelta

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.wire import WireError, metadata_partition

_DEFAULTS: dict[str, Any] = {
    "throttle_time": i32Timedelta.parse(datetime.timedelta(0)),
    "topics": (),
    "responses": (),
    "nodes": (),
    "current_voters": (),
    "observers": (),
    "error_message": None,
    "leader_id": 0,
    "leader_epoch": 0,
    "high_watermark": 0,
}
"""Kafka's value of each field a refusal leaves unset (the generated `...Data` classes' initial values)."""


def response_type(request: Any, name: str | None = None) -> Any:
    """The kio response entity class answering `request` (same API and version), or its nested class `name`."""
    module = importlib.import_module(type(request).__module__.rsplit(".", 1)[0] + ".response")
    return getattr(module, name or type(request).__name__.replace("Request", "Response"))


def _build(cls: Any, **fields: Any) -> Any:
    values = {f.name: fields.get(f.name, _DEFAULTS.get(f.name)) for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in values.items() if v is not None or k in fields or k == "error_message"})


def whole_refusal(request: Any, error: m.Errors) -> Any:
    """`request` (a kio request entity) refused as a whole: Kafka's response of its API and version
    with `error` as its top-level error code and nothing else."""
    return _build(response_type(request), error_code=ErrorCode(int(error)))


def _only_ours(topics: tuple[Any, ...]) -> bool:
    """Exactly one topic, ours, with exactly one partition, ours (Kafka's `hasValidTopicPartition`)."""
    try:
        metadata_partition(topics)
    except WireError:
        return False
    return True


def refusal(request: Any, cluster_id: str, authorized: bool = True) -> Any | None:
    """Kafka's answer to `request` (a kio Raft request entity) when it is refused before the core
    (None: it goes on to the core): `authorized` is False when its sender lacks the cluster permission."""
    if not authorized:
        return whole_refusal(request, m.Errors.CLUSTER_AUTHORIZATION_FAILED)
    asked_cluster = getattr(request, "cluster_id", None)
    if asked_cluster is not None and asked_cluster != cluster_id:
        return whole_refusal(request, m.Errors.INCONSISTENT_CLUSTER_ID)
    topics = request.topics
    if _only_ours(topics):
        return None
    name = type(request).__name__
    if name == "DescribeQuorumRequest":
        return _per_partition(request, m.Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if name == "FetchSnapshotRequest" and len(topics) == 1 and len(topics[0].partitions) == 1:
        return _per_partition(request, m.Errors.UNKNOWN_TOPIC_OR_PARTITION)
    return whole_refusal(request, m.Errors.INVALID_REQUEST)


def _per_partition(request: Any, error: m.Errors) -> Any:
    """`error` on every partition `request` names, top-level error NONE, every other field at
    Kafka's default (a snapshot id and leader of 0/0, no bytes, no voters)."""
    code = ErrorCode(int(error))
    if type(request).__name__ == "DescribeQuorumRequest":
        topic, partition = response_type(request, "TopicData"), response_type(request, "PartitionData")
        topics = tuple(
            topic(
                topic_name=t.topic_name,
                partitions=tuple(
                    _build(partition, partition_index=p.partition_index, error_code=code) for p in t.partitions
                ),
            )
            for t in request.topics
        )
        return _build(response_type(request), error_code=ErrorCode.none, topics=topics)
    (asked,) = request.topics
    (part,) = asked.partitions
    snapshot = response_type(request, "PartitionSnapshot")(
        index=part.partition,
        error_code=code,
        snapshot_id=response_type(request, "SnapshotId")(end_offset=0, epoch=0),
        current_leader=response_type(request, "LeaderIdAndEpoch")(leader_id=0, leader_epoch=0),
        size=0,
        position=0,
        unaligned_records=Records(b""),
    )
    topic_snapshot = response_type(request, "TopicSnapshot")(name=asked.name, partitions=(snapshot,))
    return _build(response_type(request), error_code=ErrorCode.none, topics=(topic_snapshot,))
