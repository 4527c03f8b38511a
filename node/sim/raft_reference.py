"""An independent reference of Kafka's Raft request validation: the exact error each handler of
`KafkaRaftClient` answers a request with, from the responder's state before the request and the
request alone, in Kafka's order of checks — and the fields an error answer carries beside it.

Judged by the simulator on every answer (`response_rules`): **ExactError** (the answer's error is
the one this reference computes, not merely one Kafka's handler may return) and
**ErrorAnswerFields** (an error answer carries Kafka's defaults beside its error, leader and epoch:
`RaftUtil`'s and the `*Response` builders' empty answers).

Before the handler (`before_handler`, for a kio request entity as it comes off the wire: what the
node's Raft listener refuses before its core sees the request): the controller's cluster
permission (CLUSTER_AUTHORIZATION_FAILED), the cluster id (INCONSISTENT_CLUSTER_ID; a request
naming none passes), both refusing the whole request — the response's top-level error and nothing
else —, then the topic-partition: exactly partition 0 of `__cluster_metadata`, else INVALID_REQUEST
for the whole request, but UNKNOWN_TOPIC_OR_PARTITION on the partition for a FetchSnapshot asking
for one partition and for a DescribeQuorum (on each partition it names). `refused_as` reads where
a response entity put its error.

The order of checks in the handler, by API:

- Vote: INVALID_REQUEST for a bad log position (last offset or last epoch below 0, or a last
  epoch not below the epoch asked for), then the voter-only checks: FENCED_LEADER_EPOCH for an
  epoch below the responder's, INVALID_REQUEST for a negative candidate id, then (the static
  quorum, Kafka before KIP-853) INCONSISTENT_VOTER_SET when the responder is no voter or the
  candidate is none, or (a dynamic quorum, KIP-853) INVALID_VOTER_KEY when the request names
  another directory id than the responder's; else NONE (granted or not).
- BeginQuorumEpoch, EndQuorumEpoch: the voter-only checks (FENCED_LEADER_EPOCH, INVALID_REQUEST,
  and the static quorum's INCONSISTENT_VOTER_SET); else NONE.
- Fetch: INVALID_REQUEST (a negative wait or offset, a last fetched epoch below 0 or above the
  request's epoch), then the leader-only checks: FENCED_LEADER_EPOCH (epoch below the
  responder's), UNKNOWN_LEADER_EPOCH (above), NOT_LEADER_OR_FOLLOWER (the responder does not
  lead); else NONE. An error answer carries no records, no diverging epoch nor snapshot id, the
  high-water mark -1 (Kafka's `buildEmptyFetchResponse` passes none) and the responder's log start.
- FetchSnapshot: the leader-only checks, then SNAPSHOT_NOT_FOUND (no such snapshot, or the
  bootstrap checkpoint 0-0, never replicated), POSITION_OUT_OF_RANGE (a position below 0 or not
  below the snapshot's size); else NONE. An error answer names no snapshot, size 0, position 0
  and no bytes.
- DescribeQuorum: NOT_LEADER_OR_FOLLOWER from a node that does not lead; else NONE.

`DEVIATIONS` is the one place where the node deliberately answers otherwise than Kafka; the
reference computes the node's answer there and says so.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.invariants import CheckedNode

E = m.Errors

BOOTSTRAP_SNAPSHOT = OffsetAndEpoch(0, 0)
"""KIP-853's bootstrap checkpoint: the first voter set, which no leader replicates as a snapshot."""

