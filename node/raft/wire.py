"""Map the core's Raft messages to and from kio's Kafka wire entities (the real transport).

One version of each API, all for the `__cluster_metadata` topic, partition 0:

| API | key | version | why this one |
| --- | --- | --- | --- |
| Vote | 52 | 2 | the first with PreVote (KIP-996) |
| BeginQuorumEpoch | 53 | 0 | static voters: no KIP-853 endpoints needed |
| EndQuorumEpoch | 54 | 0 | carries PreferredSuccessors |
| DescribeQuorum | 55 | 1, 2 | v1: last-fetch / caught-up times; v2 (KIP-853): directory ids, voters' listeners |
| Fetch | 1 | 12–17 | sent at 17 (KIP-853: ReplicaDirectoryId); topic by id from 13, ReplicaState from 15 |
| FetchSnapshot | 59 | 0, 1 | sent at 1 (KIP-853: ReplicaDirectoryId) |

Fetch record sets are Kafka record batches encoded by `node.storage.batches` (this is the only
raft module that imports it). Snapshot chunks travel as raw bytes (`UnalignedRecords`).
The replica/destination ids a wire message does not carry are passed by the caller. Fetch and
FetchSnapshot are served in every version of the table (a request below KIP-853's carries no
directory id: the leader tracks that replica as (id, none), as Kafka's does) and sent at the newest.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import uuid
from types import ModuleType
from typing import Any

from kio.schema.begin_quorum_epoch.v0 import request as bqe_req
from kio.schema.begin_quorum_epoch.v0 import response as bqe_resp
from kio.schema.describe_quorum.v1 import request as dq_req
from kio.schema.describe_quorum.v1 import response as dq_resp
from kio.schema.describe_quorum.v2 import request as dq2_req
from kio.schema.describe_quorum.v2 import response as dq2_resp
from kio.schema.end_quorum_epoch.v0 import request as eqe_req
from kio.schema.end_quorum_epoch.v0 import response as eqe_resp
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v17 import request as f_req
from kio.schema.fetch.v17 import response as f_resp
from kio.schema.fetch_snapshot.v1 import request as fs_req
from kio.schema.fetch_snapshot.v1 import response as fs_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.vote.v2 import request as v_req
from kio.schema.vote.v2 import response as v_resp
from kio.static.primitive import Records, i32, i32Timedelta, i64
from kio.static.protocol import Payload

from kraftlab.node.protocol.durations import millis
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.membership import describe
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.storage.batches import decode_batches, encode_batches

METADATA_TOPIC = TopicName("__cluster_metadata")
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's `Uuid.METADATA_TOPIC_ID`: the metadata topic's id in Fetch v13+."""
PARTITION = i32(0)
# Constant fields, validated once (a kio phantom value is checked at each construction).
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_NO_LOG_START = i64(-1)
_ANY_BYTES = i32(2**31 - 1)
_MIN_BYTES = i32(0)


@functools.lru_cache(maxsize=16)
def _max_wait(ms: int) -> Any:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


REQUEST_ENTITIES: dict[type, type[Payload]] = {
    m.VoteRequest: v_req.VoteRequest,
    m.BeginQuorumEpochRequest: bqe_req.BeginQuorumEpochRequest,
    m.EndQuorumEpochRequest: eqe_req.EndQuorumEpochRequest,
    m.DescribeQuorumRequest: dq_req.DescribeQuorumRequest,
    m.FetchRequest: f_req.FetchRequest,
    m.FetchSnapshotRequest: fs_req.FetchSnapshotRequest,
}
RESPONSE_ENTITIES: dict[type, type[Payload]] = {
    m.VoteResponse: v_resp.VoteResponse,
    m.BeginQuorumEpochResponse: bqe_resp.BeginQuorumEpochResponse,
    m.EndQuorumEpochResponse: eqe_resp.EndQuorumEpochResponse,
    m.DescribeQuorumResponse: dq_resp.DescribeQuorumResponse,
    m.FetchResponse: f_resp.FetchResponse,
    m.FetchSnapshotResponse: fs_resp.FetchSnapshotResponse,
}


