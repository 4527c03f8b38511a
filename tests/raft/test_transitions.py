"""Unit tests of each state transition of the core, driven message by message."""

from __future__ import annotations

import dataclasses

import pytest
from raft_harness import KEEP_NO_LOG, Harness, events, sent

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.control import LEADER_CHANGE, control_type, decode_leader_change
from kraftlab.node.raft.core import Commit, LeaderChange, LoadSnapshot, NotLeader, Output
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, QuorumStateData, Record
from kraftlab.node.raft.states import Prospective, Role
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore

E = m.Errors


def elect(h: Harness, now: int = 0) -> int:
    """Drive node 1 of (1, 2, 3) to leadership; returns the time reached."""
    out = h.start(now)
    now = out.deadline
    out = h.tick(now)
    assert h.core.role is Role.PROSPECTIVE
    pre = sent(out, m.VoteRequest)[0]
    out = h.answer(pre, m.VoteResponse(E.NONE, 0, None, True, True), now + 1)
    assert h.core.role is Role.CANDIDATE
    vote = sent(out, m.VoteRequest)[0]
    h.answer(vote, m.VoteResponse(E.NONE, h.core.epoch, None, True, False), now + 2)
    assert h.core.is_leader
    return now + 2


def test_fresh_voter_prevotes_after_a_short_random_delay(make_core) -> None:
    """The quorum's first start (no quorum-state, empty log): a pre-vote within [0, retry backoff)."""
    deadlines = set()
    for seed in range(20):
        h = make_core(seed=seed)
        out = h.start(100)
        assert h.core.role is Role.UNATTACHED and h.core.epoch == 0
        assert 100 <= out.deadline < 120
        deadlines.add(out.deadline)
        assert events(out, "start")[0]["voters"] == [1, 2, 3]
        out = h.tick(out.deadline)
        assert h.core.role is Role.PROSPECTIVE and all(e.message.pre_vote for e in sent(out, m.VoteRequest))
    assert len(deadlines) > 1  # randomised


def test_restarted_voter_waits_a_randomised_election_timeout(make_core) -> None:
    """Any start but the first (a quorum-state, or a log) keeps the election timeout in [T, 2T)."""
    for seed in range(20):
        quorum = MemoryQuorumStateStore()
        quorum.write(QuorumStateData(3, None, None, (1, 2, 3)))
        h = make_core(seed=seed, quorum=quorum)
        out = h.start(100)
        assert h.core.role is Role.UNATTACHED and h.core.epoch == 3
        assert 1100 <= out.deadline < 2100
    for seed in range(5):
        log = MemoryLog()
        log.append([Batch(0, 1, (Record(None, b"x"),), False, 0)])
        h = make_core(seed=seed, log=log)
        assert 1100 <= h.start(100).deadline < 2100


def test_a_restarted_leader_resigns_its_epoch_even_when_no_longer_a_voter(make_core) -> None:
    """Kafka's QuorumState: a quorum-state naming this node leader restarts it Resigned in that
    epoch, voter or not (it must not take that epoch for one with no leader); a non-voter then
    looks for the leader as an observer."""
    for node_id in (1, 4):
        quorum = MemoryQuorumStateStore()
        quorum.write(QuorumStateData(5, node_id, None, (1, 2, 3)))
        h = make_core(node_id=node_id, quorum=quorum)
        out = h.start(100)
        assert h.core.role is Role.RESIGNED and (h.core.epoch, h.core.leader_id) == (5, node_id)
        h.tick(out.deadline)
        assert h.core.role is (Role.PROSPECTIVE if node_id == 1 else Role.UNATTACHED) and h.core.epoch == 5


def test_prevote_changes_no_durable_state(make_core) -> None:
    h = make_core()
    out = h.start(0)
    writes = h.quorum.writes
    out = h.tick(out.deadline)
    assert h.core.role is Role.PROSPECTIVE and h.core.epoch == 0
    requests = sent(out, m.VoteRequest)
    assert {e.dst for e in requests} == {2, 3}
    assert all(e.message.pre_vote and e.message.epoch == 1 for e in requests)
    assert h.quorum.writes == writes


def test_candidate_persists_its_vote_before_asking(make_core) -> None:
    h = make_core()
    out = h.start(0)
    out = h.tick(out.deadline)
    out = h.answer(sent(out, m.VoteRequest)[0], m.VoteResponse(E.NONE, 0, None, True, True), out.deadline or 0)
    assert h.core.role is Role.CANDIDATE and h.core.epoch == 1
    assert h.quorum.read() == QuorumStateData(1, None, 1, (1, 2, 3))
    requests = sent(out, m.VoteRequest)
    assert {e.dst for e in requests} == {2, 3} and not any(e.message.pre_vote for e in requests)