DEVIATIONS: dict[str, str] = {
    "pre-vote epoch": "a pre-vote (KIP-996) carries the epoch the candidate would take (its own + 1) where "
    "Kafka's ReplicaEpoch is the candidate's own: the reference judges a pre-vote's epoch less one",
    "leader is this node": "a BeginQuorumEpoch or EndQuorumEpoch naming the responder itself as the "
    "leader is INCONSISTENT_VOTER_SET, before the epoch checks (Kafka raises IllegalStateException in "
    "its transition, an UNKNOWN_SERVER_ERROR for the whole request)",
    "fetch inside a batch": "a Fetch whose position continues the log but falls inside a batch (no "
    "replica fetches there) is INVALID_REQUEST (Kafka serves the batch holding it)",
    "describe quorum hint": "a DescribeQuorum refused NOT_LEADER_OR_FOLLOWER names the responder's leader, "
    "epoch and high-water mark (Kafka's `singletonErrorResponse` leaves them 0): the suite's client finds the "
    "active controller by it; not judged",
    "snapshot max bytes": "a FetchSnapshot asking for no bytes (max bytes 0 or below) is INVALID_REQUEST "
    "after the snapshot checks (Kafka slices the snapshot with it and fails the request)",
}
"""Where the node answers otherwise than Kafka's handler, on purpose, by name (the reference's
branches named `~<name>` compute the node's answer there)."""


@dataclass(frozen=True, slots=True)
class Responder:
    """A responder's state as a request found it (recorded by the simulator before the step)."""

    node_id: int
    directory_id: uuid.UUID | None
    epoch: int
    leader_id: int | None
    leading: bool
    voter: bool
    """This replica (id and directory id) is a voter of the set in force."""
    voters: frozenset[int]
    dynamic: bool
    """A dynamic quorum (KIP-853: formatted without a static voter set)."""
    log_start: int
    snapshot_size: int | None = None
    """A FetchSnapshot's: the size of the snapshot it asks for (None: the responder has none such)."""
    inside_batch: bool = False
    """A Fetch's: its position continues the responder's log but falls inside a batch."""


@dataclass(frozen=True, slots=True)
class Expected:
    error: m.Errors
    branch: str
    """The reference's branch that decided it (`API:ERROR:why`), counted in `BRANCHES`."""


BRANCHES: tuple[str, ...] = (
    "Vote:INVALID_REQUEST:log position",
    "Vote:FENCED_LEADER_EPOCH:epoch below",
    "Vote:INVALID_REQUEST:candidate id",
    "Vote:INCONSISTENT_VOTER_SET:not voters",
    "Vote:INVALID_VOTER_KEY:directory id",
    "Vote:NONE:epoch equal",
    "Vote:NONE:epoch above",
    "BeginQuorumEpoch:INCONSISTENT_VOTER_SET:~leader is this node",
    "BeginQuorumEpoch:FENCED_LEADER_EPOCH:epoch below",
    "BeginQuorumEpoch:INVALID_REQUEST:leader id",
    "BeginQuorumEpoch:INCONSISTENT_VOTER_SET:not voters",
    "BeginQuorumEpoch:NONE:epoch equal",
    "BeginQuorumEpoch:NONE:epoch above",
    "EndQuorumEpoch:INCONSISTENT_VOTER_SET:~leader is this node",
    "EndQuorumEpoch:FENCED_LEADER_EPOCH:epoch below",
    "EndQuorumEpoch:INVALID_REQUEST:leader id",
    "EndQuorumEpoch:INCONSISTENT_VOTER_SET:not voters",
    "EndQuorumEpoch:NONE:epoch equal",
    "EndQuorumEpoch:NONE:epoch above",
    "Fetch:INVALID_REQUEST:max wait",
    "Fetch:INVALID_REQUEST:fetch offset",
    "Fetch:INVALID_REQUEST:last fetched epoch",
    "Fetch:FENCED_LEADER_EPOCH:epoch below",
    "Fetch:UNKNOWN_LEADER_EPOCH:epoch above",
    "Fetch:NOT_LEADER_OR_FOLLOWER:not leading",
    "Fetch:INVALID_REQUEST:~fetch inside a batch",
    "Fetch:NONE:leader",
    "FetchSnapshot:FENCED_LEADER_EPOCH:epoch below",
    "FetchSnapshot:UNKNOWN_LEADER_EPOCH:epoch above",
    "FetchSnapshot:NOT_LEADER_OR_FOLLOWER:not leading",
    "FetchSnapshot:SNAPSHOT_NOT_FOUND:no such snapshot",
    "FetchSnapshot:SNAPSHOT_NOT_FOUND:bootstrap checkpoint",
    "FetchSnapshot:POSITION_OUT_OF_RANGE:position below 0",
    "FetchSnapshot:POSITION_OUT_OF_RANGE:position at or past the end",
    "FetchSnapshot:INVALID_REQUEST:~snapshot max bytes",
    "FetchSnapshot:NONE:leader",
    "DescribeQuorum:NOT_LEADER_OR_FOLLOWER:not leading",
    "DescribeQuorum:NONE:leader",
)
"""Every branch of the reference (the simulator counts those its traffic reached)."""