FETCH_VERSIONS = range(12, 18)
FETCH_SNAPSHOT_VERSIONS = range(0, 2)
FIRST_FETCH_WITH_DIRECTORY, FIRST_FETCH_SNAPSHOT_WITH_DIRECTORY = 17, 1
MIN_VERSIONS: dict[int, int] = {
    int(f_req.FetchRequest.__api_key__): FETCH_VERSIONS[0],
    int(fs_req.FetchSnapshotRequest.__api_key__): FETCH_SNAPSHOT_VERSIONS[0],
}
"""APIs served from an older version than the one above (the one sent)."""
MAX_VERSIONS: dict[int, int] = {int(dq_req.DescribeQuorumRequest.__api_key__): 2}
"""APIs served in a newer version than the one above: DescribeQuorum v2 (KIP-853, node.raft.membership.describe)."""


def _schemas(api: str, versions: range) -> dict[int, tuple[ModuleType, ModuleType]]:
    module = importlib.import_module
    return {
        v: (module(f"kio.schema.{api}.v{v}.request"), module(f"kio.schema.{api}.v{v}.response"))
        for v in versions
    }


_FETCH = _schemas("fetch", FETCH_VERSIONS)
_FETCH_SNAPSHOT = _schemas("fetch_snapshot", FETCH_SNAPSHOT_VERSIONS)
_FETCH_REQUESTS = tuple(req.FetchRequest for req, _ in _FETCH.values())
_FETCH_RESPONSES = tuple(resp.FetchResponse for _, resp in _FETCH.values())
_FETCH_SNAPSHOT_REQUESTS = tuple(req.FetchSnapshotRequest for req, _ in _FETCH_SNAPSHOT.values())
_FETCH_SNAPSHOT_RESPONSES = tuple(resp.FetchSnapshotResponse for _, resp in _FETCH_SNAPSHOT.values())


class WireError(ValueError):
    """A well-formed entity that is not a valid Raft message for this node (wrong topic, no partition…)."""


def _bid(node: int | None) -> BrokerId:
    return BrokerId(-1 if node is None else node)


def _node(value: int) -> int | None:
    return None if value < 0 else int(value)


def _err(error: m.Errors) -> ErrorCode:
    return ErrorCode(int(error))


def _error(code: ErrorCode) -> m.Errors:
    try:
        return m.Errors(int(code))
    except ValueError:
        return m.Errors.UNKNOWN_SERVER_ERROR


_TOPIC_NAMES = ("topic_name", "topic", "name")
_PARTITION_INDEXES = ("partition_index", "partition", "index")