def test_new_leader_writes_leader_change_and_waits_for_majority_before_hw(make_core) -> None:
    h = make_core()
    now = elect(h)
    out = h.outputs[-1]
    assert [u for u in out.updates if isinstance(u, LeaderChange)] == [LeaderChange(1, 1, True)]
    (batch,) = h.log.batches()
    assert batch.control and batch.epoch == 1 and control_type(batch.records[0].key) == LEADER_CHANGE
    assert decode_leader_change(batch.records[0]) == (1, [1, 2, 3], [1, 2])
    assert h.log.flushed_end_offset() == 1
    assert h.core.high_watermark == 0
    assert {e.dst for e in sent(out, m.BeginQuorumEpochRequest)} == {2, 3}
    # A fetch at offset 0 acknowledges nothing of this epoch; one at offset 1 commits the LeaderChange.
    out = h.deliver(2, m.FetchRequest(1, 2, 0, 0, 0), now + 1)
    assert h.core.high_watermark == 0
    assert sent(out, m.FetchResponse)[0].message.batches == (batch,)
    out = h.deliver(2, m.FetchRequest(1, 2, 1, 1, 500), now + 2)
    assert h.core.high_watermark == 1
    assert events(out, "hw") == [{"ev": "hw", "hw": 1, "epoch": 1}]
    assert [u for u in out.updates if isinstance(u, Commit)] == [Commit([batch])]


def test_a_new_leader_tells_no_high_water_mark_until_its_epoch_commits(make_core) -> None:
    """Kafka's LeaderState starts with no high-water mark and sets one only past the epoch's start
    offset: until then its Fetch answers and DescribeQuorum say -1, not what it knew as a follower."""
    h = make_core()
    now = elect(h)
    assert h.core.high_watermark == 0 and h.core.describe_quorum(now).high_watermark == -1
    out = h.deliver(2, m.FetchRequest(1, 2, 0, 0, 0), now + 1)
    assert [e.message.high_watermark for e in sent(out, m.FetchResponse)] == [-1]
    out = h.deliver(2, m.FetchRequest(1, 2, 1, 1, 0), now + 2)
    assert [e.message.high_watermark for e in sent(out, m.FetchResponse)] == [1]
    assert h.core.describe_quorum(now + 2).high_watermark == 1


def test_leader_parks_a_fetch_until_new_data(make_core) -> None:
    h = make_core(config=RaftConfig(append_linger_ms=0))
    now = elect(h)
    h.deliver(2, m.FetchRequest(1, 2, 1, 1, 500), now + 1)
    out = h.deliver(3, m.FetchRequest(1, 3, 1, 1, 500), now + 2, ref="r3")
    assert not sent(out, m.FetchResponse)  # parked: nothing new (a voter is parked even before it knows the HW)
    base, out = h.core.append([Record(None, b"x")], now + 3)
    assert base == 1
    (reply,) = [e for e in sent(out, m.FetchResponse) if e.dst == 3]
    assert reply.ref == "r3" and reply.message.batches[0].records == (Record(None, b"x"),)


def test_a_fetch_from_an_observer_behind_the_hw_it_was_told_is_answered_at_once(make_core) -> None:
    """An observer whose last response carried an older HW is not parked (the HW reaches brokers
    promptly): here observer 7 fetched the new batch before it was committed, then fetches again."""
    h = make_core(config=RaftConfig(append_linger_ms=0))
    now = elect(h)
    h.deliver(2, m.FetchRequest(1, 2, 1, 1, 500), now + 1)  # HW 1
    h.deliver(7, m.FetchRequest(1, 7, 1, 1, 500), now + 1)  # the observer is told HW 1
    h.core.append([Record(None, b"x")], now + 2)
    out = h.deliver(7, m.FetchRequest(1, 7, 1, 1, 500), now + 3)
    (got,) = sent(out, m.FetchResponse)
    assert got.message.high_watermark == 1 and len(got.message.batches) == 1
    out = h.deliver(2, m.FetchRequest(1, 2, 2, 1, 500), now + 4)  # HW 2, told to 2 at once
    assert [e.message.high_watermark for e in sent(out, m.FetchResponse)] == [2]
    out = h.deliver(7, m.FetchRequest(1, 7, 2, 1, 500), now + 5)  # 7 was told HW 1 only: answered
    (got,) = sent(out, m.FetchResponse)
    assert got.dst == 7 and got.message.high_watermark == 2 and not got.message.batches
    out = h.deliver(7, m.FetchRequest(1, 7, 2, 1, 500), now + 6)  # now it knows: parked
    assert not sent(out, m.FetchResponse)


def test_linger_groups_appends_into_one_batch(make_core) -> None:
    h = make_core(config=RaftConfig(append_linger_ms=25))
    now = elect(h)
    b1, _out1 = h.core.append([Record(None, b"a")], now)
    b2, out2 = h.core.append([Record(None, b"b"), Record(None, b"c")], now + 5)
    assert (b1, b2) == (1, 2) and h.log.end_offset() == 1
    assert out2.deadline == now + 25
    h.tick(now + 25)
    assert h.log.batches()[-1].records == (Record(None, b"a"), Record(None, b"b"), Record(None, b"c"))


def test_append_on_a_non_leader_raises(make_core) -> None:
    h = make_core()
    h.start(0)
    with pytest.raises(NotLeader):
        h.core.append([Record(None, b"x")], 1)


