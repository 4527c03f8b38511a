"""A voter change client for the simulator: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter
drawn from the whole space KIP-853 allows, each answer judged against Kafka's documented error for
the state the node was in when it took the request.

The requests go to the leader or to any live node (NOT_LEADER_OR_FOLLOWER), naming a voter of the
set in force, a node outside it or an id no node has; with the directory id the voter set names, a
random one, Kafka's zero UUID, all ones, or none; with the voter's endpoint, another one or none;
an UpdateRaftVoter in the node's epoch, an older or a later one, with kraft.version ranges valid,
empty, negative or not holding the finalized version; an AddRaftVoter with a timeout of 0, short
or long. A valid removal is made invalid (a wrong directory id): the voter set is the
administrator's to shrink (node.sim.membership).

An AddRaftVoter naming a node with a directory id it does not run on is taken, but Kafka's leader
tracks replicas by (id, directory id) from the Fetch's ReplicaDirectoryId (KIP-853): it never sees
that replica fetch, so the request ends REQUEST_TIMED_OUT (or NOT_LEADER_OR_FOLLOWER), never NONE.

`kafkas_answer` is Kafka's order of checks (KafkaRaftClient then AddVoterHandler /
RemoveVoterHandler / UpdateVoterHandler): the leader check (an UpdateRaftVoter's epoch first:
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), the request's validity (INVALID_REQUEST), the leader's
state (REQUEST_TIMED_OUT while a change is pending, before it committed in its epoch or while the
last VotersRecord has not; UNSUPPORTED_VERSION at kraft.version 0), then the voter (DUPLICATE_VOTER,
VOTER_NOT_FOUND; the last voter is not removed, INVALID_REQUEST; an update to what the set holds
already is answered at once). A request it takes is answered once, later or at once: NONE, an
AddRaftVoter's REQUEST_TIMED_OUT (its voter did not catch up in time), or NOT_LEADER_OR_FOLLOWER
(the leader lost office first).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0
from kraftlab.node.raft.states import Leader
from kraftlab.node.raft.voters import Endpoint, Voter
from kraftlab.node.sim.answer_fields import as_read_from_the_wire, voter_change_leader

CLIENT_ID = -1001
"""The client's id in envelopes (no node's, nor the administrator's)."""
UNKNOWN_ID = 77
"""A node id no simulated node has."""
ZERO = uuid.UUID(int=0)
ONES = uuid.UUID(int=(1 << 128) - 1)

ChangeRequest = m.AddRaftVoterRequest | m.RemoveRaftVoterRequest | m.UpdateRaftVoterRequest


def endpoint(node_id: int) -> Endpoint:
    return Endpoint("CONTROLLER", f"n{node_id}", 9093)


def draw(
    rng: random.Random, core: RaftCore, node_ids: list[int], directories: Mapping[int, uuid.UUID]
) -> ChangeRequest:
    """One request for the node running `core`; `directories` are the disks the nodes run on."""
    voters = core.voter_set
    outside = [i for i in node_ids if i not in voters]
    pool = [*voters.ids, *outside, UNKNOWN_ID] if voters.ids else [*node_ids, UNKNOWN_ID]
    voter_id = rng.choice(pool)
    named = voters.voter(voter_id)
    right = named.directory_id if named is not None and named.directory_id else directories.get(voter_id)
    directory = rng.choice([right, right, right, None, ZERO, ONES, uuid.UUID(int=rng.getrandbits(128))])
    elsewhere = (Endpoint("CONTROLLER", "elsewhere", 19093),)
    endpoints = rng.choice([(endpoint(voter_id),), (endpoint(voter_id),), (), elsewhere])
    kind = rng.randrange(3)
    if kind == 0:
        timeout = rng.choice([0, 50, 3_000])
        return m.AddRaftVoterRequest(Voter(voter_id, directory, endpoints), timeout)
    if kind == 1:
        if voters.holds(voter_id, directory) and directory is not None and directory.int != 0:
            directory = ONES if directory != ONES else ZERO  # the administrator's to remove
        return m.RemoveRaftVoterRequest(voter_id, directory)
    epoch = core.epoch + rng.choice([0, 0, 0, -1, 1])
    versions = rng.choice([(0, 1), (0, 1), (1, 1), (0, 0), (-1, 1), (1, 0), (2, 3)])
    return m.UpdateRaftVoterRequest(epoch, voter_id, directory, endpoints, versions)


