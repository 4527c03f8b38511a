"""Compact internal Raft messages (KIP-595 RPCs) exchanged by the sans-IO core.

The simulator passes these objects directly; `node.raft.wire` maps them to and from Kafka's
wire entities for the real transport. Every message travels inside an `Envelope` naming its
source and destination node; `ref` is an opaque tag a transport may set on an incoming request
(for example its correlation id) that the core copies onto the response it eventually sends.
Instances are treated as immutable once built (they are not frozen only for speed).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch
from kraftlab.node.raft.voters import Endpoint, Voter


class Errors(IntEnum):
    """The Kafka error codes the Raft RPCs use."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    INVALID_RECORD = 87
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    INCONSISTENT_CLUSTER_ID = 104
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


@dataclass(slots=True)
class VoteRequest:
    """A (pre-)vote request. For a pre-vote (KIP-996) `epoch` is the epoch the candidate would
    take (its current epoch + 1) and voters change no state."""

    epoch: int
    candidate_id: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False
    voter_directory_id: uuid.UUID | None = None
    """KIP-853: the directory id the candidate's voter set gives the replica asked (None: not
    known, the static mode); a replica with another directory (a replaced disk) refuses."""


@dataclass(slots=True)
class VoteResponse:
    error: Errors
    epoch: int
    leader_id: int | None
    granted: bool
    pre_vote: bool = False


@dataclass(slots=True)
class BeginQuorumEpochRequest:
    epoch: int
    leader_id: int


@dataclass(slots=True)
class BeginQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: int | None


@dataclass(slots=True)
class EndQuorumEpochRequest:
    """A resigning leader asks voters to elect one of `preferred_successors` first (in order)."""

    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(slots=True)
class EndQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: int | None


@dataclass(slots=True)
class FetchRequest:
    """Pull replication: `fetch_offset` is the replica's (durable, for voters) log end offset and
    `last_fetched_epoch` the epoch of its last record. `replica_id` is -1 for a plain consumer."""

    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    replica_directory_id: uuid.UUID | None = None
    """KIP-853 (Fetch v17): the fetching replica's directory id (None: not sent, as before v17, or
    the static mode). The leader tracks each replica by (id, directory id): a fetch with another
    directory than the voter set names for that id is an observer's, not the voter's."""


@dataclass(slots=True)
class FetchResponse:
    """At most one of `diverging_epoch` (truncate to its offset) and `snapshot_id` (fetch this
    snapshot) is set; otherwise `batches` continue the log at the fetch offset."""

    error: Errors
    epoch: int
    leader_id: int | None
    high_watermark: int = -1
    log_start_offset: int = 0
    batches: tuple[Batch, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None


@dataclass(slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica_id: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    replica_directory_id: uuid.UUID | None = None
    """KIP-853 (FetchSnapshot v1): the fetching replica's directory id, as on Fetch."""


@dataclass(slots=True)
class FetchSnapshotResponse:
    error: Errors
    epoch: int
    leader_id: int | None
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    data: bytes = b""


@dataclass(slots=True)
class ReplicaState:
    """One replica as the leader sees it (DescribeQuorum); times are the leader's clock, -1 unknown."""

    replica_id: int
    log_end_offset: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    directory_id: uuid.UUID | None = None
    """KIP-853 (DescribeQuorum v2): the voter's directory id as the voter set names it (None: unknown)."""


@dataclass(slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(slots=True)
class DescribeQuorumResponse:
    error: Errors
    leader_id: int | None
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()
    nodes: tuple[tuple[int, tuple[Endpoint, ...]], ...] = ()
    """KIP-853 (DescribeQuorum v2): each voter's listeners, by node id."""


@dataclass(slots=True)
class AddRaftVoterRequest:
    """KIP-853 (api key 80): make replica (voter.node_id, voter.directory_id) a voter once it has
    caught up; answered when the new voter set has committed, or REQUEST_TIMED_OUT after `timeout_ms`."""

    voter: Voter
    timeout_ms: int = 30_000


@dataclass(slots=True)
class RemoveRaftVoterRequest:
    """KIP-853 (api key 81): remove voter (voter_id, directory_id); answered once the set without it committed."""

    voter_id: int
    directory_id: uuid.UUID | None


@dataclass(slots=True)
class UpdateRaftVoterRequest:
    """KIP-853 (api key 82): a voter tells the leader its current endpoints and kraft.version range."""

    epoch: int
    voter_id: int
    directory_id: uuid.UUID | None
    endpoints: tuple[Endpoint, ...]
    kraft_versions: tuple[int, int] = (0, 1)


@dataclass(slots=True)
class VoterChangeResponse:
    """The answer to AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (Kafka's three responses
    share their error code and message; UpdateRaftVoter's leader hint is `leader_id`/`epoch`)."""

    error: Errors
    message: str | None = None
    leader_id: int | None = None
    epoch: int = -1


@dataclass(slots=True)
class RequestFailed:
    """Not a wire message: a transport's report, in place of the response, that a request got none —
    the connection was refused or lost (`BROKER_NOT_AVAILABLE`, as Kafka's network channel reports a
    disconnect) or it timed out (`REQUEST_TIMED_OUT`). Delivered with the request's `ref`."""

    error: Errors = Errors.BROKER_NOT_AVAILABLE


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | DescribeQuorumRequest
    | AddRaftVoterRequest
    | RemoveRaftVoterRequest
    | UpdateRaftVoterRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | DescribeQuorumResponse
    | VoterChangeResponse
)
Message = Request | Response | RequestFailed

REQUEST_TYPES: tuple[type, ...] = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    DescribeQuorumRequest,
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
)


def is_request(message: Message) -> bool:
    return isinstance(message, REQUEST_TYPES)


@dataclass(slots=True)
class Envelope:
    """A message in flight: `src` and `dst` are node ids; `ref` is the transport's opaque tag of
    the request a response answers (copied by the core, never interpreted)."""

    src: int
    dst: int
    message: Message
    ref: Any = field(default=None, compare=False)