def test_vote_granted_once_per_epoch_and_only_to_up_to_date_logs(make_core) -> None:
    h = make_core()
    h.log.append([Batch(0, 1, (Record(None, b"a"),)), Batch(1, 2, (Record(None, b"b"),))])
    h.start(0)
    out = h.deliver(2, m.VoteRequest(3, 2, 1, 5), 1)  # last epoch 1 < 2: behind
    assert not sent(out, m.VoteResponse)[0].message.granted
    assert h.core.epoch == 3
    out = h.deliver(2, m.VoteRequest(3, 2, 2, 2), 2)
    assert sent(out, m.VoteResponse)[0].message.granted
    assert h.quorum.read() == QuorumStateData(3, None, 2, (1, 2, 3))  # durable before the answer
    out = h.deliver(3, m.VoteRequest(3, 3, 2, 2), 3)
    assert not sent(out, m.VoteResponse)[0].message.granted
    out = h.deliver(2, m.VoteRequest(3, 2, 2, 2), 4)  # a retry by the same candidate
    assert sent(out, m.VoteResponse)[0].message.granted
    out = h.deliver(3, m.VoteRequest(2, 3, 1, 9), 5)  # stale epoch
    assert sent(out, m.VoteResponse)[0].message.error == E.FENCED_LEADER_EPOCH


def test_follower_that_hears_its_leader_rejects_prevotes(make_core) -> None:
    h = make_core()
    h.start(0)
    out = h.deliver(2, m.BeginQuorumEpochRequest(4, 2), 1)
    assert h.core.role is Role.FOLLOWER and h.core.leader_id == 2
    fetch = sent(out, m.FetchRequest)[0]
    h.answer(fetch, m.FetchResponse(E.NONE, 4, 2, 0), 2)
    out = h.deliver(3, m.VoteRequest(5, 3, 0, 0, True), 3)
    assert not sent(out, m.VoteResponse)[0].message.granted
    assert h.core.role is Role.FOLLOWER and h.core.epoch == 4


def test_follower_times_out_into_prevote(make_core) -> None:
    h = make_core()
    h.start(0)
    out = h.deliver(2, m.BeginQuorumEpochRequest(4, 2), 10)
    assert out.deadline is not None
    h.tick(10 + 2000)
    assert h.core.role is Role.PROSPECTIVE and h.core.epoch == 4


def test_follower_appends_flushes_and_learns_hw(make_core) -> None:
    h = make_core(node_id=2)
    h.start(0)
    out = h.deliver(1, m.BeginQuorumEpochRequest(1, 1), 1)
    fetch = sent(out, m.FetchRequest)[0]
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (0, 0)
    batches = (Batch(0, 1, (Record(None, b"a"),)), Batch(1, 1, (Record(None, b"b"),)))
    out = h.answer(fetch, m.FetchResponse(E.NONE, 1, 1, 1, 0, batches), 2)
    assert h.log.flushed_end_offset() == 2 and h.core.high_watermark == 1
    assert [e["base"] for e in events(out, "append")] == [0, 1]
    assert sent(out, m.FetchRequest)[0].message.fetch_offset == 2
    assert [u for u in out.updates if isinstance(u, Commit)] == [Commit([batches[0]])]


def test_leader_sends_diverging_epoch_and_follower_truncates(make_core) -> None:
    leader = make_core()
    leader.log.append([Batch(0, 1, (Record(None, b"a"), Record(None, b"b")))])
    elect(leader)
    assert leader.core.epoch == 2
    out = leader.deliver(2, m.FetchRequest(2, 2, 4, 1, 0), 10)  # follower has epoch 1 up to 4
    diverging = sent(out, m.FetchResponse)[0].message.diverging_epoch
    assert diverging == OffsetAndEpoch(2, 1)

    follower = make_core(node_id=2)
    follower.log.append([Batch(0, 1, (Record(None, b"a"), Record(None, b"b"))), Batch(2, 1, (Record(None, b"z"),) * 2)])
    follower.log.flush()
    follower.start(0)
    out = follower.deliver(1, m.BeginQuorumEpochRequest(2, 1), 1)
    fetch = sent(out, m.FetchRequest)[0]
    out = follower.answer(fetch, m.FetchResponse(E.NONE, 2, 1, 0, 0, (), diverging), 2)
    assert follower.log.end_offset() == 2
    assert events(out, "truncate") == [{"ev": "truncate", "to": 2, "from": 4, "reason": "diverging",
                                        "diverging_epoch": 1, "diverging_end_offset": 2, "last_fetched_epoch": 1}]
    assert sent(out, m.FetchRequest)[0].message.fetch_offset == 2