REACHED: Counter[str] = Counter()
"""Branches taken so far in this process (`expected` counts them)."""


def _take(api: str, error: m.Errors, why: str) -> Expected:
    branch = f"{api}:{error.name}:{why}"
    REACHED[branch] += 1
    return Expected(error, branch)


def _voter_only(api: str, epoch: int, remote_id: int, r: Responder) -> Expected | None:
    """Kafka's `validateVoterOnlyRequest` (the static quorum's, with its voter check)."""
    if epoch < r.epoch:
        return _take(api, E.FENCED_LEADER_EPOCH, "epoch below")
    if remote_id < 0:
        return _take(api, E.INVALID_REQUEST, "candidate id" if api == "Vote" else "leader id")
    if not r.dynamic and (not r.voter or remote_id not in r.voters):
        return _take(api, E.INCONSISTENT_VOTER_SET, "not voters")
    return None


def _leader_only(api: str, epoch: int, r: Responder) -> Expected | None:
    """Kafka's `validateLeaderOnlyRequest`."""
    if epoch < r.epoch:
        return _take(api, E.FENCED_LEADER_EPOCH, "epoch below")
    if epoch > r.epoch:
        return _take(api, E.UNKNOWN_LEADER_EPOCH, "epoch above")
    if not r.leading:
        return _take(api, E.NOT_LEADER_OR_FOLLOWER, "not leading")
    return None


def _accepted(api: str, epoch: int, r: Responder) -> Expected:
    return _take(api, E.NONE, "epoch above" if epoch > r.epoch else "epoch equal")


