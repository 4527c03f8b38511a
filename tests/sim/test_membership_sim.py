"""Simulated dynamic quorums (KIP-853): voters added, removed (the leader among them) and disks
replaced while crashes, partitions, message loss and lost unflushed writes happen; every step
checked for one leader per epoch, committed entries in every later leader's log, one voter
change at a time, intersecting majorities of successive sets, no vote from a replaced disk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation, run

FAULTS = ("crash", "partition", "drop", "delay", "duplicate", "oneway")


@pytest.mark.parametrize(
    ("seed", "initial", "faults", "flush_delay_ms"),
    [
        (1, 1, (), 0),
        (2, 3, ("crash", "partition"), 0),
        (3, 2, ("crash", "drop"), 20),
        (4, 1, ("partition", "oneway", "duplicate"), 0),
        (5, 3, ("crash", "delay", "partition"), 30),
    ],
)
def test_membership_changes_under_faults_keep_raft_safe(
    seed: int, initial: int, faults: tuple[str, ...], flush_delay_ms: int
) -> None:
    sim = SimParams(seed=seed, voters=5, faults=faults, flush_delay_ms=flush_delay_ms, journal=True)
    report = run(MembershipParams(sim, initial=initial))
    # The run changed membership many times, and the quorum still commits after the faults.
    assert report.changes_committed >= 5, report.answers
    assert report.answers.get("add:NONE", 0) > 0 and report.answers.get("remove:NONE", 0) > 0
    assert report.sim.commit_after_heal_ms is not None
    assert 1 <= len(report.final_voters) <= 5


def test_membership_changes_through_kafkas_wire_format() -> None:
    """Every Raft message through kio's encoding (Vote v2 carrying the voter directory id asked,
    VotersRecord control batches in Fetch responses, snapshots with membership records)."""
    report = run(MembershipParams(SimParams(seed=7, voters=5, faults=("partition", "crash"), wire=True), initial=2))
    assert report.changes_committed >= 3 and report.sim.commit_after_heal_ms is not None


def test_the_leader_is_removed_and_disks_are_replaced_across_runs() -> None:
    reports = [run(MembershipParams(SimParams(seed=s, voters=5, faults=("crash",)), initial=3)) for s in range(6)]
    assert sum(r.leader_removals for r in reports) > 0
    assert sum(r.disks_replaced for r in reports) > 0


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32),
    initial=st.integers(1, 3),
    faults=st.sets(st.sampled_from(FAULTS)),
    flush_delay_ms=st.sampled_from([0, 25]),
    wire=st.booleans(),  # every Raft message read by Kafka's schema (node.sim.raft_reading) in half the runs
)
def test_property_safety_across_voter_sets(seed: int, initial: int, faults: set[str], flush_delay_ms: int,
                                           wire: bool) -> None:
    sim = SimParams(seed=seed, voters=5, faults=tuple(sorted(faults)), flush_delay_ms=flush_delay_ms, journal=True,
                    wire=wire)
    params = MembershipParams(sim, initial=initial)
    try:
        run(params)
    except (InvariantViolation, AssertionError) as e:
        e.add_note(f"replay: {params.replay_command()}")
        raise


def test_replay_reproduces_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlab.node.sim.membership_replay import main, parse

    params = MembershipParams(SimParams(seed=3, voters=5, faults=("crash", "drop"), flush_delay_ms=20, journal=True),
                              initial=2)
    argv = params.replay_command().split()[3:]
    assert parse(argv) == params
    assert main(argv) == 0
    expected = run(params)
    assert f"{expected.changes_committed} voter changes committed" in capsys.readouterr().out


class TwoChangesAtOnce(RaftCore):
    """A leader that starts a voter change while the previous one has not committed."""

    def _change_refusal(self) -> tuple[m.Errors, str] | None:
        refusal = super()._change_refusal()
        if (
            refusal is not None
            and refusal[0] == m.Errors.REQUEST_TIMED_OUT
            and "committed in its epoch" not in refusal[1]
        ):
            state = self.state
            state.voter_change = None  # type: ignore[union-attr]  # the leader's, refused only as leader
            return None
        return refusal


def test_the_simulator_catches_a_leader_making_two_changes_at_once() -> None:
    caught = set()
    for seed in range(10):
        params = MembershipParams(SimParams(seed=seed, voters=5, faults=("partition",)), initial=3, change_every_ms=150)
        try:
            MembershipSimulation(params, core_class=TwoChangesAtOnce).run()
        except InvariantViolation as e:
            caught.add(e.name)
    assert "OneChangeAtATime" in caught


class ForgetsItsDirectory(RaftCore):
    """A replica that takes itself for the voter its id names, whatever disk it runs on."""

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_set


class KeepsLeadingAfterRemoval(RaftCore):
    """A leader that removes itself and, once that commits, neither answers nor resigns."""

    def _poll_voter_change(self, state: Leader, now: int) -> None:
        change = state.voter_change
        own_removal = change is not None and change.kind == "remove" and change.subject == self.node_id
        if own_removal and change is not None and 0 <= change.offset < self._hw:
            state.voter_change = None
            return
        super()._poll_voter_change(state, now)


class CountsAReplacedDiskAsTheVoter(RaftCore):
    """A leader that takes every Fetch of a voter's id for the voter's, whatever directory it names
    (KIP-853's replica key unread): a replaced disk's fetches move the voter's progress."""

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        state = self.state
        named = state.voter_set.voter(req.replica_id) if isinstance(state, Leader) else None
        if named is not None:
            req.replica_directory_id = named.directory_id
        super()._on_fetch_request(env, req, now)


@pytest.mark.parametrize(
    ("core_class", "caught_by", "faults", "change_every_ms", "replace"),
    [
        # A replaced disk stays in the set until the next change: slow changes, partitions to end its fetches.
        (ForgetsItsDirectory, "ReplacedDiskNeverVotes", ("partition",), 1_500, 0.7),
        (KeepsLeadingAfterRemoval, "RemovedLeaderResigns", ("crash",), 300, 0.15),
        # Only a replica key's fetches count toward the HW: a new disk's count nothing for the old voter.
        (CountsAReplacedDiskAsTheVoter, "MajorityReachedHighWatermark", ("crash", "partition"), 700, 0.5),
    ],
)
def test_the_simulator_catches_planted_membership_bugs(
    core_class: type[RaftCore], caught_by: str, faults: tuple[str, ...], change_every_ms: int, replace: float
) -> None:
    caught = set()
    for seed in range(20):
        sim = SimParams(seed=seed, voters=5, faults=faults)
        params = MembershipParams(sim, initial=3, change_every_ms=change_every_ms, replace_chance=replace)
        try:
            MembershipSimulation(params, core_class=core_class).run()
        except InvariantViolation as e:
            caught.add(e.name)
        if caught_by in caught:
            break
    assert caught_by in caught, caught