def test_a_truncation_journals_a_last_epoch_the_leaders_log_lacks(make_core) -> None:
    """The follower's tail is in epoch 2, which the epoch-3 leader's log never held: the leader answers
    the epoch before it (1, ending at 2), and the journal shows both epochs, so coverage can tell this
    kind from a leader that holds the epoch but ends it earlier."""
    follower = make_core(node_id=2)
    follower.log.append([Batch(0, 1, (Record(None, b"a"), Record(None, b"b"))), Batch(2, 2, (Record(None, b"z"),) * 2)])
    follower.log.flush()
    follower.start(0)
    out = follower.deliver(1, m.BeginQuorumEpochRequest(3, 1), 1)
    fetch = sent(out, m.FetchRequest)[0]
    assert fetch.message.last_fetched_epoch == 2
    out = follower.answer(fetch, m.FetchResponse(E.NONE, 3, 1, 0, 0, (), OffsetAndEpoch(2, 1)), 2)
    assert follower.log.end_offset() == 2
    assert events(out, "truncate") == [{"ev": "truncate", "to": 2, "from": 4, "reason": "diverging",
                                        "diverging_epoch": 1, "diverging_end_offset": 2, "last_fetched_epoch": 2}]


def test_lagging_follower_fetches_a_snapshot_in_chunks(make_core) -> None:
    config = RaftConfig(fetch_snapshot_max_bytes=8, append_linger_ms=0, retention=KEEP_NO_LOG)
    leader = make_core(config=config)
    now = elect(leader)
    leader.core.append([Record(None, b"v%d" % i) for i in range(3)], now)
    leader.deliver(2, m.FetchRequest(1, 2, 4, 1, 0), now + 1)  # commits [0, 4)
    assert leader.core.high_watermark == 4
    state = [Record(b"k", b"state-bytes")]
    leader.step(leader.core.create_snapshot(OffsetAndEpoch(4, 1), state, now + 2))
    assert leader.log.start_offset() == 4 and leader.snapshots.latest() == OffsetAndEpoch(4, 1)

    follower = make_core(node_id=3, config=config)
    follower.start(0)
    out = follower.deliver(1, m.BeginQuorumEpochRequest(1, 1), now + 3)
    t = now + 4
    request = sent(out, m.FetchRequest)[0]
    chunks = 0
    while True:
        reply = sent(leader.deliver(3, request.message, t, ref=request.ref), m.FetchResponse | m.FetchSnapshotResponse)
        out = follower.answer(request, reply[0].message, t)
        if isinstance(reply[0].message, m.FetchSnapshotResponse):
            chunks += 1
        if any(isinstance(u, LoadSnapshot) for u in out.updates):
            break
        request = next(e for e in out.messages if isinstance(e.message, m.FetchRequest | m.FetchSnapshotRequest))
        t += 1
        assert chunks < 50
    assert chunks > 1
    assert [u for u in out.updates if isinstance(u, LoadSnapshot)] == [LoadSnapshot(OffsetAndEpoch(4, 1), state)]
    assert follower.log.start_offset() == 4 and follower.core.high_watermark == 4
    assert follower.core.applied_offset == 4


def test_a_fetched_snapshot_failing_validation_is_dropped_and_fetched_again(make_core) -> None:
    config = RaftConfig(fetch_snapshot_max_bytes=8, append_linger_ms=0, retention=KEEP_NO_LOG)
    leader = make_core(config=config)
    now = elect(leader)
    leader.core.append([Record(None, b"v%d" % i) for i in range(3)], now)
    leader.deliver(2, m.FetchRequest(1, 2, 4, 1, 0), now + 1)
    state = [Record(b"k", b"state-bytes")]
    leader.step(leader.core.create_snapshot(OffsetAndEpoch(4, 1), state, now + 2))
    follower = make_core(node_id=3, config=config)
    follower.start(0)
    request = sent(follower.deliver(1, m.BeginQuorumEpochRequest(1, 1), now + 3), m.FetchRequest)[0]
    t = now + 4
    wanted = m.FetchRequest | m.FetchSnapshotRequest
    damaged = loaded = 0
    while not loaded:
        reply = sent(leader.deliver(3, request.message, t, ref=request.ref), m.FetchResponse | m.FetchSnapshotResponse)
        response = reply[0].message
        if isinstance(response, m.FetchSnapshotResponse) and response.position == 8 and not damaged:
            response = dataclasses.replace(response, data=bytes(b ^ 0xFF for b in response.data))  # damaged in transit
            damaged += 1
        out = follower.answer(request, response, t)
        if events(out, "corruption"):
            assert not any(isinstance(u, LoadSnapshot) for u in out.updates)
            assert events(out, "corruption")[0]["below_hw"] is False
            assert follower.snapshots.latest() is None and follower.core.role is Role.FOLLOWER
            damaged += 1
        loaded = sum(isinstance(u, LoadSnapshot) for u in out.updates)
        t += 1
        request = next((e for e in out.messages if isinstance(e.message, wanted)), None)
        if request is None:  # backing off after the failed freeze
            t += config.retry_backoff_ms
            out = follower.tick(t)
            request = next(e for e in out.messages if isinstance(e.message, wanted))
        assert t < now + 5000
    assert damaged == 2  # one chunk damaged, one failed freeze
    assert follower.snapshots.latest() == OffsetAndEpoch(4, 1) and follower.core.applied_offset == 4


