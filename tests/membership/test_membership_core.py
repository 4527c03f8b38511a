"""The Raft core of a dynamic quorum (KIP-853): the voter set from the bootstrap checkpoint,
snapshots and the log (in force when appended, rolled back by truncation), voters known by
(id, directory id), and the leader's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter rules."""

from __future__ import annotations

import random
import uuid

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.control import ControlRecordType, control_type
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.membership.records import (
    KRAFT_VERSION_1,
    kraft_version_record,
    parse_voters,
    voters_record,
)
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.states import Role
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore

D = [uuid.UUID(int=(i + 1) << 64) for i in range(8)]
ADMIN = -7
CONFIG = RaftConfig(append_linger_ms=0)


def voter(i: int, directory: uuid.UUID | None = None) -> Voter:
    return Voter(i, directory or D[i], (Endpoint("CONTROLLER", f"n{i}", 9093),))


def voters(*ids: int) -> VoterSet:
    return VoterSet(voter(i) for i in ids)


def node(
    node_id: int,
    checkpoint: VoterSet | None = None,
    directory: uuid.UUID | None = None,
    log: MemoryLog | None = None,
    snapshots: MemorySnapshotStore | None = None,
) -> RaftCore:
    """A controller of a dynamic quorum: the bootstrap checkpoint (`--initial-controllers`) or none."""
    snapshots = snapshots or MemorySnapshotStore()
    if checkpoint is not None:
        membership = [kraft_version_record(KRAFT_VERSION_1), voters_record(checkpoint)]
        snapshots.write(OffsetAndEpoch(0, 0), [], 0, membership)
    return RaftCore(
        CONFIG,
        node_id,
        VoterSet([]),
        log or MemoryLog(),
        MemoryQuorumStateStore(),
        snapshots,
        random.Random(node_id),
        directory_id=directory or D[node_id],
        bootstrap=(1, 2, 3),
    )


def ask(core: RaftCore, request: m.Message, now: int, src: int = ADMIN, ref: object = "r") -> Output:
    return core.handle(m.Envelope(src, core.node_id, request, ref), now)


def answers(out: Output) -> list[m.VoterChangeResponse]:
    return [e.message for e in out.messages if e.dst == ADMIN and isinstance(e.message, m.VoterChangeResponse)]


def fetch(core: RaftCore, replica: int, offset: int, now: int, directory: uuid.UUID | None = None) -> Output:
    """A Fetch from replica `replica` running on `directory` (its own disk, D[replica], by default)."""
    last_epoch = core.log.last_epoch() if offset else 0
    request = m.FetchRequest(core.epoch, replica, offset, last_epoch, 0, directory or D[replica])
    return ask(core, request, now, src=replica, ref=f"f{replica}")


def standalone_leader() -> RaftCore:
    """`--standalone`: node 1 alone, leading epoch 1 with its first batch committed."""
    core = node(1, voters(1))
    core.start(0)
    assert core.is_leader and core.high_watermark == core.log.end_offset()
    return core


def test_standalone_node_leads_and_writes_the_checkpoint_voters_into_its_log() -> None:
    core = standalone_leader()
    assert core.voter_set == voters(1) and core.is_voter
    first = core.log.read(0, 1 << 20)[0]
    kinds = [control_type(r.key) for r in first.records]
    # LeaderChange, then the bootstrap checkpoint's membership records: a replica formatted with
    # --no-initial-controllers learns the voters by fetching them.
    assert kinds == [ControlRecordType.LEADER_CHANGE, ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS]
    assert parse_voters(first.records[2]) == voters(1)


