"""The voter change client of the dynamic-quorum simulator (node.sim.voter_requests): requests drawn
from KIP-853's whole space reach every answer Kafka documents, the clean core answers each as Kafka
does over many seeds, and a core that answers otherwise is caught."""

from __future__ import annotations

import uuid

import pytest

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.voters import Endpoint
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation, run

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


@pytest.mark.parametrize("core_class", [TakesAZeroDirectory, StateBeforeValidity, IgnoresTheUpdatesEpoch])
def test_a_core_answering_otherwise_than_kafka_is_caught(core_class: type[RaftCore]) -> None:
    caught = set()
    for seed in range(10):
        params = MembershipParams(SimParams(seed=seed, voters=5, faults=("crash", "partition")), initial=2)
        try:
            MembershipSimulation(params, core_class=core_class).run()
        except InvariantViolation as e:
            caught.add(e.name)
            break
    assert caught == {"VoterChangeAnswered"}