def test_fetch_from_an_epoch_older_than_the_log_start_gets_the_snapshot(make_core) -> None:
    """The log's answer for an epoch below every epoch it holds is (log start, snapshot epoch): the
    replica's tail before our start differs from ours, so it must take the snapshot (a diverging
    epoch at the log start would have it truncate to the start and fetch the same answer forever)."""
    leader = make_core(config=RaftConfig(append_linger_ms=0, retention=KEEP_NO_LOG))
    now = elect(leader)
    leader.core.append([Record(None, b"v%d" % i) for i in range(3)], now)
    leader.deliver(2, m.FetchRequest(1, 2, 4, 1, 0), now + 1)
    leader.step(leader.core.create_snapshot(OffsetAndEpoch(4, 1), [Record(b"k", b"s")], now + 2))
    assert leader.log.end_offset_for_epoch(0) == OffsetAndEpoch(4, 1)
    out = leader.deliver(3, m.FetchRequest(1, 3, 6, 0, 0), now + 3)
    (reply,) = sent(out, m.FetchResponse)
    assert reply.message.diverging_epoch is None
    assert reply.message.snapshot_id == OffsetAndEpoch(4, 1)


def test_deferred_flush_leader_serves_its_unflushed_tail_but_counts_only_what_is_flushed(make_core) -> None:
    h = make_core(config=RaftConfig(append_linger_ms=0))
    h.core.deferred_flush = True
    now = elect(h)
    assert h.outputs[-1].flush_to == 1 and h.log.flushed_end_offset() == 0
    h.log.flush()
    h.step(h.core.flushed(now))
    out = h.deliver(2, m.FetchRequest(1, 2, 1, 1, 0), now + 1)
    assert h.core.high_watermark == 1
    out = h.deliver(3, m.FetchRequest(1, 3, 1, 1, 500), now + 1, ref="parked")
    assert not sent(out, m.FetchResponse)  # parked: nothing new to send
    _, out = h.core.append([Record(None, b"a"), Record(None, b"b")], now + 2)
    assert out.flush_to == 3 and h.log.flushed_end_offset() == 1
    assert events(out, "flush") == []
    (answer,) = sent(out, m.FetchResponse)  # the parked fetch gets the unflushed batch at once
    assert answer.ref == "parked" and answer.message.batches[0].base_offset == 1
    h.deliver(2, m.FetchRequest(1, 2, 3, 1, 0), now + 3)
    assert h.core.high_watermark == 1  # one follower has it durably, the leader not yet: no majority
    h.log.flush()
    out = h.step(h.core.flushed(now + 4))
    assert h.core.high_watermark == 3
    assert events(out, "flush") == [{"ev": "flush", "end": 3}]


def test_deferred_flush_leader_counts_only_flushes_reported_to_it(make_core) -> None:
    """A flush thread may finish the fsync (the log's flushed end moves) before the driver reports it
    with `flushed`: until then the leader must not count it, so its `flush` event precedes the HW."""
    h = make_core(config=RaftConfig(append_linger_ms=0))
    h.core.deferred_flush = True
    now = elect(h)
    h.log.flush()
    h.step(h.core.flushed(now))
    h.deliver(2, m.FetchRequest(1, 2, 1, 1, 0), now + 1)
    assert h.core.high_watermark == 1
    h.core.append([Record(None, b"a"), Record(None, b"b")], now + 2)
    h.log.flush()  # the fsync completed on the flush thread; not reported yet
    out = h.deliver(2, m.FetchRequest(1, 2, 3, 1, 0), now + 3)
    assert h.core.high_watermark == 1 and events(out, "hw") == []
    assert h.core.describe_quorum(now + 3).voters[0].log_end_offset == 1  # its own durable end, as counted
    out = h.step(h.core.flushed(now + 4))
    assert [(e["ev"], e.get("end", e.get("hw"))) for e in out.events if e["ev"] in ("flush", "hw")] == [
        ("flush", 3),
        ("hw", 3),
    ]


def test_deferred_flush_leader_flushes_its_tail_on_leaving_office(make_core) -> None:
    h = make_core(config=RaftConfig(append_linger_ms=0))
    h.core.deferred_flush = True
    now = elect(h)
    h.core.append([Record(None, b"a")], now + 1)
    assert h.log.flushed_end_offset() < h.log.end_offset()
    out = h.deliver(2, m.BeginQuorumEpochRequest(2, 2), now + 2)
    assert h.core.role is Role.FOLLOWER
    assert h.log.flushed_end_offset() == h.log.end_offset() == 2
    assert sent(out, m.FetchRequest)[0].message.fetch_offset == 2


def test_split_vote_with_a_voter_down_ends_after_a_backoff_not_an_election_timeout(make_core) -> None:
    h = make_core()
    out = h.start(0)
    now = out.deadline
    out = h.tick(now)
    pre = {e.dst: e for e in sent(out, m.VoteRequest)}
    out = h.answer(pre[2], m.VoteResponse(E.NONE, 0, None, True, True), now + 1)
    assert h.core.role is Role.CANDIDATE
    votes = {e.dst: e for e in sent(out, m.VoteRequest)}
    out = h.answer(votes[2], m.VoteResponse(E.NONE, 1, None, False, False), now + 2)  # 2 is a candidate too
    assert out.deadline is not None and out.deadline >= now + 1000  # 3 may still answer
    out = h.answer(votes[3], m.RequestFailed(E.BROKER_NOT_AVAILABLE), now + 3)  # 3 is down
    assert out.deadline is not None and out.deadline <= now + 3 + h.core.config.retry_backoff_ms * 2
    out = h.tick(out.deadline)
    assert h.core.role is Role.PROSPECTIVE