def test_observer_learns_the_set_by_fetching_and_loses_it_on_truncation() -> None:
    leader = standalone_leader()
    core = node(2)  # --no-initial-controllers
    out = core.start(0)
    assert not core.is_voter and core.role == Role.UNATTACHED
    # It knows no voter: it asks the bootstrap servers.
    (request,) = [e for e in out.messages if isinstance(e.message, m.FetchRequest)]
    assert request.dst in (1, 3)
    # A bootstrap server names the leader; the observer follows it and fetches from it.
    hint = m.FetchResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, 1, 1)
    out = core.handle(m.Envelope(request.dst, 2, hint, request.ref), 5)
    (request,) = [e for e in out.messages if isinstance(e.message, m.FetchRequest)]
    assert request.dst == 1 and core.leader_id == 1
    batches = tuple(leader.log.read(0, 1 << 20))
    added = Batch(batches[-1].next_offset, 1, (voters_record(voters(1, 2)),), True)
    response = m.FetchResponse(m.Errors.NONE, 1, 1, 0, 0, (*batches, added))
    out = core.handle(m.Envelope(1, 2, response, request.ref), 10)
    # In force as soon as appended, committed or not (and journalled so).
    assert core.voter_set == voters(1, 2) and core.is_voter
    assert core.high_watermark == 0
    journalled = [e for e in out.events if e["ev"] == "voters"]
    assert [(e["offset"], e["voters"], e["reason"]) for e in journalled] == [(added.base_offset, [1, 2], "append")]
    assert journalled[0]["kraft_version"] == 1 and all(journalled[0]["directory_ids"])
    # The leader never committed it and tells the follower its log diverges: the set reverts.
    (again,) = [e for e in out.messages if isinstance(e.message, m.FetchRequest)]
    diverging = m.FetchResponse(m.Errors.NONE, 1, 1, 0, 0, (), OffsetAndEpoch(added.base_offset, 1))
    out = core.handle(m.Envelope(1, 2, diverging, again.ref), 30)
    assert core.log.end_offset() == added.base_offset
    assert core.voter_set == voters(1) and not core.is_voter
    assert [(e["voters"], e["reason"]) for e in out.events if e["ev"] == "voters"] == [([1], "truncate")]


def test_voter_set_loaded_from_a_snapshot_and_the_log_at_start() -> None:
    log, snapshots = MemoryLog(), MemorySnapshotStore()
    snapshots.write(
        OffsetAndEpoch(10, 1), [Record(b"k", b"v")], 0, [kraft_version_record(1), voters_record(voters(1, 2, 3))]
    )
    log.reset_to_snapshot(OffsetAndEpoch(10, 1))
    log.append([Batch(10, 1, (voters_record(voters(1, 2, 3, 4)),), True)])
    log.flush()
    core = node(4, log=log, snapshots=snapshots)
    core.start(0)
    assert core.voter_set == voters(1, 2, 3, 4) and core.is_voter
    assert core.voter_history.at(9) == voters(1, 2, 3)


def test_a_replaced_disk_is_not_the_voter_neither_campaigns_nor_votes() -> None:
    replaced = uuid.UUID(int=99 << 64)
    core = node(2, voters(1, 2, 3), directory=replaced)
    core.start(0)
    out = core.tick(10_000)
    assert not core.is_voter
    assert core.role == Role.UNATTACHED and not [e for e in out.messages if isinstance(e.message, m.VoteRequest)]
    # Asked for the vote of voter (2, D[2]): that directory is gone with the old disk.
    vote = m.VoteRequest(1, 1, 0, 0, False, voter_directory_id=D[2])
    out = ask(core, vote, 10_001, src=1)
    (response,) = [e.message for e in out.messages if isinstance(e.message, m.VoteResponse)]
    assert not response.granted and response.error == m.Errors.INVALID_VOTER_KEY
    # The same request reaching the original disk is granted.
    original = node(2, voters(1, 2, 3))
    original.start(0)
    out = ask(original, vote, 10_001, src=1)
    (response,) = [e.message for e in out.messages if isinstance(e.message, m.VoteResponse)]
    assert response.granted


def test_add_voter_waits_for_catch_up_then_answers_at_commit() -> None:
    core = standalone_leader()
    end = core.log.end_offset()
    out = ask(core, m.AddRaftVoterRequest(voter(2), 1_000), 100)
    assert answers(out) == [] and core.voter_set == voters(1)  # node 2 has not fetched yet
    fetch(core, 2, end, 200)  # an observer at the leader's end: caught up
    tick = core.tick(200)
    assert core.voter_set == voters(1, 2)  # appended: in force, not committed
    assert core.high_watermark == end and answers(tick) == []
    # A second change is refused until this one commits.
    refused = answers(ask(core, m.AddRaftVoterRequest(voter(3), 1_000), 210))
    assert [r.error for r in refused] == [m.Errors.REQUEST_TIMED_OUT]
    # The new voter acknowledges the record: it commits with a majority of {1, 2}; the answer goes out.
    done = fetch(core, 2, core.log.end_offset(), 300)
    assert core.high_watermark == core.log.end_offset()
    assert [r.error for r in answers(done)] == [m.Errors.NONE]