def metadata_partition(topics: tuple[Any, ...]) -> Any:
    """The one partition a Raft request or response names, which must be partition 0 of
    `__cluster_metadata` (by name, or by id from Fetch v13) — Kafka's `RaftUtil.hasValidTopicPartition`;
    WireError otherwise."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError("expected exactly one partition of __cluster_metadata")
    topic = topics[0]
    name = next((getattr(topic, a) for a in _TOPIC_NAMES if hasattr(topic, a)), None)
    if (name != METADATA_TOPIC) if name is not None else (getattr(topic, "topic_id", None) != METADATA_TOPIC_ID):
        raise WireError("expected exactly one partition of __cluster_metadata")
    partition = topic.partitions[0]
    index = next(getattr(partition, a) for a in _PARTITION_INDEXES if hasattr(partition, a))
    if index != PARTITION:
        raise WireError(f"partition {index} of __cluster_metadata: the log is partition 0")
    return partition


def _directory(value: uuid.UUID | None) -> uuid.UUID | None:
    """A directory id from the wire: Kafka's zero UUID (the field's default) is none."""
    return None if value is None or value.int == 0 else value


# ---------------------------------------------------------------------------- to the wire


def request_to_wire(
    message: m.Request, cluster_id: str | None = None, destination: int = -1, version: int | None = None
) -> Any:
    """A kio request entity for `message` (`destination`: the voter addressed, for Vote v2;
    `version`: for Fetch and FetchSnapshot, one of those served — the newest by default)."""
    if isinstance(message, m.VoteRequest):
        part = v_req.PartitionData(
            partition_index=PARTITION,
            replica_epoch=i32(message.epoch),
            replica_id=BrokerId(message.candidate_id),
            replica_directory_id=None,
            voter_directory_id=message.voter_directory_id,  # KIP-853: the disk the candidate asks
            last_offset_epoch=i32(message.last_epoch),
            last_offset=i64(message.end_offset),
            pre_vote=message.pre_vote,
        )
        return v_req.VoteRequest(
            cluster_id=cluster_id,
            voter_id=BrokerId(destination),
            topics=(v_req.TopicData(topic_name=METADATA_TOPIC, partitions=(part,)),),
        )
    if isinstance(message, m.BeginQuorumEpochRequest):
        begin_part = bqe_req.PartitionData(
            partition_index=PARTITION, leader_id=BrokerId(message.leader_id), leader_epoch=i32(message.epoch)
        )
        return bqe_req.BeginQuorumEpochRequest(
            cluster_id=cluster_id, topics=(bqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=(begin_part,)),)
        )
    if isinstance(message, m.EndQuorumEpochRequest):
        end_part = eqe_req.PartitionData(
            partition_index=PARTITION,
            leader_id=BrokerId(message.leader_id),
            leader_epoch=i32(message.epoch),
            preferred_successors=tuple(i32(s) for s in message.preferred_successors),
        )
        return eqe_req.EndQuorumEpochRequest(
            cluster_id=cluster_id, topics=(eqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=(end_part,)),)
        )
    if isinstance(message, m.DescribeQuorumRequest):
        describe_part = dq_req.PartitionData(partition_index=PARTITION)
        return dq_req.DescribeQuorumRequest(
            topics=(dq_req.TopicData(topic_name=METADATA_TOPIC, partitions=(describe_part,)),)
        )
    if isinstance(message, m.FetchRequest):
        return _fetch_request(message, cluster_id, FETCH_VERSIONS[-1] if version is None else version)
    if isinstance(message, m.FetchSnapshotRequest):
        return _fetch_snapshot_request(message, cluster_id, FETCH_SNAPSHOT_VERSIONS[-1] if version is None else version)
    raise TypeError(f"not a Raft request: {type(message).__name__}")


def _fetch_request(message: m.FetchRequest, cluster_id: str | None, version: int) -> Any:
    req = _FETCH[version][0]
    directory = {"replica_directory_id": message.replica_directory_id} if version >= FIRST_FETCH_WITH_DIRECTORY else {}
    fetch_part = req.FetchPartition(
        partition=PARTITION,
        current_leader_epoch=i32(message.epoch),
        fetch_offset=i64(message.fetch_offset),
        last_fetched_epoch=i32(message.last_fetched_epoch),
        log_start_offset=_NO_LOG_START,
        partition_max_bytes=_ANY_BYTES,
        **directory,
    )
    if version < 13:
        topic = req.FetchTopic(topic=METADATA_TOPIC, partitions=(fetch_part,))
    else:
        topic = req.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(fetch_part,))
    replica_id = BrokerId(message.replica_id)
    replica = {"replica_id": replica_id} if version < 15 else {"replica_state": req.ReplicaState(replica_id=replica_id)}
    return req.FetchRequest(
        cluster_id=cluster_id,
        max_wait=_max_wait(message.max_wait_ms),
        min_bytes=_MIN_BYTES,
        topics=(topic,),
        forgotten_topics_data=(),
        **replica,
    )


def _fetch_snapshot_request(message: m.FetchSnapshotRequest, cluster_id: str | None, version: int) -> Any:
    req = _FETCH_SNAPSHOT[version][0]
    directory = (
        {"replica_directory_id": message.replica_directory_id}
        if version >= FIRST_FETCH_SNAPSHOT_WITH_DIRECTORY
        else {}
    )
    snapshot_part = req.PartitionSnapshot(
        partition=PARTITION,
        current_leader_epoch=i32(message.epoch),
        snapshot_id=req.SnapshotId(end_offset=i64(message.snapshot_id.offset), epoch=i32(message.snapshot_id.epoch)),
        position=i64(message.position),
        **directory,
    )
    return req.FetchSnapshotRequest(
        cluster_id=cluster_id,
        replica_id=BrokerId(message.replica_id),
        max_bytes=i32(message.max_bytes),
        topics=(req.TopicSnapshot(name=METADATA_TOPIC, partitions=(snapshot_part,)),),
    )


def _replica(r: m.ReplicaState) -> dq_resp.ReplicaState:
    return dq_resp.ReplicaState(
        replica_id=BrokerId(r.replica_id),
        log_end_offset=i64(r.log_end_offset),
        last_fetch_timestamp=i64(r.last_fetch_ms),
        last_caught_up_timestamp=i64(r.last_caught_up_ms),
    )


def response_to_wire(message: m.Response, version: int | None = None) -> Any:
    """A kio response entity for `message` (`version`: the request's, where several are served)."""
    if isinstance(message, m.DescribeQuorumResponse) and version is not None and version >= 2:
        return describe.response_to_v2(message)
    if isinstance(message, m.VoteResponse):
        part = v_resp.PartitionData(
            partition_index=PARTITION,
            error_code=_err(message.error),
            leader_id=_bid(message.leader_id),
            leader_epoch=i32(message.epoch),
            vote_granted=message.granted,
        )
        return v_resp.VoteResponse(
            error_code=ErrorCode.none, topics=(v_resp.TopicData(topic_name=METADATA_TOPIC, partitions=(part,)),)
        )
    if isinstance(message, m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse):
        mod = bqe_resp if isinstance(message, m.BeginQuorumEpochResponse) else eqe_resp
        part = mod.PartitionData(
            partition_index=PARTITION,
            error_code=_err(message.error),
            leader_id=_bid(message.leader_id),
            leader_epoch=i32(message.epoch),
        )
        entity = mod.BeginQuorumEpochResponse if mod is bqe_resp else mod.EndQuorumEpochResponse
        return entity(error_code=ErrorCode.none, topics=(mod.TopicData(topic_name=METADATA_TOPIC, partitions=(part,)),))
    if isinstance(message, m.DescribeQuorumResponse):
        describe_part = dq_resp.PartitionData(
            partition_index=PARTITION,
            error_code=_err(message.error),
            leader_id=_bid(message.leader_id),
            leader_epoch=i32(message.epoch),
            high_watermark=i64(message.high_watermark),
            current_voters=tuple(_replica(r) for r in message.voters),
            observers=tuple(_replica(r) for r in message.observers),
        )
        return dq_resp.DescribeQuorumResponse(
            error_code=ErrorCode.none,
            topics=(dq_resp.TopicData(topic_name=METADATA_TOPIC, partitions=(describe_part,)),),
        )
    if isinstance(message, m.FetchResponse):
        return _fetch_response_to_wire(message, FETCH_VERSIONS[-1] if version is None else version)
    if isinstance(message, m.FetchSnapshotResponse):
        fs_resp = _FETCH_SNAPSHOT[FETCH_SNAPSHOT_VERSIONS[-1] if version is None else version][1]
        sid = message.snapshot_id or OffsetAndEpoch(-1, -1)
        snapshot_part = fs_resp.PartitionSnapshot(
            index=PARTITION,
            error_code=_err(message.error),
            snapshot_id=fs_resp.SnapshotId(end_offset=i64(sid.offset), epoch=i32(sid.epoch)),
            current_leader=fs_resp.LeaderIdAndEpoch(leader_id=_bid(message.leader_id), leader_epoch=i32(message.epoch)),
            size=i64(message.size),
            position=i64(message.position),
            unaligned_records=Records(message.data),
        )
        return fs_resp.FetchSnapshotResponse(
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode.none,
            topics=(fs_resp.TopicSnapshot(name=METADATA_TOPIC, partitions=(snapshot_part,)),),
        )
    raise TypeError(f"not a Raft response: {type(message).__name__}")


# One encoded Fetch response kept: the followers fetching the same offset get the same response (same
# batches, the same high-water mark), so the second one reuses the first's entity. Batches are
# compared by identity (the log hands out the same objects for a recent batch), never by content.
_last_fetch: tuple[tuple[Any, ...], Any, tuple[Any, ...]] | None = None


def _fetch_key(message: m.FetchResponse) -> tuple[Any, ...]:
    return (
        message.error,
        message.epoch,
        message.leader_id,
        message.high_watermark,
        message.log_start_offset,
        message.diverging_epoch,
        message.snapshot_id,
        *map(id, message.batches),
    )


def _fetch_response_to_wire(message: m.FetchResponse, version: int) -> Any:
    global _last_fetch
    key = (version, *_fetch_key(message))
    cached = _last_fetch
    if cached is not None and cached[0] == key:
        return cached[1]
    f_resp = _FETCH[version][1]
    div = message.diverging_epoch
    snap = message.snapshot_id
    part = f_resp.PartitionData(
        partition_index=PARTITION,
        error_code=_err(message.error),
        high_watermark=i64(message.high_watermark),
        log_start_offset=i64(message.log_start_offset),
        diverging_epoch=f_resp.EpochEndOffset(epoch=i32(div.epoch), end_offset=i64(div.offset))
        if div is not None
        else f_resp.EpochEndOffset(),
        current_leader=f_resp.LeaderIdAndEpoch(leader_id=_bid(message.leader_id), leader_epoch=i32(message.epoch)),
        snapshot_id=f_resp.SnapshotId(end_offset=i64(snap.offset), epoch=i32(snap.epoch))
        if snap is not None
        else f_resp.SnapshotId(),
        aborted_transactions=None,
        records=Records(encode_batches(message.batches)) if message.batches else None,
    )
    entity = f_resp.FetchResponse(
        throttle_time=_NO_THROTTLE,
        error_code=ErrorCode.none,
        responses=(
            f_resp.FetchableTopicResponse(topic=METADATA_TOPIC, partitions=(part,))
            if version < 13
            else f_resp.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=(part,)),
        ),
    )
    _last_fetch = (key, entity, message.batches)  # the batches stay referenced: their ids stay theirs
    return entity


