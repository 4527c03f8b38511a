"""DescribeQuorum v2 (KIP-853) on the wire: each replica's directory id and every voter's listeners
(`Nodes`), beside v1's leader, epoch, high-water mark and replica progress. `node.raft.wire` maps
v1 and calls here when a client asks for v2."""

from __future__ import annotations

from typing import Any

from kio.schema.describe_quorum.v2 import response as dq2
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64, u16

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.voters import Endpoint

METADATA_TOPIC = TopicName("__cluster_metadata")


def _replica(r: m.ReplicaState) -> dq2.ReplicaState:
    return dq2.ReplicaState(
        replica_id=BrokerId(r.replica_id),
        replica_directory_id=r.directory_id,
        log_end_offset=i64(r.log_end_offset),
        last_fetch_timestamp=i64(r.last_fetch_ms),
        last_caught_up_timestamp=i64(r.last_caught_up_ms),
    )


def response_to_v2(message: m.DescribeQuorumResponse) -> dq2.DescribeQuorumResponse:
    part = dq2.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode(int(message.error)),
        error_message=None,
        leader_id=BrokerId(-1 if message.leader_id is None else message.leader_id),
        leader_epoch=i32(message.epoch),
        high_watermark=i64(message.high_watermark),
        current_voters=tuple(_replica(r) for r in message.voters),
        observers=tuple(_replica(r) for r in message.observers),
    )
    nodes = tuple(
        dq2.Node(
            node_id=BrokerId(node_id),
            listeners=tuple(dq2.Listener(name=e.name, host=e.host, port=u16(e.port)) for e in endpoints),
        )
        for node_id, endpoints in message.nodes
    )
    return dq2.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(dq2.TopicData(topic_name=METADATA_TOPIC, partitions=(part,)),),
        nodes=nodes,
    )


def _state(r: Any) -> m.ReplicaState:
    directory = r.replica_directory_id
    return m.ReplicaState(
        int(r.replica_id),
        int(r.log_end_offset),
        int(r.last_fetch_timestamp),
        int(r.last_caught_up_timestamp),
        None if directory is None or directory.int == 0 else directory,
    )


def response_from_v2(entity: dq2.DescribeQuorumResponse, part: Any) -> m.DescribeQuorumResponse:
    """The core's message for a v2 answer whose metadata partition is `part`."""
    try:
        error = m.Errors(int(part.error_code))
    except ValueError:
        error = m.Errors.UNKNOWN_SERVER_ERROR
    return m.DescribeQuorumResponse(
        error,
        None if part.leader_id < 0 else int(part.leader_id),
        int(part.leader_epoch),
        int(part.high_watermark),
        tuple(_state(r) for r in part.current_voters),
        tuple(_state(r) for r in part.observers),
        tuple(
            (int(n.node_id), tuple(Endpoint(x.name, x.host, int(x.port)) for x in n.listeners)) for n in entity.nodes
        ),
    )