def test_add_voter_times_out_when_the_replica_never_catches_up() -> None:
    core = standalone_leader()
    ask(core, m.AddRaftVoterRequest(voter(2), 500), 100)
    out = core.tick(600)
    assert [r.error for r in answers(out)] == [m.Errors.REQUEST_TIMED_OUT]
    assert core.voter_set == voters(1)
    # Nothing pending any more: the next request is taken.
    assert answers(ask(core, m.AddRaftVoterRequest(voter(2), 500), 700)) == []


def test_add_voter_naming_a_directory_no_fetching_replica_runs_on_times_out() -> None:
    """Kafka's leader tracks replicas by (id, directory id) from the Fetch's ReplicaDirectoryId: an
    AddRaftVoter naming node 2 with a directory it does not run on waits for a replica that never
    fetches, and times out — node 2 fetching caught up from its own disk is another replica."""
    core = standalone_leader()
    elsewhere = uuid.UUID(int=42 << 64)
    ask(core, m.AddRaftVoterRequest(voter(2, elsewhere), 500), 100)
    fetch(core, 2, core.log.end_offset(), 200)
    assert core.voter_set == voters(1) and answers(core.tick(300)) == []
    assert [r.error for r in answers(core.tick(600))] == [m.Errors.REQUEST_TIMED_OUT]
    assert core.voter_set == voters(1)
    # The same request naming the disk node 2 runs on: added at once, node 2 being caught up.
    ask(core, m.AddRaftVoterRequest(voter(2), 500), 700)
    assert core.voter_set == voters(1, 2)


def test_a_voters_id_fetching_from_another_directory_is_an_observer() -> None:
    """A fetch is the voter's only with the voter's key: from a replaced disk (same id, another
    directory id) it neither acknowledges the epoch nor counts toward the high-water mark, and
    DescribeQuorum lists it as an observer with its directory id."""
    core = standalone_leader()
    now = 100
    for rid in (2, 3):  # voters 2 and 3 added, each once caught up, each change committed
        fetch(core, rid, core.log.end_offset(), now)
        ask(core, m.AddRaftVoterRequest(voter(rid), 1_000), now + 1)
        fetch(core, rid, core.log.end_offset(), now + 2)
        now += 100
    assert core.voter_set == voters(1, 2, 3) and core.high_watermark == core.log.end_offset()
    core.append([Record(b"k", b"v")], now)
    end, replaced = core.log.end_offset(), uuid.UUID(int=99 << 64)
    ends = [(r.replica_id, r.log_end_offset) for r in core.describe_quorum(now).voters]
    fetch(core, 2, end, now + 1, directory=replaced)
    fetch(core, 3, end, now + 1, directory=replaced)
    assert core.high_watermark < end
    described = core.describe_quorum(now + 2)
    assert [(r.replica_id, r.directory_id) for r in described.observers] == [(2, replaced), (3, replaced)]
    assert [(r.replica_id, r.log_end_offset) for r in described.voters] == ends
    # Nor does a replaced disk's FetchSnapshot (KIP-853's v1 carries the directory id) count as
    # the voter's fetch for check-quorum.
    def last_fetches(view: m.DescribeQuorumResponse) -> list[tuple[int, int]]:
        return [(r.replica_id, r.last_fetch_ms) for r in view.voters if r.replica_id != 1]

    fetched = last_fetches(described)
    sid = OffsetAndEpoch(core.high_watermark, core.epoch)  # a snapshot to fetch (Kafka never serves 0-0)
    core.create_snapshot(sid, [], now + 2)
    chunk = m.FetchSnapshotRequest(core.epoch, 2, sid, 0, 1 << 20, replaced)
    (served,) = [e.message for e in ask(core, chunk, now + 3, src=2).messages if e.dst == 2]
    assert isinstance(served, m.FetchSnapshotResponse) and served.error == m.Errors.NONE
    assert last_fetches(core.describe_quorum(now + 3)) == fetched
    fetch(core, 3, end, now + 3)  # voter (3, D[3]) itself
    assert core.high_watermark == end