# ---------------------------------------------------------------------------- from the wire


def request_from_wire(entity: Any) -> m.Request:
    """The core's message for a kio request entity; raises WireError for one it cannot serve."""
    if isinstance(entity, v_req.VoteRequest):
        p = metadata_partition(entity.topics)
        asked = p.voter_directory_id
        return m.VoteRequest(
            p.replica_epoch,
            p.replica_id,
            p.last_offset_epoch,
            p.last_offset,
            p.pre_vote,
            None if asked is None or asked.int == 0 else asked,
        )
    if isinstance(entity, bqe_req.BeginQuorumEpochRequest):
        p = metadata_partition(entity.topics)
        return m.BeginQuorumEpochRequest(p.leader_epoch, p.leader_id)
    if isinstance(entity, eqe_req.EndQuorumEpochRequest):
        p = metadata_partition(entity.topics)
        return m.EndQuorumEpochRequest(p.leader_epoch, p.leader_id, tuple(int(s) for s in p.preferred_successors))
    if isinstance(entity, dq_req.DescribeQuorumRequest | dq2_req.DescribeQuorumRequest):
        metadata_partition(entity.topics)
        return m.DescribeQuorumRequest()
    if isinstance(entity, _FETCH_REQUESTS):
        p = metadata_partition(entity.topics)
        wait_ms = millis(entity.max_wait)
        replica = entity.replica_state.replica_id if hasattr(entity, "replica_state") else entity.replica_id
        return m.FetchRequest(
            p.current_leader_epoch,
            replica,
            p.fetch_offset,
            p.last_fetched_epoch,
            wait_ms,
            _directory(getattr(p, "replica_directory_id", None)),
        )
    if isinstance(entity, _FETCH_SNAPSHOT_REQUESTS):
        p = metadata_partition(entity.topics)
        sid = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return m.FetchSnapshotRequest(
            p.current_leader_epoch,
            entity.replica_id,
            sid,
            p.position,
            entity.max_bytes,
            _directory(getattr(p, "replica_directory_id", None)),
        )
    raise WireError(f"not a Raft request entity: {type(entity).__name__}")


