"""Kafka's reading of the Raft APIs, written from Kafka's message schemas (kio's generated classes)
and KafkaRaftClient's handling, independently of the node's own codec (`node.raft.wire`,
`node.raft.membership.wire`): the reference the simulator's wire mode and the codec's property
tests judge the node's codec by.

The node's codec maps its messages to kio entities and back; a mistake made the same way in both
directions (two fields swapped, a version gate, a default) survives the node's own round trip.
Here each Kafka field is read by its schema name into the node's message types, and record batches
by kio's own batch reader (`kio.records`, not `node.storage.batches`), so a node-encoded message
read here, and a kio entity read by the node, must both give the same values.

Kafka's rules this reading keeps (RaftUtil / KafkaRaftClient):
- a Raft request or response names exactly one topic, `__cluster_metadata` (by id from Fetch v13),
  with exactly one partition, index 0 (`hasValidTopicPartition`); anything else is `Refused`;
- a response with a top-level error is that error alone (`handleTopLevelError`): its partitions
  are not read;
- an error code Kafka does not know reads as UNKNOWN_SERVER_ERROR (`Errors.forCode`); a leader
  id below 0 is no leader; a directory id of all zeros is none (`Uuid.ZERO_UUID`);
- a Fetch answer's diverging epoch or snapshot id with a field below 0 is absent (Kafka's defaults
  are -1/-1; Kafka refuses a half-set one).

**AbsentIsKafkasDefault** (`absent_markers`, judged on every Raft response the wire mode carries and
on the voter change answers, `node.sim.answer_fields`): a FetchResponse's DivergingEpoch and
SnapshotId, and a FetchSnapshotResponse's SnapshotId, are set whole or not at all — both fields at
0 or above, or both at the schema's default -1. Kafka's follower (`KafkaRaftClient.handleFetchResponse`)
takes a pair with either field at 0 or above as set and refuses the whole answer when the other is
below 0, where this reading takes a half-set pair for none: without the rule a half-set pair would
pass unseen. A leader id or leader epoch is 0 or above, or exactly the schemas' -1 for none.

`UNMODELED` names, in one place, every field of the served entities the node's messages do not
carry, with the reason (tests/raft/test_wire_reference.py holds it exact: every other field changes
this reading); `carried` is what a message keeps at a given version (the fields an older version has
no room for); `as_kafka_reads_it` is the simulators' wire-mode judge (`node.sim.wire`).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from kio.records.readers import read_batch

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.voters import Endpoint, Voter

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's `Uuid.METADATA_TOPIC_ID` (the Uuid whose most and least significant longs are 0 and 1)."""
CONTROL_ATTRIBUTE = 0x20
"""The record batch attributes bit of a control batch (Kafka's `RecordBatch.CONTROL_FLAG_MASK`)."""

UNMODELED: dict[str, str] = {
    "*.cluster_id": "checked at the transport (INCONSISTENT_CLUSTER_ID before the core), not a core field",
    "VoteRequest.voter_id": "the addressee, known to the transport (the envelope's destination)",
    "VoteRequest.replica_directory_id": "the candidate's own directory id: the node's voters judge a candidate "
    "by id alone (the voter's directory id is checked, VoterDirectoryId)",
    "*.node_endpoints": "leader endpoints (KIP-853 tagged field): the node finds voters by its configured endpoints",
    "DescribeQuorumResponse.error_message": "free text beside the error code; the core acts on the code",
    "*.throttle_time": "no quotas on the controller listener: always zero (judged by node.sim.wire)",
    "FetchRequest.min_bytes": "the node answers a Raft Fetch as soon as it has records or max_wait ends",
    "FetchRequest.max_bytes": "the node bounds a response by its own batch limit",
    "FetchRequest.isolation_level": "a Raft fetch reads the whole log (READ_UNCOMMITTED)",
    "FetchRequest.session_id": "KIP-227 fetch sessions are not used by Raft (always 0/-1)",
    "FetchRequest.session_epoch": "KIP-227 fetch sessions are not used by Raft",
    "FetchRequest.forgotten_topics_data": "fetch sessions only",
    "FetchRequest.rack_id": "follower fetching from the closest replica (KIP-392) does not apply to Raft",
    "FetchRequest.replica_epoch": "the broker epoch of a fetching broker (KIP-903); Raft replicas send -1",
    "FetchRequest.log_start_offset": "a follower's log start offset: the Raft leader does not track it",
    "FetchRequest.partition_max_bytes": "the node bounds a response by its own batch limit",
    "FetchResponse.session_id": "fetch sessions only",
    "FetchResponse.last_stable_offset": "transactions do not apply to the metadata log",
    "FetchResponse.aborted_transactions": "transactions do not apply to the metadata log",
    "FetchResponse.preferred_read_replica": "KIP-392 only",
    "UpdateRaftVoterResponse.host": "the leader's host and port (informational): the node's tools name the"
    " leader by id",
    "UpdateRaftVoterResponse.port": "as host",
}
"""Fields of the served entities the node's messages do not model (`Entity.field`; `*` any entity)."""