def test_leader_refusals_in_kafkas_error_codes() -> None:
    core = standalone_leader()
    dup = answers(ask(core, m.AddRaftVoterRequest(voter(1, uuid.UUID(int=5 << 64)), 500), 10))
    assert [r.error for r in dup] == [m.Errors.DUPLICATE_VOTER]
    missing = answers(ask(core, m.RemoveRaftVoterRequest(3, D[3]), 10))
    assert [r.error for r in missing] == [m.Errors.VOTER_NOT_FOUND]
    wrong_dir = answers(ask(core, m.RemoveRaftVoterRequest(1, D[5]), 10))
    assert [r.error for r in wrong_dir] == [m.Errors.VOTER_NOT_FOUND]
    last = answers(ask(core, m.RemoveRaftVoterRequest(1, D[1]), 10))
    assert [r.error for r in last] == [m.Errors.INVALID_REQUEST]
    follower = node(2)
    follower.start(0)
    not_leader = answers(ask(follower, m.AddRaftVoterRequest(voter(3), 500), 10))
    assert [r.error for r in not_leader] == [m.Errors.NOT_LEADER_OR_FOLLOWER]


def test_static_quorum_refuses_voter_changes() -> None:
    core = RaftCore(CONFIG, 1, (1,), MemoryLog(), MemoryQuorumStateStore(), MemorySnapshotStore(), random.Random(1))
    core.start(0)
    assert core.is_leader
    out = answers(ask(core, m.AddRaftVoterRequest(voter(2), 500), 10))
    assert [r.error for r in out] == [m.Errors.UNSUPPORTED_VERSION]
    # The static log carries no membership records.
    first = core.log.read(0, 1 << 20)[0]
    assert [control_type(r.key) for r in first.records] == [ControlRecordType.LEADER_CHANGE]


def test_no_change_before_the_leader_committed_in_its_epoch() -> None:
    # Three voters from the checkpoint; node 1 wins epoch 1 but nobody has fetched its LeaderChange.
    core = node(1, voters(1, 2, 3))
    pending = list(core.start(0).messages)
    t = 0
    while not core.is_leader and t < 5_000:
        t += 50
        pending += core.tick(t).messages
        while pending:
            e = pending.pop(0)
            if isinstance(e.message, m.VoteRequest):
                granted = m.VoteResponse(m.Errors.NONE, core.epoch, None, True, e.message.pre_vote)
                pending += core.handle(m.Envelope(e.dst, 1, granted, e.ref), t).messages
    assert core.is_leader
    refused = answers(ask(core, m.RemoveRaftVoterRequest(3, D[3]), 10_000))
    assert [r.error for r in refused] == [m.Errors.REQUEST_TIMED_OUT]
    assert "committed in its epoch" in (refused[0].message or "")


def test_leader_removing_itself_leads_until_commit_then_resigns() -> None:
    core = standalone_leader()
    end = core.log.end_offset()
    fetch(core, 2, end, 100)
    ask(core, m.AddRaftVoterRequest(voter(2), 1_000), 100)
    fetch(core, 2, core.log.end_offset(), 200)
    assert core.voter_set == voters(1, 2)
    out = ask(core, m.RemoveRaftVoterRequest(1, D[1]), 300)
    assert core.voter_set == voters(2) and not core.is_voter
    assert core.is_leader and answers(out) == []  # it leads a set without itself until that commits
    done = fetch(core, 2, core.log.end_offset(), 400)
    assert [r.error for r in answers(done)] == [m.Errors.NONE]
    assert core.role == Role.RESIGNED
    ends = [e for e in done.messages if isinstance(e.message, m.EndQuorumEpochRequest)]
    assert [e.dst for e in ends] == [2] and ends[0].message.preferred_successors == (2,)


def test_update_voter_changes_endpoints_of_a_voter_only() -> None:
    core = standalone_leader()
    moved = (Endpoint("CONTROLLER", "elsewhere", 19093),)
    out = ask(core, m.UpdateRaftVoterRequest(core.epoch, 1, D[1], moved), 10)
    # A single voter commits at once.
    assert [r.error for r in answers(out)] == [m.Errors.NONE]
    assert core.voter_set.voter(1) == Voter(1, D[1], moved)
    stale = answers(ask(core, m.UpdateRaftVoterRequest(core.epoch, 1, D[4], moved), 20))
    assert [r.error for r in stale] == [m.Errors.VOTER_NOT_FOUND]
    fenced = answers(ask(core, m.UpdateRaftVoterRequest(core.epoch - 1, 1, D[1], moved), 30))
    assert [r.error for r in fenced] == [m.Errors.FENCED_LEADER_EPOCH]