def kafkas_answer(core: RaftCore, request: ChangeRequest) -> tuple[m.Errors | None, str]:
    """The answer Kafka gives `request` at once in this state of `core` (None: it takes the change;
    m.Errors.NONE for an update that changes nothing), and why."""
    if isinstance(request, m.UpdateRaftVoterRequest) and request.epoch < core.epoch:
        return m.Errors.FENCED_LEADER_EPOCH, "an update from an older epoch"
    if isinstance(request, m.UpdateRaftVoterRequest) and request.epoch > core.epoch:
        return m.Errors.UNKNOWN_LEADER_EPOCH, "an update from a later epoch"
    state = core.state
    if not isinstance(state, Leader):
        return m.Errors.NOT_LEADER_OR_FOLLOWER, "sent to a node that is not the leader"
    voter_id, directory = _voter_key(request)
    if directory is None or directory.int == 0:
        return m.Errors.INVALID_REQUEST, "no directory id (none, or the zero UUID)"
    if isinstance(request, m.AddRaftVoterRequest | m.UpdateRaftVoterRequest) and not _endpoints(request):
        return m.Errors.INVALID_REQUEST, "a voter without an endpoint"
    if isinstance(request, m.UpdateRaftVoterRequest):
        low, high = request.kraft_versions
        if low < 0 or high < low:
            return m.Errors.INVALID_REQUEST, f"kraft.version range [{low}, {high}]"
    if state.voter_change is not None:
        return m.Errors.REQUEST_TIMED_OUT, "another change is in progress"
    if core.high_watermark <= state.epoch_start_offset:
        return m.Errors.REQUEST_TIMED_OUT, "the leader has not committed in its epoch yet"
    if core.control.kraft_version == KRAFT_VERSION_0:
        return m.Errors.UNSUPPORTED_VERSION, "a static quorum (kraft.version 0)"
    if core.control.last_change_offset() >= core.high_watermark:
        return m.Errors.REQUEST_TIMED_OUT, "the last voter change has not committed"
    voters = core.voter_set
    if isinstance(request, m.AddRaftVoterRequest):
        if voter_id in voters:
            return m.Errors.DUPLICATE_VOTER, f"{voter_id} is a voter already"
        return None, "an add"
    if isinstance(request, m.UpdateRaftVoterRequest):
        low, high = request.kraft_versions
        if not low <= core.control.kraft_version <= high:
            return m.Errors.INVALID_REQUEST, f"kraft.version {core.control.kraft_version} not in [{low}, {high}]"
    if not voters.holds(voter_id, directory):
        return m.Errors.VOTER_NOT_FOUND, f"({voter_id}, {directory}) is no voter"
    if isinstance(request, m.RemoveRaftVoterRequest):
        if len(voters) == 1:
            return m.Errors.INVALID_REQUEST, "the last voter"
        return None, "a removal"
    old = voters.voter(voter_id)
    if old == Voter(voter_id, directory, request.endpoints, request.kraft_versions):
        return m.Errors.NONE, "an update to what the set holds"
    return None, "an update"


def _voter_key(request: ChangeRequest) -> tuple[int, uuid.UUID | None]:
    if isinstance(request, m.AddRaftVoterRequest):
        return request.voter.node_id, request.voter.directory_id
    return request.voter_id, request.directory_id


def _endpoints(request: m.AddRaftVoterRequest | m.UpdateRaftVoterRequest) -> tuple[Endpoint, ...]:
    return request.voter.endpoints if isinstance(request, m.AddRaftVoterRequest) else request.endpoints