class Refused(ValueError):
    """An entity Kafka's Raft client would not act on: not exactly `__cluster_metadata`-0."""


def _error(code: int) -> m.Errors:
    try:
        return m.Errors(int(code))
    except ValueError:
        return m.Errors.UNKNOWN_SERVER_ERROR


def _leader(node_id: int) -> int | None:
    return int(node_id) if node_id >= 0 else None


def _directory(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else value


def _ms(duration: datetime.timedelta) -> int:
    """An int32 millisecond field (MaxWaitMs, TimeoutMs), exactly."""
    return duration // datetime.timedelta(milliseconds=1)


def _pair(offset: int, epoch: int) -> OffsetAndEpoch | None:
    return OffsetAndEpoch(int(offset), int(epoch)) if offset >= 0 and epoch >= 0 else None


def _requested(snapshot_id: Any) -> OffsetAndEpoch | None:
    """A FetchSnapshot answer's snapshot id: the one asked for (Kafka compares it with the request's),
    none when its end offset is below 0 (the schema's no-snapshot value)."""
    end_offset = int(snapshot_id.end_offset)
    return OffsetAndEpoch(end_offset, int(snapshot_id.epoch)) if end_offset >= 0 else None


def _partition(topics: tuple[Any, ...], index_field: str) -> Any:
    """The one partition of `__cluster_metadata` (named, or by id where the schema has no name)."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise Refused(f"{len(topics)} topic(s): Kafka's Raft APIs carry exactly one partition")
    topic = topics[0]
    name = next((getattr(topic, f) for f in ("topic_name", "topic", "name") if hasattr(topic, f)), None)
    if name is None and getattr(topic, "topic_id", None) != METADATA_TOPIC_ID:
        raise Refused(f"topic id {getattr(topic, 'topic_id', None)} is not the metadata topic's")
    if name is not None and name != METADATA_TOPIC:
        raise Refused(f"topic {name!r} is not {METADATA_TOPIC}")
    part = topic.partitions[0]
    if getattr(part, index_field) != 0:
        raise Refused(f"partition {getattr(part, index_field)} of {METADATA_TOPIC}: the metadata log is partition 0")
    return part


def read_batches(data: bytes) -> tuple[Batch, ...]:
    """Record batches as kio's batch reader reads them (CRC, lengths and record offsets checked)."""
    batches: list[Batch] = []
    pos = 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        pos += size
        offsets = [int(r.offset) for r in batch.records]
        if offsets != list(range(batch.base_offset, batch.base_offset + len(offsets))) or (
            batch.last_offset_delta != len(offsets) - 1
        ):
            raise Refused(f"batch at {batch.base_offset}: record offsets {offsets} are not contiguous")
        batches.append(
            Batch(
                int(batch.base_offset),
                int(batch.partition_leader_epoch),
                tuple(Record(r.key, r.value) for r in batch.records),
                bool(batch.attributes & CONTROL_ATTRIBUTE),
                int(batch.base_timestamp),
            )
        )
    return tuple(batches)


# ---------------------------------------------------------------------------- requests


def read_request(entity: Any) -> m.Request:
    """The node's request for a kio Raft request entity, field by field from Kafka's schema."""
    name = type(entity).__name__
    if name == "VoteRequest":
        p = _partition(entity.topics, "partition_index")
        return m.VoteRequest(
            int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch), int(p.last_offset),
            bool(p.pre_vote), _directory(p.voter_directory_id),
        )
    if name == "BeginQuorumEpochRequest":
        p = _partition(entity.topics, "partition_index")
        return m.BeginQuorumEpochRequest(int(p.leader_epoch), int(p.leader_id))
    if name == "EndQuorumEpochRequest":
        p = _partition(entity.topics, "partition_index")
        return m.EndQuorumEpochRequest(
            int(p.leader_epoch), int(p.leader_id), tuple(int(s) for s in p.preferred_successors)
        )
    if name == "DescribeQuorumRequest":
        _partition(entity.topics, "partition_index")
        return m.DescribeQuorumRequest()
    if name == "FetchRequest":
        p = _partition(entity.topics, "partition")
        replica = entity.replica_state.replica_id if hasattr(entity, "replica_state") else entity.replica_id
        return m.FetchRequest(
            int(p.current_leader_epoch), int(replica), int(p.fetch_offset), int(p.last_fetched_epoch),
            _ms(entity.max_wait), _directory(getattr(p, "replica_directory_id", None)),
        )
    if name == "FetchSnapshotRequest":
        p = _partition(entity.topics, "partition")
        return m.FetchSnapshotRequest(
            int(p.current_leader_epoch), int(entity.replica_id),
            OffsetAndEpoch(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)), int(p.position),
            int(entity.max_bytes), _directory(getattr(p, "replica_directory_id", None)),
        )
    if name == "AddRaftVoterRequest":
        voter = Voter(int(entity.voter_id), _directory(entity.voter_directory_id), _endpoints(entity.listeners))
        return m.AddRaftVoterRequest(voter, _ms(entity.timeout))
    if name == "RemoveRaftVoterRequest":
        return m.RemoveRaftVoterRequest(int(entity.voter_id), _directory(entity.voter_directory_id))
    if name == "UpdateRaftVoterRequest":
        feature = entity.k_raft_version_feature
        return m.UpdateRaftVoterRequest(
            int(entity.current_leader_epoch), int(entity.voter_id), _directory(entity.voter_directory_id),
            _endpoints(entity.listeners), (int(feature.min_supported_version), int(feature.max_supported_version)),
        )
    raise Refused(f"not a Raft request: {name}")