def test_a_refused_request_is_retried_after_a_growing_backoff(make_core) -> None:
    h = make_core(node_id=2)
    h.start(0)
    out = h.deliver(1, m.BeginQuorumEpochRequest(1, 1), 10)
    fetch = sent(out, m.FetchRequest)[0]
    t = 10
    for backoff in (20, 40, 80):
        out = h.answer(fetch, m.RequestFailed(E.BROKER_NOT_AVAILABLE), t)
        assert not sent(out, m.FetchRequest) and out.deadline == t + backoff
        assert not sent(h.tick(t + backoff - 1), m.FetchRequest)
        t += backoff
        fetch = sent(h.tick(t), m.FetchRequest)[0]
    out = h.answer(fetch, m.FetchResponse(E.NONE, 1, 1, 0), t + 2)  # an answer resets the backoff
    fetch = sent(out, m.FetchRequest)[0]
    assert h.answer(fetch, m.RequestFailed(E.BROKER_NOT_AVAILABLE), t + 3).deadline == t + 23
    stale = h.answer(fetch, m.RequestFailed(E.BROKER_NOT_AVAILABLE), t + 4)  # its ref is no longer outstanding
    assert stale.deadline == t + 23


def test_check_quorum_resigns_a_leader_nobody_fetches_from(make_core) -> None:
    h = make_core()
    now = elect(h)
    h.tick(now + 2999)
    assert h.core.is_leader
    out = h.tick(now + 3000)
    assert h.core.role is Role.RESIGNED
    assert {e.dst for e in sent(out, m.EndQuorumEpochRequest)} == {2, 3}


def test_fetching_voter_keeps_the_leader_in_office(make_core) -> None:
    h = make_core()
    now = elect(h)
    for t in range(now + 1000, now + 10_000, 1000):
        h.deliver(2, m.FetchRequest(1, 2, 1, 1, 0), t)
        h.tick(t)
    assert h.core.is_leader


def test_restarted_leader_comes_back_resigned(make_core) -> None:
    h = make_core()
    elect(h)
    again = make_core(log=h.log, quorum=h.quorum, snapshots=h.snapshots, seed=2)
    again.start(50)
    assert again.core.role is Role.RESIGNED and again.core.epoch == 1
    assert not again.core.is_leader


def test_single_voter_elects_itself_at_start(make_core) -> None:
    h = make_core(voters=(1,))
    out = h.start(0)
    assert h.core.is_leader and h.core.epoch == 1 and h.core.high_watermark == 1
    assert any(isinstance(u, Commit) for u in out.updates)


def test_observer_finds_and_follows_the_leader(make_core) -> None:
    h = make_core(node_id=7)
    out = h.start(0)
    assert events(out, "role")[0]["role"] == "observer"
    probe = sent(out, m.FetchRequest)[0]
    assert probe.dst in (1, 2, 3)
    out = h.answer(probe, m.FetchResponse(E.NOT_LEADER_OR_FOLLOWER, 3, 2), 5)
    assert h.core.leader_id == 2 and h.core.epoch == 3
    assert sent(out, m.FetchRequest)[0].dst == 2
    out = h.deliver(2, m.VoteRequest(4, 2, 9, 9), 6)
    assert not sent(out, m.VoteResponse)[0].message.granted


def test_observer_without_a_leader_asks_again_after_the_retry_backoff(make_core) -> None:
    """One bootstrap Fetch at a time; a voter that names no leader yet is followed by the next probe
    within the retry backoff (20 ms), not an election timeout; a refused voter is skipped."""
    h = make_core(node_id=7)
    out = h.start(0)
    (probe,) = sent(out, m.FetchRequest)
    assert out.deadline == 20
    out = h.tick(20)
    assert not sent(out, m.FetchRequest)  # still waiting for the first answer: no second probe
    assert out.deadline == 40  # and no busy timer in the meantime
    out = h.answer(probe, m.FetchResponse(E.NOT_LEADER_OR_FOLLOWER, 0, None), 25)
    assert h.core.leader_id is None and out.deadline == 40
    (probe,) = sent(h.tick(40), m.FetchRequest)
    h.answer(probe, m.RequestFailed(), 41)  # refused: that voter backs off (20 ms, then more)
    (probe2,) = sent(h.tick(60), m.FetchRequest)
    assert probe2.dst != probe.dst
    out = h.answer(probe2, m.FetchResponse(E.NOT_LEADER_OR_FOLLOWER, 1, 3), 62)
    assert h.core.leader_id == 3 and sent(out, m.FetchRequest)[0].dst == 3


