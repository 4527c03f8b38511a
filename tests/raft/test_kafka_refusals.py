"""The core refuses Raft requests as Kafka's KafkaRaftClient does: its checks in Kafka's order
(validateLeaderOnlyRequest's epoch before role; validateVoterOnlyRequest's epoch before the voter
set; a Vote's log position first) and its refusals carrying Kafka's empty answer beside the error."""

from __future__ import annotations

from raft_harness import Harness, sent

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import OffsetAndEpoch, Record

E = m.Errors


def follower_of_2_in_epoch_5(make_core) -> Harness:
    h = make_core(node_id=1, voters=(1, 2, 3))
    h.start(0)
    h.deliver(2, m.BeginQuorumEpochRequest(5, 2), 1)
    assert (h.core.epoch, h.core.leader_id) == (5, 2)
    return h


def only(out, kind: type):
    (env,) = sent(out, kind)
    return env.message


def test_a_fetch_refused_by_a_follower_is_fenced_unknown_or_not_leader_by_its_epoch(make_core) -> None:
    h = follower_of_2_in_epoch_5(make_core)
    errors = [only(h.deliver(3, m.FetchRequest(epoch, 3, 0, 0), 2), m.FetchResponse).error for epoch in (4, 6, 5)]
    # An older epoch is fenced even at a node that does not lead (Kafka checks the epoch first).
    assert errors == [E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.NOT_LEADER_OR_FOLLOWER]


def test_a_fetch_refusal_is_kafkas_empty_answer(make_core) -> None:
    h = make_core(voters=(1,))
    h.start(0)
    h.core.append([Record(None, b"a")], 1)
    assert h.core.is_leader and h.core.high_watermark > 0
    for request in (m.FetchRequest(h.core.epoch - 1, 2, 0, 0), m.FetchRequest(h.core.epoch, 2, -1, 0)):
        answer = only(h.deliver(2, request, 2), m.FetchResponse)
        assert answer.error != E.NONE
        # No high-water mark (-1), the log start, no records, divergence nor snapshot id.
        assert (answer.high_watermark, answer.log_start_offset) == (-1, h.log.start_offset())
        assert (answer.batches, answer.diverging_epoch, answer.snapshot_id) == ((), None, None)
        assert (answer.epoch, answer.leader_id) == (h.core.epoch, 1)


def test_a_fetch_snapshot_refusal_names_no_snapshot_and_a_position_at_the_end_is_out_of_range(make_core) -> None:
    h = make_core(voters=(1,))
    h.start(0)
    h.core.append([Record(None, b"a")], 1)
    sid = OffsetAndEpoch(h.core.high_watermark, h.core.epoch)
    h.step(h.core.create_snapshot(sid, [Record(None, b"state")], 2))
    size = h.snapshots.size(sid)
    epoch = h.core.epoch

    def answer(snapshot_id: OffsetAndEpoch, position: int) -> m.FetchSnapshotResponse:
        request = m.FetchSnapshotRequest(epoch, 2, snapshot_id, position, 1 << 10)
        return only(h.deliver(2, request, 3), m.FetchSnapshotResponse)

    assert answer(sid, size - 1).error == E.NONE
    at_end = answer(sid, size)
    assert at_end.error == E.POSITION_OUT_OF_RANGE  # Kafka: no byte of the snapshot there
    assert (at_end.snapshot_id, at_end.size, at_end.position, at_end.data) == (None, 0, 0, b"")
    assert answer(OffsetAndEpoch(0, 0), 0).error == E.SNAPSHOT_NOT_FOUND


def test_a_vote_with_an_impossible_log_position_or_candidate_is_invalid_and_changes_nothing(make_core) -> None:
    h = make_core(node_id=1, voters=(1, 2, 3))
    h.start(0)
    for request in (
        m.VoteRequest(3, 2, 3, 5),  # no log ends in the epoch the candidate asks for
        m.VoteRequest(3, 2, -1, 5),
        m.VoteRequest(3, 2, 1, -1),
        m.VoteRequest(3, -1, 1, 5),
    ):
        answer = only(h.deliver(2, request, 1), m.VoteResponse)
        assert (answer.error, answer.granted) == (E.INVALID_REQUEST, False)
    assert (h.core.epoch, h.core.voted_id) == (0, None)
    # A stale vote with an impossible log position is still INVALID_REQUEST (checked first) ...
    h.deliver(2, m.BeginQuorumEpochRequest(5, 2), 2)
    assert only(h.deliver(3, m.VoteRequest(4, 3, 4, 0), 3), m.VoteResponse).error == E.INVALID_REQUEST
    # ... and a stale one from a node no voter is fenced (the epoch before the voter set).
    assert only(h.deliver(9, m.VoteRequest(4, 9, 1, 0), 4), m.VoteResponse).error == E.FENCED_LEADER_EPOCH


def test_begin_and_end_quorum_epoch_check_the_epoch_before_the_voter_set(make_core) -> None:
    h = follower_of_2_in_epoch_5(make_core)
    for kind in (m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest):
        stale = h.deliver(9, kind(4, 9), 2)  # from no voter, in an older epoch: fenced first
        assert only(stale, m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse).error == E.FENCED_LEADER_EPOCH
        nobody = h.deliver(9, kind(5, -1), 3)
        assert only(nobody, m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse).error == E.INVALID_REQUEST
        stranger = h.deliver(9, kind(6, 9), 4)
        assert only(stranger, m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse).error == E.INCONSISTENT_VOTER_SET
    assert (h.core.epoch, h.core.leader_id) == (5, 2)


def test_a_pre_vote_is_fenced_by_its_candidates_own_epoch(make_core) -> None:
    """A pre-vote asks for its candidate's epoch + 1: a candidate one epoch behind the responder
    is fenced (Kafka's ReplicaEpoch below the responder's), one level with it is heard."""
    h = follower_of_2_in_epoch_5(make_core)
    behind = only(h.deliver(3, m.VoteRequest(5, 3, 1, 0, True), 2), m.VoteResponse)
    assert (behind.error, behind.granted, behind.epoch) == (E.FENCED_LEADER_EPOCH, False, 5)
    level = only(h.deliver(3, m.VoteRequest(6, 3, 1, 0, True), 3), m.VoteResponse)
    assert level.error == E.NONE and (h.core.epoch, h.core.leader_id) == (5, 2)


def test_a_fetch_inside_a_batch_is_refused_with_kafkas_empty_answer(make_core) -> None:
    h = make_core(voters=(1,))
    h.start(0)
    h.core.append([Record(None, b"a"), Record(None, b"b")], 1)
    h.tick(100)  # the linger over: one batch of both records
    (batch,) = [b for b in h.log.read(0, 1 << 20) if len(b.records) == 2]
    inside = m.FetchRequest(h.core.epoch, 9, batch.base_offset + 1, batch.epoch)
    answer = only(h.deliver(9, inside, 101), m.FetchResponse)
    assert answer.error == E.INVALID_REQUEST  # ours (no replica fetches there); Kafka serves the batch
    assert (answer.high_watermark, answer.log_start_offset, answer.batches) == (-1, h.log.start_offset(), ())