def _endpoints(listeners: tuple[Any, ...]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(str(x.name), str(x.host), int(x.port)) for x in listeners)


# ---------------------------------------------------------------------------- responses


def read_response(entity: Any) -> m.Response:
    """The node's response for a kio Raft response entity (a top-level error alone, when set)."""
    name = type(entity).__name__
    top = _error(entity.error_code)
    if name in ("AddRaftVoterResponse", "RemoveRaftVoterResponse"):
        return m.VoterChangeResponse(top, entity.error_message)
    if name == "UpdateRaftVoterResponse":
        leader = entity.current_leader
        return m.VoterChangeResponse(top, None, _leader(leader.leader_id), int(leader.leader_epoch))
    if name == "VoteResponse":
        if top != m.Errors.NONE:
            return m.VoteResponse(top, -1, None, False)
        p = _partition(entity.topics, "partition_index")
        return m.VoteResponse(_error(p.error_code), int(p.leader_epoch), _leader(p.leader_id), bool(p.vote_granted))
    if name in ("BeginQuorumEpochResponse", "EndQuorumEpochResponse"):
        kind = m.BeginQuorumEpochResponse if name == "BeginQuorumEpochResponse" else m.EndQuorumEpochResponse
        if top != m.Errors.NONE:
            return kind(top, -1, None)
        p = _partition(entity.topics, "partition_index")
        return kind(_error(p.error_code), int(p.leader_epoch), _leader(p.leader_id))
    if name == "DescribeQuorumResponse":
        return _describe(entity, top)
    if name == "FetchResponse":
        if top != m.Errors.NONE:
            return m.FetchResponse(top, -1, None)
        p = _partition(entity.responses, "partition_index")
        return m.FetchResponse(
            _error(p.error_code), int(p.current_leader.leader_epoch), _leader(p.current_leader.leader_id),
            int(p.high_watermark), int(p.log_start_offset),
            read_batches(bytes(p.records)) if p.records else (),
            _pair(p.diverging_epoch.end_offset, p.diverging_epoch.epoch),
            _pair(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        )
    if name == "FetchSnapshotResponse":
        if top != m.Errors.NONE:
            return m.FetchSnapshotResponse(top, -1, None)
        p = _partition(entity.topics, "index")
        return m.FetchSnapshotResponse(
            _error(p.error_code), int(p.current_leader.leader_epoch), _leader(p.current_leader.leader_id),
            _requested(p.snapshot_id), int(p.size), int(p.position),
            bytes(p.unaligned_records),
        )
    raise Refused(f"not a Raft response: {name}")


def _replica(r: Any) -> m.ReplicaState:
    return m.ReplicaState(
        int(r.replica_id), int(r.log_end_offset), int(r.last_fetch_timestamp), int(r.last_caught_up_timestamp),
        _directory(getattr(r, "replica_directory_id", None)),
    )


def _describe(entity: Any, top: m.Errors) -> m.DescribeQuorumResponse:
    if top != m.Errors.NONE:
        return m.DescribeQuorumResponse(top, None, -1, -1)
    p = _partition(entity.topics, "partition_index")
    return m.DescribeQuorumResponse(
        _error(p.error_code), _leader(p.leader_id), int(p.leader_epoch), int(p.high_watermark),
        tuple(_replica(r) for r in p.current_voters), tuple(_replica(r) for r in p.observers),
        tuple((int(n.node_id), _endpoints(n.listeners)) for n in getattr(entity, "nodes", ())),
    )


# ---------------------------------------------------------------------------- versions


def carried(message: m.Message, version: int) -> m.Message:
    """What `message` keeps at `version` of its API: the fields that version's schema has room for
    (Fetch's ReplicaDirectoryId from v17, FetchSnapshot's from v1, DescribeQuorum's directory ids and
    Nodes from v2; a pre-vote answer's flag is no wire field, a voter change answer keeps what its
    API's response has)."""
    replace = dataclasses.replace
    if isinstance(message, m.FetchRequest) and version < 17:
        return replace(message, replica_directory_id=None)
    if isinstance(message, m.FetchSnapshotRequest) and version < 1:
        return replace(message, replica_directory_id=None)
    if isinstance(message, m.DescribeQuorumResponse) and version < 2:
        return replace(
            message,
            voters=tuple(replace(r, directory_id=None) for r in message.voters),
            observers=tuple(replace(r, directory_id=None) for r in message.observers),
            nodes=(),
        )
    if isinstance(message, m.VoteResponse):
        return replace(message, pre_vote=False)
    return message


# ---------------------------------------------------------------------------- the simulator's wire mode


class ReadingViolation(AssertionError):
    """The node's codec and Kafka's reading disagree about a message the simulator carried."""


_PAIRS = ("diverging_epoch", "snapshot_id")
"""The (end offset, epoch) pairs of Fetch and FetchSnapshot answers."""


def absent_markers(entity: Any, what: str) -> None:
    """AbsentIsKafkasDefault over a Raft response entity as it came off the wire (nested entities
    walked, record bytes not)."""
    wrong = _absent(entity)
    if wrong is not None:
        raise ReadingViolation(f"{what}: {type(entity).__name__} {wrong}")


def _absent(entity: Any) -> str | None:
    if not dataclasses.is_dataclass(entity):
        return None
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name in _PAIRS:
            offset, epoch = int(value.end_offset), int(value.epoch)
            if (offset >= 0) != (epoch >= 0) or min(offset, epoch) < -1:
                return f"{f.name} is end offset {offset}, epoch {epoch}: Kafka's is both set or both -1"
        elif f.name in ("leader_id", "leader_epoch") and int(value) < -1:
            return f"{f.name} {int(value)}: Kafka's is 0 or above, or -1 for none"
        else:
            for item in value if isinstance(value, tuple) else (value,):
                wrong = _absent(item)
                if wrong is not None:
                    return wrong
    return None


def as_kafka_reads_it(sent: m.Message, entity: Any, node_reading: m.Message, what: str) -> m.Message:
    """The message a receiver gets in the simulator's wire mode: Kafka's reading of the (decoded)
    `entity` the node encoded `sent` as — which must be `sent` as far as its version carries it, and
    what the node's own codec read (`node_reading`)."""
    if not m.is_request(sent):
        absent_markers(entity, what)
    reading = read_request(entity) if m.is_request(sent) else read_response(entity)
    expected = carried(sent, int(entity.__version__))
    if reading != expected:
        raise ReadingViolation(f"{what}: the node sent {expected!r}, Kafka's schema reads {reading!r}")
    if node_reading != reading:
        raise ReadingViolation(f"{what}: Kafka's schema reads {reading!r}, the node's codec {node_reading!r}")
    return reading