def test_observer_whose_voters_all_back_off_asks_again_when_the_first_backoff_ends(make_core) -> None:
    """Every voter refused (each backing off after its RequestFailed): the next probe goes at the
    first backoff's end, not a retry backoff after the tick that found them all backing off."""
    h = make_core(node_id=7, voters=(1,))
    (probe,) = sent(h.start(0), m.FetchRequest)
    out = h.answer(probe, m.RequestFailed(), 5)  # voter 1 backs off until 5 + its backoff
    ends = h.core._inflight[1][1]
    assert ends > 20
    out = h.tick(20)  # the retry timer finds the only voter backing off
    assert not sent(out, m.FetchRequest) and out.deadline == min(40, ends)
    later = h.tick(ends)
    assert [s.dst for s in sent(later, m.FetchRequest)] == [1]


def test_end_quorum_epoch_lets_the_preferred_successor_go_first(make_core) -> None:
    h = make_core(node_id=2)
    h.start(0)
    h.deliver(1, m.BeginQuorumEpochRequest(1, 1), 1)
    out = h.deliver(1, m.EndQuorumEpochRequest(1, 1, (2, 3)), 10)
    assert out.deadline == 10 + 20
    h.tick(30)
    assert h.core.role is Role.PROSPECTIVE


def test_stale_responses_are_ignored(make_core) -> None:
    h = make_core(node_id=2)
    h.start(0)
    h.deliver(1, m.BeginQuorumEpochRequest(1, 1), 1)
    batches = (Batch(0, 1, (Record(None, b"a"),)),)
    h.deliver(1, m.FetchResponse(E.NONE, 1, 1, 1, 0, batches), 2, ref="not-ours")
    assert h.log.end_offset() == 0


def test_describe_quorum_on_the_leader(make_core) -> None:
    h = make_core()
    now = elect(h)
    h.deliver(2, m.FetchRequest(1, 2, 1, 1, 0), now + 5)
    h.deliver(9, m.FetchRequest(1, 9, 0, 0, 0), now + 6)
    out = h.deliver(5, m.DescribeQuorumRequest(), now + 7, ref=42)
    (reply,) = sent(out, m.DescribeQuorumResponse)
    d = reply.message
    assert reply.ref == 42 and d.leader_id == 1 and d.epoch == 1 and d.high_watermark == 1
    assert [(r.replica_id, r.log_end_offset) for r in d.voters] == [(1, 1), (2, 1), (3, 0)]
    assert [r.replica_id for r in d.observers] == [9]


def test_candidate_that_times_out_backs_off_into_prevote(make_core) -> None:
    h = make_core()
    out = h.start(0)
    out = h.tick(out.deadline)
    out = h.answer(sent(out, m.VoteRequest)[0], m.VoteResponse(E.NONE, 0, None, True, True), 5000)
    assert h.core.role is Role.CANDIDATE
    deadline = out.deadline
    assert deadline is not None and 5000 + 1000 <= deadline < 5000 + 2000
    first = h.tick(deadline)
    assert h.core.role is Role.PROSPECTIVE and h.core.epoch == 1 and h.core.voted_id == 1
    # One failure: the backoff is at most retry_backoff << 1 = 40 ms, then the pre-votes go out.
    assert first.deadline is not None and first.deadline <= deadline + 40
    second = h.tick(first.deadline)
    pre_votes = sent(first, m.VoteRequest) + sent(second, m.VoteRequest)
    assert {e.dst for e in pre_votes} == {2, 3}
    assert all(e.message.pre_vote and e.message.epoch == 2 for e in pre_votes)


def test_rejected_candidate_gives_up_early(make_core) -> None:
    h = make_core()
    out = h.start(0)
    out = h.tick(out.deadline)
    out = h.answer(sent(out, m.VoteRequest)[0], m.VoteResponse(E.NONE, 0, None, True, True), 10)
    votes = sent(out, m.VoteRequest)
    out = h.answer(votes[0], m.VoteResponse(E.NONE, 1, None, False), 11)
    assert h.core.role is Role.CANDIDATE
    out = h.answer(votes[1], m.VoteResponse(E.NONE, 1, None, False), 12)
    assert out.deadline is not None and out.deadline <= 12 + 40


def test_graceful_resignation_names_the_most_caught_up_voter_first(make_core) -> None:
    h = make_core()
    now = elect(h)
    h.deliver(3, m.FetchRequest(1, 3, 1, 1, 0), now + 1)
    out = h.step(h.core.resign(now + 2))
    assert h.core.role is Role.RESIGNED
    requests = sent(out, m.EndQuorumEpochRequest)
    assert {e.dst for e in requests} == {2, 3}
    assert requests[0].message.preferred_successors == (3, 2)
    with pytest.raises(NotLeader):
        h.core.append([Record(None, b"x")], now + 3)
    out = h.tick(out.deadline)
    assert h.core.role is Role.PROSPECTIVE


def test_a_vote_survives_a_restart(make_core) -> None:
    h = make_core()
    h.start(0)
    assert sent(h.deliver(2, m.VoteRequest(5, 2, 0, 0), 1), m.VoteResponse)[0].message.granted
    again = make_core(log=h.log, quorum=h.quorum, snapshots=h.snapshots, seed=9)
    again.start(2)
    assert again.core.epoch == 5 and again.core.voted_id == 2
    assert not sent(again.deliver(3, m.VoteRequest(5, 3, 0, 0), 3), m.VoteResponse)[0].message.granted