def _replica_state(r: dq_resp.ReplicaState) -> m.ReplicaState:
    return m.ReplicaState(r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)


def response_from_wire(entity: Any) -> m.Response:
    """The core's message for a kio response entity. A top-level error applies to the partition."""
    top = _error(entity.error_code)
    if isinstance(entity, v_resp.VoteResponse):
        if top != m.Errors.NONE:
            return m.VoteResponse(top, -1, None, False)
        p = metadata_partition(entity.topics)
        return m.VoteResponse(_error(p.error_code), p.leader_epoch, _node(p.leader_id), p.vote_granted)
    if isinstance(entity, bqe_resp.BeginQuorumEpochResponse | eqe_resp.EndQuorumEpochResponse):
        cls = (
            m.BeginQuorumEpochResponse
            if isinstance(entity, bqe_resp.BeginQuorumEpochResponse)
            else m.EndQuorumEpochResponse
        )
        if top != m.Errors.NONE:
            return cls(top, -1, None)
        p = metadata_partition(entity.topics)
        return cls(_error(p.error_code), p.leader_epoch, _node(p.leader_id))
    if isinstance(entity, dq2_resp.DescribeQuorumResponse):
        if top != m.Errors.NONE:
            return m.DescribeQuorumResponse(top, None, -1, -1)
        return describe.response_from_v2(entity, metadata_partition(entity.topics))
    if isinstance(entity, dq_resp.DescribeQuorumResponse):
        if top != m.Errors.NONE:
            return m.DescribeQuorumResponse(top, None, -1, -1)
        p = metadata_partition(entity.topics)
        return m.DescribeQuorumResponse(
            _error(p.error_code),
            _node(p.leader_id),
            p.leader_epoch,
            p.high_watermark,
            tuple(_replica_state(r) for r in p.current_voters),
            tuple(_replica_state(r) for r in p.observers),
        )
    if isinstance(entity, _FETCH_RESPONSES):
        if top != m.Errors.NONE:
            return m.FetchResponse(top, -1, None)
        p = metadata_partition(entity.responses)
        div = p.diverging_epoch
        snap = p.snapshot_id
        return m.FetchResponse(
            _error(p.error_code),
            p.current_leader.leader_epoch,
            _node(p.current_leader.leader_id),
            p.high_watermark,
            p.log_start_offset,
            tuple(decode_batches(bytes(p.records))) if p.records else (),
            OffsetAndEpoch(div.end_offset, div.epoch) if div.end_offset >= 0 and div.epoch >= 0 else None,
            OffsetAndEpoch(snap.end_offset, snap.epoch) if snap.end_offset >= 0 and snap.epoch >= 0 else None,
        )
    if isinstance(entity, _FETCH_SNAPSHOT_RESPONSES):
        if top != m.Errors.NONE:
            return m.FetchSnapshotResponse(top, -1, None)
        p = metadata_partition(entity.topics)
        sid = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return m.FetchSnapshotResponse(
            _error(p.error_code),
            p.current_leader.leader_epoch,
            _node(p.current_leader.leader_id),
            sid if sid.offset >= 0 else None,
            p.size,
            p.position,
            bytes(p.unaligned_records),
        )
    raise WireError(f"not a Raft response entity: {type(entity).__name__}")
