"""QuorumState and the per-state classes: transitions persisted once, the vote tally, the leader's
progress, quorum end offset and check-quorum deadline."""

from __future__ import annotations

from kraftlab.node.raft.output import LeaderChange, Output
from kraftlab.node.raft.quorum_state import QuorumState
from kraftlab.node.raft.states import Candidate, Follower, Leader, Prospective, Resigned, Unattached
from kraftlab.node.raft.voters import VoterHistory, VoterSet
from kraftlab.node.sim.memory import MemoryQuorumStateStore

VOTERS = VoterSet.of_ids([1, 2, 3])


def test_a_transition_writes_quorum_state_only_when_epoch_leader_or_vote_change() -> None:
    store = MemoryQuorumStateStore()
    qs = QuorumState(1, store, VoterHistory(VOTERS))
    assert qs.read() is None
    out = Output()
    qs.transition_to(Unattached(3, None, 0), out, journal=True)
    qs.transition_to(Unattached(3, None, 50), out, journal=True)  # only a timer changed
    assert store.writes == 1
    qs.transition_to(Candidate(4, 1, 100), out, journal=True)
    stored = store.read()
    assert stored is not None and (stored.leader_epoch, stored.voted_id, stored.voters) == (4, 1, (1, 2, 3))
    assert [e["role"] for e in out.events] == ["unattached", "unattached", "candidate"]
    assert [u for u in out.updates if isinstance(u, LeaderChange)] == [
        LeaderChange(None, 3, False),
        LeaderChange(None, 4, False),
    ]
    qs.transition_to(Leader.elected(4, 1, 0, VOTERS, 0), out, journal=False)
    assert out.updates[-1] == LeaderChange(1, 4, True) and len(out.events) == 3


def test_a_restarted_node_does_not_rewrite_what_it_read() -> None:
    store = MemoryQuorumStateStore()
    QuorumState(2, store, VoterHistory(VOTERS)).transition_to(Follower(5, 1, 1, 0), Output(), journal=False)
    qs = QuorumState(2, store, VoterHistory(VOTERS))
    assert qs.read() is not None
    qs.transition_to(Follower(5, 1, 1, 10), Output(), journal=False)
    assert store.writes == 1


def test_an_observer_journals_its_role_as_observer() -> None:
    out = Output()
    QuorumState(9, MemoryQuorumStateStore(), VoterHistory(VOTERS)).transition_to(Follower(1, 1, None, 0), out, True)
    assert out.events[0]["role"] == "observer"


def test_the_vote_tally_is_won_and_lost_by_majorities_of_voters() -> None:
    p = Prospective(0, None, None, 0, 10, {1})
    p.record_vote(7, True)  # not a voter
    assert not p.won(VOTERS)
    p.record_vote(2, True)
    assert p.won(VOTERS)
    c = Candidate(1, 1, 10, {1})
    c.record_vote(2, False)
    assert not c.lost(VOTERS)
    c.record_vote(3, False)
    assert c.lost(VOTERS) and c.voted_id == 1 and c.leader_id is None


def test_the_leader_owns_replica_progress_and_its_quorum_figures() -> None:
    leader = Leader.elected(2, 1, 10, VOTERS, now=100)
    assert leader.leader_id == 1 and leader.unacknowledged == {2, 3} and not leader.alone
    assert not leader.majority_acknowledged()
    p2 = leader.progress_of(2)
    assert p2 is not None and leader.unacknowledged == {3} and leader.majority_acknowledged()
    assert leader.progress_of(-1) is None
    assert leader.progress_of(9) is leader.observers[(9, None)]
    p2.end_offset = 12
    assert leader.quorum_end_offset(15) == 12  # the leader's 15, voter 2's 12, voter 3's 0
    p2.last_fetch_ms = 400
    assert leader.check_quorum_deadline(now=500, timeout=3000) == 3400
    assert Leader.elected(1, 1, 0, VoterSet.of_ids([1]), 0).alone


def test_each_state_says_when_it_needs_a_tick() -> None:
    assert Unattached(0, None, 40).next_timer(0) == 40
    assert Prospective(0, None, None, 30, 90).next_timer(10) == 30
    assert Prospective(0, None, None, 30, 90).next_timer(30) == 90
    f = Follower(1, 2, None, 2000, retry_at=50)
    assert f.next_timer(10, fetch_outstanding=False) == 50 and f.next_timer(10, fetch_outstanding=True) == 2000
    assert Resigned(1, 1, 77, ()).next_timer(0) == 77 and Resigned(1, 1, 77, ()).leader_id == 1
    leader = Leader.elected(2, 1, 0, VOTERS, now=0)
    leader.check_quorum_at = 3000
    leader.pending.append(None)  # type: ignore[arg-type]  # only its presence matters here
    leader.pending_since = 5
    assert leader.next_timer(10, linger_ms=25) == 30
    assert Leader.elected(1, 1, 0, VoterSet.of_ids([1]), 0).next_timer(0, 25) is None


def test_each_state_says_why_it_refuses_a_vote_whatever_the_log() -> None:
    assert Unattached(3, None, 0).vote_refusal(2) is None
    assert Unattached(3, 2, 0).vote_refusal(2) is None
    assert Unattached(3, 1, 0).vote_refusal(2) == "voted for 1"
    assert Prospective(3, None, 1, 0, 10).vote_refusal(2) == "already prospective in epoch"
    assert Prospective(3, None, None, 0, 10).vote_refusal(2) is None
    assert Candidate(3, 1, 10).vote_refusal(2) == "already candidate in epoch"
    assert Leader.elected(3, 1, 0, VOTERS, 0).vote_refusal(2) == "already leader in epoch"
    assert Resigned(3, 1, 10, ()).vote_refusal(2) == "already resigned in epoch"
    assert Leader.elected(3, 1, 0, VOTERS, 0).pre_vote_refusal() == "leader"
    follower = Follower(3, 1, None, 100)
    assert follower.pre_vote_refusal() is None and follower.vote_refusal(2) == "already follower in epoch"
    follower.fetched(now=5, fetch_timeout_ms=2000)
    assert follower.pre_vote_refusal() == "following a live leader" and follower.deadline == 2005
    assert all(s.pre_vote_refusal() is None for s in (Unattached(3, 1, 0), Candidate(3, 1, 0), Resigned(3, 1, 0, ())))