def test_higher_epoch_in_a_response_steps_a_leader_down(make_core) -> None:
    h = make_core()
    now = elect(h)
    begin = sent(h.outputs[-1], m.BeginQuorumEpochRequest)[0]
    out = h.answer(begin, m.BeginQuorumEpochResponse(E.FENCED_LEADER_EPOCH, 4, 3), now + 1)
    assert h.core.role is Role.FOLLOWER and (h.core.epoch, h.core.leader_id) == (4, 3)
    assert [u for u in out.updates if isinstance(u, LeaderChange)] == [LeaderChange(3, 4, False)]
    assert h.quorum.read() == QuorumStateData(4, 3, None, (1, 2, 3))


def test_a_prevote_from_a_later_epoch_moves_even_a_leader_to_that_epoch(make_core) -> None:
    h = make_core()
    now = elect(h)
    out = h.deliver(2, m.VoteRequest(3, 2, 1, 1, True), now + 1)  # node 2 already reached epoch 2
    assert h.core.role is Role.UNATTACHED and h.core.epoch == 2 and h.core.voted_id is None
    assert sent(out, m.VoteResponse)[0].message.granted
    # An ordinary pre-vote (for our epoch + 1) changes nothing.
    g = make_core()
    now = elect(g)
    g.deliver(2, m.VoteRequest(2, 2, 1, 1, True), now + 1)
    assert g.core.is_leader and g.core.epoch == 1


def test_malformed_requests_get_errors_not_state_changes(make_core) -> None:
    h = make_core(config=RaftConfig(append_linger_ms=0))
    now = elect(h)
    h.core.append([Record(None, b"a"), Record(None, b"b"), Record(None, b"c")], now)  # batch [1, 4)
    cases = [
        (m.BeginQuorumEpochRequest(99, 42), m.BeginQuorumEpochResponse, E.INCONSISTENT_VOTER_SET),
        (m.EndQuorumEpochRequest(99, 1), m.EndQuorumEpochResponse, E.INCONSISTENT_VOTER_SET),
        (m.FetchRequest(1, 2, -5, 0, 0), m.FetchResponse, E.INVALID_REQUEST),
        (m.FetchRequest(1, 2, 1, 7, 0), m.FetchResponse, E.INVALID_REQUEST),
        (m.FetchRequest(1, 2, 2, 1, 0), m.FetchResponse, E.INVALID_REQUEST),  # inside a batch
        (m.FetchRequest(1, 2, 0, 0, -1), m.FetchResponse, E.INVALID_REQUEST),
        (m.FetchSnapshotRequest(1, 2, OffsetAndEpoch(1, 1), 0, 10), m.FetchSnapshotResponse, E.SNAPSHOT_NOT_FOUND),
    ]
    for request, kind, error in cases:
        out = h.deliver(2, request, now + 1)
        assert [e.message.error for e in sent(out, kind)] == [error], request
    assert h.core.is_leader and h.core.epoch == 1 and h.log.end_offset() == 4


def _lose_pre_vote_round(h: Harness, out: Output, now: int) -> tuple[int, Output]:
    """Node 1 of (1, 2, 3) asked for pre-votes in `out` and both others refuse at `now`: the
    backoff it draws for its next round, and the output of the tick that ends that backoff."""
    for e in sent(out, m.VoteRequest):
        assert e.message.pre_vote
        h.answer(e, m.VoteResponse(E.NONE, h.core.epoch, None, False, True), now)
    state = h.core.state
    assert isinstance(state, Prospective) and not state.rejected  # the next round
    return state.send_at - now, h.tick(state.send_at)


@pytest.mark.parametrize("seed", range(5))
def test_the_election_backoff_starts_afresh_in_a_later_epoch(make_core, seed: int) -> None:
    """Kafka counts a round's retries from 1 unless it follows a failed Candidate's: a voter whose
    rounds kept failing (its backoff grown to the maximum) and that a later epoch's Vote request
    made Unattached backs off after its next failed round as after a first one (at most
    retry.backoff · 2), not as after its eighth."""
    h = make_core(seed=seed)
    out = h.start(0)
    now = out.deadline
    out = h.tick(now)
    for _ in range(7):  # seven failed rounds: the backoff may now reach election.backoff.max
        now += 1
        backoff, out = _lose_pre_vote_round(h, out, now)
        now += backoff
    now += 1
    h.deliver(2, m.VoteRequest(5, 2, 0, 0, False), now)  # a later epoch's candidate with a shorter log
    assert h.core.role is Role.UNATTACHED and h.core.epoch == 5
    now += 2 * h.core.config.election_timeout_ms
    out = h.tick(now)
    assert h.core.role is Role.PROSPECTIVE
    backoff, _ = _lose_pre_vote_round(h, out, now + 1)
    assert 0 <= backoff <= 2 * h.core.config.retry_backoff_ms