def test_snapshot_carries_the_voter_set_in_force_at_its_end() -> None:
    core = standalone_leader()
    end = core.log.end_offset()
    core.create_snapshot(OffsetAndEpoch(end, 1), [Record(b"k", b"v")], 10)
    control = core.snapshots.read_control_records(OffsetAndEpoch(end, 1))
    assert [control_type(r.key) for r in control] == [ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS]
    assert parse_voters(control[1]) == voters(1)
    assert core.snapshots.read_records(OffsetAndEpoch(end, 1)) == [Record(b"k", b"v")]


def test_a_vote_for_another_disk_in_a_later_epoch_moves_the_replica_to_that_epoch_first() -> None:
    """Kafka's order: a Vote past the voter-only checks moves the replica to the candidate's epoch
    before its voter key is checked — the replaced disk refuses (INVALID_VOTER_KEY) from that epoch."""
    core = node(2, voters(1, 2, 3))
    core.start(0)
    assert core.epoch == 0
    elsewhere = m.VoteRequest(4, 1, 0, 0, False, uuid.UUID(int=99))
    (answer,) = [e.message for e in ask(core, elsewhere, 1, src=1).messages if isinstance(e.message, m.VoteResponse)]
    assert (answer.error, answer.granted, answer.epoch) == (m.Errors.INVALID_VOTER_KEY, False, 4)
    assert (core.epoch, core.voted_id) == (4, None)


def test_an_observer_a_vote_request_moves_keeps_looking_for_the_leader() -> None:
    """A dynamic quorum's observer answers votes (its set may be behind); moved to the candidate's
    epoch, it still asks a bootstrap server for the leader at once, as Kafka's observers never wait
    for an election timeout, where it used to sit out a whole election timeout."""
    core = node(2)  # --no-initial-controllers: an observer
    out = core.start(0)
    (first,) = [e for e in out.messages if isinstance(e.message, m.FetchRequest)]
    core.handle(m.Envelope(first.dst, 2, m.FetchResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, 0, None), first.ref), 5)
    for epoch, pre_vote, now in ((3, True, 30), (5, False, 60)):
        out = core.handle(m.Envelope(1, 2, m.VoteRequest(epoch, 1, 0, 0, pre_vote), "v"), now)
        assert not core.is_voter and core.role == Role.UNATTACHED
        assert core.epoch == (epoch - 1 if pre_vote else epoch)
        assert out.deadline is not None and out.deadline <= now + CONFIG.retry_backoff_ms


def test_an_update_the_leader_leaves_unfinished_names_that_leader_in_its_epoch() -> None:
    """Kafka's LeaderState, closing, completes a pending UpdateRaftVoter NOT_LEADER_OR_FOLLOWER with
    its own leader and epoch (`ChangeVoterHandlerState.maybeResetPendingVoterHandlerState`): the
    CurrentLeader of the answer is the leader that took the request, in the epoch it took it in."""
    core = standalone_leader()
    fetch(core, 2, core.log.end_offset(), 100)
    ask(core, m.AddRaftVoterRequest(voter(2), 1_000), 100)
    fetch(core, 2, core.log.end_offset(), 200)
    fetch(core, 2, core.log.end_offset(), 250)
    assert core.voter_set == voters(1, 2) and core.control.last_change_offset() < core.high_watermark
    led = core.epoch
    moved = (Endpoint("CONTROLLER", "elsewhere", 19093),)
    assert answers(ask(core, m.UpdateRaftVoterRequest(led, 2, D[2], moved), 300)) == []  # not committed yet
    out = ask(core, m.BeginQuorumEpochRequest(led + 1, 2), 400, src=2, ref="b")
    assert not core.is_leader
    [answer] = answers(out)
    assert (answer.error, answer.leader_id, answer.epoch) == (m.Errors.NOT_LEADER_OR_FOLLOWER, 1, led)
