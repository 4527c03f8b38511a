"""When a leader answers an AddRaftVoter it took (node.sim.voter_change_timing): the real core
answers a voter that never caught up exactly when the request's TimeoutMs ends, and cores that give
up early, late or never are caught."""

from __future__ import annotations

import pytest

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation


def runs(core_class: type[RaftCore], seeds: range) -> tuple[InvariantViolation | None, int]:
    """The first violation over `seeds` (dynamic quorums with the voter change client), and how many
    adds were answered REQUEST_TIMED_OUT in the runs before it."""
    timed_out = 0
    for seed in seeds:
        sim = SimParams(seed=seed, voters=5, faults=("partition", "crash"))
        simulation = MembershipSimulation(MembershipParams(sim, initial=1 + seed % 3), core_class=core_class)
        try:
            simulation.run()
        except InvariantViolation as exc:
            return exc, timed_out
        timed_out += simulation.change_timing.timed_out
    return None, timed_out


def test_the_real_core_times_an_add_out_when_its_timeout_ends() -> None:
    found, timed_out = runs(RaftCore, range(3))
    assert found is None
    assert timed_out > 0  # the runs reach the timeout the rule judges


class GivesUpEarly(RaftCore):
    """Waits for an added voter half the request's timeout."""

    def _on_add_voter_request(self, env: m.Envelope, req: m.AddRaftVoterRequest, now: int) -> None:
        super()._on_add_voter_request(env, m.AddRaftVoterRequest(req.voter, req.timeout_ms // 2), now)


class GivesUpLate(RaftCore):
    """Gives up on an added voter only at its next step after the timeout, not when it ends."""

    def _next_deadline(self, now: int) -> int | None:
        state = self.state
        if isinstance(state, Leader) and state.voter_change is not None and state.voter_change.offset < 0:
            change, state.voter_change = state.voter_change, None
            try:
                return super()._next_deadline(now)
            finally:
                state.voter_change = change
        return super()._next_deadline(now)


class NeverGivesUp(RaftCore):
    """Waits for an added voter for as long as it leads."""

    def _on_add_voter_request(self, env: m.Envelope, req: m.AddRaftVoterRequest, now: int) -> None:
        super()._on_add_voter_request(env, m.AddRaftVoterRequest(req.voter, 10**9), now)


@pytest.mark.parametrize("core_class", [GivesUpEarly, GivesUpLate, NeverGivesUp])
def test_an_add_timed_out_at_the_wrong_moment_is_caught(core_class: type[RaftCore]) -> None:
    found, _ = runs(core_class, range(6))
    assert found is not None and found.name == "AddVoterTimeout", found