def taken_outcomes(request: ChangeRequest, directories: Mapping[int, uuid.UUID]) -> tuple[m.Errors, ...]:
    """How a request the leader took may end (`directories`: the disks the nodes run on when it is
    sent): committed, an add whose voter did not catch up in time, or the leader lost office first.
    An add naming a directory its node does not run on never commits: no replica with that key
    fetches (a new disk gets a new directory id, so the key never comes to exist)."""
    if isinstance(request, m.AddRaftVoterRequest):
        voter = request.voter
        if directories.get(voter.node_id) != voter.directory_id:
            return (m.Errors.REQUEST_TIMED_OUT, m.Errors.NOT_LEADER_OR_FOLLOWER)
    return _TAKEN_OUTCOMES[type(request)]


@dataclass(slots=True)
class Asked:
    request: ChangeRequest
    expected: m.Errors | None
    why: str
    node: int
    answers: list[m.Errors] = field(default_factory=list)
    taken: tuple[m.Errors, ...] = ()
    """How it may end if the leader takes it (`taken_outcomes`)."""
    found: tuple[int | None, int] | None = None
    """The node's (leader, epoch) when it took the request (`answer_fields.voter_change_leader`)."""


class VoterRequestJudge:
    """Every request the client sent, by reference, and the judgement of each answer."""

    def __init__(self, fail: Callable[[str, str], None]) -> None:
        self.fail = fail
        self.asked: dict[int, Asked] = {}
        self.outcomes: dict[str, int] = {}
        """`kind:ERROR` → how many answers (the immediate refusals and the later outcomes)."""

    def sent(self, ref: int, asked: Asked) -> None:
        self.asked[ref] = asked

    def answered(self, env: m.Envelope) -> None:
        asked = self.asked.get(env.ref) if isinstance(env.ref, int) else None
        if asked is None:
            self.fail("VoterChangeAnswered", f"node {env.src} answered a request never sent: {env!r}")
            return
        message = env.message
        if isinstance(message, m.VoterChangeResponse):  # as Kafka's admin client reads it
            message = as_read_from_the_wire(asked.request, message)
        error = message.error if isinstance(message, m.VoterChangeResponse) else None
        kind = type(asked.request).__name__
        key = f"{kind}:{type(message).__name__ if error is None else error.name}"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        asked.answers.append(m.Errors.UNKNOWN_SERVER_ERROR if error is None else error)
        what = f"{kind} {asked.request!r} to node {asked.node} ({asked.why})"
        if isinstance(message, m.VoterChangeResponse) and asked.found is not None:
            wrong = voter_change_leader(asked.request, message, asked.found)
            if wrong is not None:
                self.fail("VoterChangeLeader", f"{what}, answered {_name(error)}: {wrong}")
        if len(asked.answers) > 1:
            self.fail("VoterChangeAnswered", f"{what} was answered twice: {[e.name for e in asked.answers]}")
        elif asked.expected is not None and error != asked.expected:
            self.fail("VoterChangeAnswered", f"{what} answered {_name(error)}, Kafka answers {asked.expected.name}")
        elif asked.expected is None and error not in (asked.taken or _TAKEN_OUTCOMES[type(asked.request)]):
            self.fail("VoterChangeAnswered", f"{what} was taken, then answered {_name(error)} (Kafka: one of "
                      f"{[e.name for e in asked.taken or _TAKEN_OUTCOMES[type(asked.request)]]})")


_TAKEN_OUTCOMES: dict[type, tuple[m.Errors, ...]] = {
    m.AddRaftVoterRequest: (m.Errors.NONE, m.Errors.REQUEST_TIMED_OUT, m.Errors.NOT_LEADER_OR_FOLLOWER),
    m.RemoveRaftVoterRequest: (m.Errors.NONE, m.Errors.NOT_LEADER_OR_FOLLOWER),
    m.UpdateRaftVoterRequest: (m.Errors.NONE, m.Errors.NOT_LEADER_OR_FOLLOWER),
}
"""What a change the leader took may be answered: committed, an add whose voter did not catch up in
time, or the leader lost office before it committed."""


def _name(error: m.Errors | None) -> str:
    return "no VoterChangeResponse" if error is None else error.name
