"""The voter change client of the dynamic-quorum simulator (node.sim.voter_requests): requests drawn
from KIP-853's whole space reach every answer Kafka documents, the clean core answers each as Kafka
does over many seeds, and a core that answers otherwise is caught."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import Leader
from kraftlab.node.raft.voters import Endpoint, Voter
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation, run
from kraftlab.node.sim.voter_requests import CLIENT_ID, Asked, VoterRequestJudge, endpoint, taken_outcomes

KAFKAS_ANSWERS = {"NONE", "INVALID_REQUEST", "VOTER_NOT_FOUND", "DUPLICATE_VOTER", "REQUEST_TIMED_OUT",
                  "NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"}


def test_requests_from_the_whole_space_get_kafkas_answers() -> None:
    seen: dict[str, int] = {}
    for seed in range(4):
        report = run(MembershipParams(SimParams(seed=seed, voters=5, faults=("crash", "partition")), initial=2))
        for key, n in report.requests.items():
            seen[key] = seen.get(key, 0) + n
    errors = {k.split(":")[1] for k in seen}
    assert errors >= KAFKAS_ANSWERS, seen
    for kind in ("AddRaftVoterRequest", "RemoveRaftVoterRequest", "UpdateRaftVoterRequest"):
        assert {"INVALID_REQUEST", "NOT_LEADER_OR_FOLLOWER"} <= {k.split(":")[1] for k in seen if k.startswith(kind)}


class TakesAZeroDirectory(RaftCore):
    """A leader that reads Kafka's zero UUID as a directory id (Kafka reads it as none)."""

    def _refusal(self, directory_id: uuid.UUID | None, *args: object, **kwargs: object) -> tuple[m.Errors, str] | None:
        if directory_id is not None and directory_id.int == 0:
            directory_id = uuid.UUID(int=(1 << 128) - 1)
        return super()._refusal(directory_id, *args, **kwargs)  # type: ignore[arg-type]


class StateBeforeValidity(RaftCore):
    """A leader that looks at its own state before it looks at whether the request is valid."""

    def _refusal(
        self,
        directory_id: uuid.UUID | None,
        endpoints: tuple[Endpoint, ...] | None = None,
        kraft_versions: tuple[int, int] | None = None,
        request_epoch: int | None = None,
    ) -> tuple[m.Errors, str] | None:
        if self.is_leader and (request_epoch is None or request_epoch == self.epoch):
            busy = self._change_refusal()
            if busy is not None:
                return busy
        return super()._refusal(directory_id, endpoints, kraft_versions, request_epoch)


class IgnoresTheUpdatesEpoch(RaftCore):
    """A leader that takes an UpdateRaftVoter whatever epoch it was sent in."""

    def _on_update_voter_request(self, env: m.Envelope, req: m.UpdateRaftVoterRequest, now: int) -> None:
        req.epoch = self.epoch
        super()._on_update_voter_request(env, req, now)


class TracksReplicasByIdOnly(RaftCore):
    """A leader that reads every Fetch of a node id as from the directory its voter set (or the add
    it is carrying out) names for that id: replicas tracked by id alone, the ReplicaDirectoryId unread."""

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        state = self.state
        if isinstance(state, Leader):
            change = state.voter_change
            named = state.voter_set.voter(req.replica_id) or (
                change.voters.voter(req.replica_id) if change is not None else None
            )
            if named is not None:
                req.replica_directory_id = named.directory_id
        super()._on_fetch_request(env, req, now)


class NamesNoLeaderInRefusals(RaftCore):
    """A node refusing a voter change without naming its leader and epoch (Kafka's CurrentLeader)."""

    def _refuse_change(self, env: m.Envelope, error: m.Errors, message: str) -> None:
        self._reply(env, m.VoterChangeResponse(error, message))


class ListsNodesWithoutListeners(RaftCore):
    """A leader whose DescribeQuorum v2 lists its voters' nodes without their listeners."""

    def describe_quorum(self, now: int) -> m.DescribeQuorumResponse:
        view = super().describe_quorum(now)
        return dataclasses.replace(view, nodes=tuple((node_id, ()) for node_id, _ in view.nodes))


class DescribesVotersWithoutDirectories(RaftCore):
    """A leader whose DescribeQuorum names its voters by id alone (v2 carries their directory ids)."""

    def describe_quorum(self, now: int) -> m.DescribeQuorumResponse:
        view = super().describe_quorum(now)
        return dataclasses.replace(view, voters=tuple(dataclasses.replace(r, directory_id=None) for r in view.voters))


@pytest.mark.parametrize(
    ("core_class", "rules"),
    [
        (NamesNoLeaderInRefusals, {"VoterChangeLeader"}),
        (ListsNodesWithoutListeners, {"DescribeQuorumNodes"}),
        (DescribesVotersWithoutDirectories, {"DescribeQuorumNodes"}),
        (TakesAZeroDirectory, {"VoterChangeAnswered"}),
        (StateBeforeValidity, {"VoterChangeAnswered"}),
        (IgnoresTheUpdatesEpoch, {"VoterChangeAnswered"}),
        (TracksReplicasByIdOnly, {"VoterChangeAnswered", "AddedVoterIsAReplica"}),
    ],
)
def test_a_core_answering_otherwise_than_kafka_is_caught(core_class: type[RaftCore], rules: set[str]) -> None:
    caught = set()
    for seed in range(10):
        params = MembershipParams(SimParams(seed=seed, voters=5, faults=("crash", "partition")), initial=2)
        try:
            MembershipSimulation(params, core_class=core_class).run()
        except InvariantViolation as e:
            caught.add(e.name)
            break
    assert caught and caught <= rules


def test_an_add_naming_a_directory_no_disk_runs_on_is_never_answered_none() -> None:
    """The judge's side of Kafka's replica keys: such an add may time out or lose its leader; a NONE
    is a violation, and the same answer to an add of the disk the node runs on is not."""
    directories = {2: uuid.UUID(int=5 << 64)}
    failures: list[str] = []
    judge = VoterRequestJudge(lambda name, detail: failures.append(name))
    for ref, directory in ((1, uuid.UUID(int=6 << 64)), (2, directories[2])):
        add = m.AddRaftVoterRequest(Voter(2, directory, (endpoint(2),)), 3_000)
        judge.sent(ref, Asked(add, None, "an add", 1, taken=taken_outcomes(add, directories)))
        judge.answered(m.Envelope(1, CLIENT_ID, m.VoterChangeResponse(m.Errors.NONE), ref))
    assert failures == ["VoterChangeAnswered"]
    assert taken_outcomes(m.AddRaftVoterRequest(Voter(2, None, ()), 0), directories) == (
        m.Errors.REQUEST_TIMED_OUT,
        m.Errors.NOT_LEADER_OR_FOLLOWER,
    )
