"""The voter set as a value over the log: in force when appended, rolled back by truncation,
reset by a snapshot; a voter is (id, directory id)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.raft.control import leader_change_record
from kraftlab.node.raft.membership.log_voters import ControlRecordState, holds_vote
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, KRAFT_VERSION_1, kraft_version_record, voters_record
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.raft.voters import Voter, VoterSet

D = [uuid.UUID(int=i + 1) for i in range(8)]


def dynamic(*ids: int) -> VoterSet:
    return VoterSet(Voter(i, D[i]) for i in ids)


def control(base: int, *records: Record) -> Batch:
    return Batch(base, 1, records, control=True)


def data(base: int, n: int) -> Batch:
    return Batch(base, 1, tuple(Record(None, b"x") for _ in range(n)))


def test_set_in_force_from_its_append_offset() -> None:
    state = ControlRecordState(dynamic(1), KRAFT_VERSION_1)
    state.apply_batches(
        [data(0, 3), control(3, voters_record(dynamic(1, 2))), data(4, 2), control(6, voters_record(dynamic(1, 2, 3)))]
    )
    assert state.voters_at(2) == dynamic(1)
    assert state.voters_at(3) == state.voters_at(5) == dynamic(1, 2)
    assert state.latest_voters == state.voters_at(100) == dynamic(1, 2, 3)
    assert state.voters.last_offset == 6


def test_truncation_rolls_back_uncommitted_sets() -> None:
    state = ControlRecordState(dynamic(1, 2, 3), KRAFT_VERSION_1)
    state.apply_batches(
        [data(0, 2), control(2, voters_record(dynamic(1, 2, 3, 4))), control(3, voters_record(dynamic(1, 2, 4)))]
    )
    state.truncate_from(3)
    assert state.latest_voters == dynamic(1, 2, 3, 4)
    state.truncate_from(2)
    assert state.latest_voters == dynamic(1, 2, 3) and state.voters.last_offset == -1
    state.truncate_from(0)  # the initial set (bootstrap checkpoint or configuration) stays
    assert state.latest_voters == dynamic(1, 2, 3)


def test_kraft_version_by_offset_and_other_control_records_ignored() -> None:
    state = ControlRecordState(VoterSet.of_ids([1, 2, 3]))
    assert state.kraft_version == KRAFT_VERSION_0
    state.apply_batch(control(0, leader_change_record(1, [1, 2, 3], [1, 2]), kraft_version_record(1)))
    state.apply_batch(data(2, 1))  # a data batch is never read as control records
    assert state.kraft_version_at(0) == 0 and state.kraft_version_at(1) == 1 and state.kraft_version == 1
    assert state.latest_voters == VoterSet.of_ids([1, 2, 3])
    state.truncate_from(1)
    assert state.kraft_version == 0


def test_snapshot_brings_its_sets() -> None:
    state = ControlRecordState(VoterSet.of_ids([9]))
    state.apply_batch(control(0, voters_record(dynamic(1, 2))))
    state.reset_to_snapshot([kraft_version_record(1), voters_record(dynamic(1, 2, 3))])
    assert (
        state.kraft_version == 1 and state.latest_voters == dynamic(1, 2, 3) and state.voters_at(0) == dynamic(1, 2, 3)
    )
    state.truncate_from(0)
    assert state.latest_voters == dynamic(1, 2, 3)
    state.reset_to_snapshot([])  # a snapshot without membership records keeps what is in force
    assert state.latest_voters == dynamic(1, 2, 3) and state.kraft_version == 1


def test_replaced_disk_is_not_the_voter() -> None:
    voters = dynamic(1, 2, 3)
    assert holds_vote(voters, 2, D[2])
    assert not holds_vote(voters, 2, uuid.UUID(int=99))  # same id, new directory: a new replica
    assert not holds_vote(voters, 2, None)
    assert not holds_vote(voters, 4, D[4])
    static = VoterSet.of_ids([1, 2, 3])
    assert holds_vote(static, 2, None) and holds_vote(static, 2, uuid.UUID(int=99))


@given(st.lists(st.tuples(st.booleans(), st.frozensets(st.integers(1, 5), min_size=1)), max_size=20), st.data())
def test_history_matches_a_replay_of_the_kept_prefix(
    steps: list[tuple[bool, frozenset[int]]], draw: st.DataObject
) -> None:
    """After appends and any truncation, the set at every offset is what replaying the kept log gives."""
    initial = dynamic(1)
    state = ControlRecordState(initial, KRAFT_VERSION_1)
    log: list[VoterSet | None] = []
    for is_change, ids in steps:
        offset = len(log)
        if is_change:
            state.apply_batch(control(offset, voters_record(dynamic(*sorted(ids)))))
            log.append(dynamic(*sorted(ids)))
        else:
            state.apply_batch(data(offset, 1))
            log.append(None)
        if draw.draw(st.booleans()):
            cut = draw.draw(st.integers(0, len(log)))
            state.truncate_from(cut)
            del log[cut:]
    expected = initial
    for offset, change in enumerate(log):
        expected = change or expected
        assert state.voters_at(offset) == expected
    assert state.latest_voters == expected