def expected(request: Any, r: Responder) -> Expected | None:
    """Kafka's error for `request` at responder `r` (None: a request this reference does not judge)."""
    if isinstance(request, m.VoteRequest):
        return _vote(request, r)
    if isinstance(request, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        api = "BeginQuorumEpoch" if isinstance(request, m.BeginQuorumEpochRequest) else "EndQuorumEpoch"
        if request.leader_id == r.node_id:
            return _take(api, E.INCONSISTENT_VOTER_SET, "~leader is this node")
        return _voter_only(api, request.epoch, request.leader_id, r) or _accepted(api, request.epoch, r)
    if isinstance(request, m.FetchRequest):
        return _fetch(request, r)
    if isinstance(request, m.FetchSnapshotRequest):
        return _fetch_snapshot(request, r)
    if isinstance(request, m.DescribeQuorumRequest):
        if not r.leading:
            return _take("DescribeQuorum", E.NOT_LEADER_OR_FOLLOWER, "not leading")
        return _take("DescribeQuorum", E.NONE, "leader")
    return None


def replica_epoch(req: m.VoteRequest) -> int:
    """Kafka's ReplicaEpoch of a Vote: the candidate's own epoch (`DEVIATIONS["pre-vote epoch"]`)."""
    return req.epoch - 1 if req.pre_vote else req.epoch


def _vote(req: m.VoteRequest, r: Responder) -> Expected:
    epoch = replica_epoch(req)
    if (
        req.end_offset < 0
        or req.last_epoch < 0
        or req.last_epoch > epoch
        or (req.last_epoch == epoch and not req.pre_vote)
    ):
        return _take("Vote", E.INVALID_REQUEST, "log position")
    refused = _voter_only("Vote", epoch, req.candidate_id, r)
    if refused is not None:
        return refused
    if r.dynamic and req.voter_directory_id is not None and req.voter_directory_id != r.directory_id:
        return _take("Vote", E.INVALID_VOTER_KEY, "directory id")
    return _accepted("Vote", epoch, r)


def leader_and_epoch(request: Any, r: Responder, error: m.Errors) -> tuple[int | None, int] | None:
    """The (leader, epoch) Kafka's answer to `request` with `error` carries — the responder's once
    the handler's own transition is made (`maybeTransition`, a Vote's `transitionToUnattached`),
    which only a request past the voter-only checks makes — or None when not judged here."""
    before = (r.leader_id, r.epoch)
    if isinstance(request, m.VoteRequest):
        epoch = replica_epoch(request)
        if error not in (E.NONE, E.INVALID_VOTER_KEY) or epoch <= r.epoch:
            return before
        return None, epoch
    if isinstance(request, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        if error != E.NONE or (request.epoch == r.epoch and r.leader_id is not None):
            return before
        return request.leader_id, request.epoch
    if isinstance(request, m.FetchRequest | m.FetchSnapshotRequest):
        return before
    return None


def _fetch(req: m.FetchRequest, r: Responder) -> Expected:
    if req.max_wait_ms < 0:
        return _take("Fetch", E.INVALID_REQUEST, "max wait")
    if req.fetch_offset < 0:
        return _take("Fetch", E.INVALID_REQUEST, "fetch offset")
    if req.last_fetched_epoch < 0 or req.last_fetched_epoch > req.epoch:
        return _take("Fetch", E.INVALID_REQUEST, "last fetched epoch")
    refused = _leader_only("Fetch", req.epoch, r)
    if refused is not None:
        return refused
    if r.inside_batch:
        return _take("Fetch", E.INVALID_REQUEST, "~fetch inside a batch")
    return _take("Fetch", E.NONE, "leader")


def _fetch_snapshot(req: m.FetchSnapshotRequest, r: Responder) -> Expected:
    api = "FetchSnapshot"
    refused = _leader_only(api, req.epoch, r)
    if refused is not None:
        return refused
    if r.snapshot_size is None:
        return _take(api, E.SNAPSHOT_NOT_FOUND, "no such snapshot")
    if req.snapshot_id == BOOTSTRAP_SNAPSHOT:
        return _take(api, E.SNAPSHOT_NOT_FOUND, "bootstrap checkpoint")
    if req.position < 0:
        return _take(api, E.POSITION_OUT_OF_RANGE, "position below 0")
    if req.position >= r.snapshot_size:
        return _take(api, E.POSITION_OUT_OF_RANGE, "position at or past the end")
    if req.max_bytes <= 0:
        return _take(api, E.INVALID_REQUEST, "~snapshot max bytes")
    return _take(api, E.NONE, "leader")


def error_fields(answer: Any, r: Responder) -> str | None:
    """What an error answer (`answer.error` is not NONE) sets beside its error, leader and epoch that
    Kafka's empty answer leaves at its default (None: nothing)."""
    if isinstance(answer, m.VoteResponse) and answer.granted:
        return "it grants the vote"
    if isinstance(answer, m.FetchResponse):
        if answer.batches or answer.diverging_epoch is not None or answer.snapshot_id is not None:
            return "it carries records, a diverging epoch or a snapshot id"
        if answer.high_watermark != -1:
            return f"high-water mark {answer.high_watermark}, where Kafka's empty answer has -1"
        if answer.log_start_offset != r.log_start:
            return f"log start offset {answer.log_start_offset}, the responder's is {r.log_start}"
    snapshot = isinstance(answer, m.FetchSnapshotResponse)
    if snapshot and (answer.snapshot_id is not None or answer.size or answer.position or answer.data):
        return (
            f"snapshot {answer.snapshot_id}, size {answer.size}, position {answer.position}, "
            f"{len(answer.data)} bytes, where Kafka's empty answer names none"
        )
    return None


def responder(node: CheckedNode, request: Any) -> Responder | None:
    """`node`'s state as `request` finds it (None: no core runs)."""
    core = node.core
    if core is None:
        return None
    size = None
    if isinstance(request, m.FetchSnapshotRequest) and request.snapshot_id in node.snapshots.ids():
        size = node.snapshots.size(request.snapshot_id)
    inside = isinstance(request, m.FetchRequest) and _inside_batch(
        node, request.fetch_offset, request.last_fetched_epoch
    )
    return Responder(
        core.node_id,
        core.directory_id,
        core.epoch,
        core.leader_id,
        core.is_leader,
        core.is_voter,
        frozenset(core.voters),
        core._dynamic,
        node.log.start_offset(),
        size,
        inside,
    )


def _inside_batch(node: CheckedNode, offset: int, last_epoch: int) -> bool:
    """Whether a Fetch at (`offset`, `last_epoch`) continues `node`'s log (its last epoch ends at or
    after the offset, within the retained log) at an offset inside a batch."""
    log = node.log
    if not log.start_offset() < offset < log.end_offset():
        return False
    end = log.end_offset_for_epoch(last_epoch)
    if end.epoch != last_epoch or end.offset < offset:
        return False
    try:
        log.read(offset, 1)
    except ValueError:
        return True
    return False


# ---------------------------------------------------------------------------- before the handler

WHOLE, PER_PARTITION = "whole request", "per partition"
"""Where a refusal before the handler puts its error: the response's top-level error code (nothing
else set), or each partition's error code (top-level NONE; a DescribeQuorum naming no partition
gets none back: (PER_PARTITION, NONE))."""

_METADATA = ("__cluster_metadata", uuid.UUID(int=1))
"""The metadata partition's topic, by name or (Fetch v13+) by Kafka's topic id; partition 0."""


def _topic_key(topic: Any) -> Any:
    for attr in ("topic_name", "topic", "name", "topic_id"):
        if hasattr(topic, attr):
            return getattr(topic, attr)
    return None


def _partition_key(partition: Any) -> Any:
    for attr in ("partition_index", "partition", "index"):
        if hasattr(partition, attr):
            return getattr(partition, attr)
    return None


def before_handler(request: Any, cluster_id: str, authorized: bool) -> tuple[str, m.Errors] | None:
    """Kafka's refusal of `request` (a kio Raft request entity) before its handler reads the
    partition's fields — the controller's authorization (ControllerApis, `getErrorResponse`), then
    `hasValidClusterId` (a request naming no cluster id passes), then `hasValidTopicPartition` — as
    (where, error); None when the request reaches the handler (`expected` judges it there)."""
    api = type(request).__name__.removesuffix("Request")
    if not authorized:
        return WHOLE, E.CLUSTER_AUTHORIZATION_FAILED
    if getattr(request, "cluster_id", None) not in (None, cluster_id):
        return WHOLE, E.INCONSISTENT_CLUSTER_ID
    topics = list(request.topics)
    partitions = [(_topic_key(t), _partition_key(p)) for t in topics for p in t.partitions]
    if len(topics) == 1 and len(partitions) == 1 and partitions[0][0] in _METADATA and partitions[0][1] == 0:
        return None
    if api == "DescribeQuorum":
        return PER_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION if partitions else E.NONE
    if api == "FetchSnapshot" and len(topics) == 1 and len(partitions) == 1:
        return PER_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION
    return WHOLE, E.INVALID_REQUEST


def refused_as(response: Any) -> tuple[str, m.Errors]:
    """Where and what a response entity refuses: (WHOLE, its top-level error), else (PER_PARTITION,
    the one error every partition carries, NONE for none); ValueError when its partitions disagree."""
    top = E(int(response.error_code))
    if top != E.NONE:
        return WHOLE, top
    parts = [p for t in getattr(response, "topics", getattr(response, "responses", ())) for p in t.partitions]
    codes = {E(int(p.error_code)) for p in parts}
    if len(codes) > 1:
        raise ValueError(f"partitions refused with different errors: {sorted(codes)}")
    return PER_PARTITION, codes.pop() if codes else E.NONE
