"""The voter set and its history by log offset: the membership questions the Raft core asks."""

from __future__ import annotations

import uuid

import pytest

from kraftlab.node.raft.voters import Endpoint, Voter, VoterHistory, VoterSet, majority


def test_majority_sizes() -> None:
    assert [majority(n) for n in range(1, 7)] == [1, 2, 2, 3, 3, 4]


def test_a_static_set_knows_ids_only_and_sorts_them() -> None:
    vs = VoterSet.of_ids([3, 1, 2, 2])
    assert vs.ids == (1, 2, 3) and len(vs) == 3 and vs.majority == 2
    assert 2 in vs and 4 not in vs
    assert vs.voter(1) == Voter(1) and vs.voter(4) is None
    assert vs.others(2) == (1, 3) and vs.others(9) == (1, 2, 3)
    assert VoterSet.of_ids([5]).is_only_voter(5) and not vs.is_only_voter(1)


def test_a_voter_carries_a_directory_id_and_endpoints() -> None:
    d = uuid.UUID(int=7)
    v = Voter(1, d, (Endpoint("CONTROLLER", "10.0.0.1", 9093),))
    vs = VoterSet([v, Voter(2)])
    assert vs.voter(1) == v and vs != VoterSet.of_ids([1, 2])
    with pytest.raises(ValueError, match="twice"):
        VoterSet([Voter(1), Voter(1, d)])


def test_majority_counts_only_voters() -> None:
    vs = VoterSet.of_ids([1, 2, 3, 4, 5])
    assert vs.is_majority([1, 2, 3]) and not vs.is_majority([1, 2])
    assert not vs.is_majority([1, 2, 7, 8])  # observers do not count
    assert not vs.is_majority([1, 1, 2])


def test_majority_value_is_what_a_majority_holds_at_least() -> None:
    vs = VoterSet.of_ids([1, 2, 3])
    assert vs.majority_value({1: 10, 2: 4, 3: 7}) == 7
    assert vs.majority_value({1: 10, 9: 100}) == -1  # a voter not heard from counts as -1
    assert VoterSet.of_ids([1]).majority_value({1: 3}) == 3


def test_majorities_of_sets_one_change_apart_intersect() -> None:
    three, four, five = VoterSet.of_ids([1, 2, 3]), VoterSet.of_ids([1, 2, 3, 4]), VoterSet.of_ids([1, 2, 3, 4, 5])
    assert three.overlaps_majority_with(four) and four.overlaps_majority_with(five)
    assert not three.overlaps_majority_with(five)  # {1, 2} and {3, 4, 5}
    assert not VoterSet.of_ids([1, 2]).overlaps_majority_with(VoterSet.of_ids([3, 4]))
    assert VoterSet.of_ids([1, 2, 3]).overlaps_majority_with(VoterSet.of_ids([1, 2]))


def test_history_gives_the_set_in_force_at_an_offset() -> None:
    initial, grown = VoterSet.of_ids([1, 2, 3]), VoterSet.of_ids([1, 2, 3, 4])
    h = VoterHistory(initial)
    assert h.latest is initial and h.at(0) is initial
    h.add_at(10, grown)
    assert h.at(9) is initial and h.at(10) is grown and h.latest is grown
    with pytest.raises(ValueError):
        h.add_at(10, initial)
    h.truncate_from(11)
    assert h.latest is grown
    h.truncate_from(10)  # the record that brought it is gone
    assert h.latest is initial and h.at(50) is initial
    h.truncate_from(0)  # the initial set (not from the log) stays
    assert h.latest is initial


def test_history_since_gives_the_set_in_force_then_and_every_later_one() -> None:
    a, b, c = VoterSet.of_ids([1, 2, 3]), VoterSet.of_ids([1, 2]), VoterSet.of_ids([2])
    history = VoterHistory(a)
    history.add_at(10, b)
    history.add_at(20, c)
    assert history.since(-1) == history.since(9) == [a, b, c]
    assert history.since(10) == history.since(19) == [b, c]
    assert history.since(25) == [c]
