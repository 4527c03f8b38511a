"""The check-quorum bounds the simulator judges (node.sim.timing_rules): they hold for the real
core over many seeds, and a core whose leader counts the wrong voters' fetches is caught — one
resigning while a majority still fetches, one leading on without a majority's fetches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import EpochState, Leader, Prospective
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.timing_rules import check_quorum_timeout_ms

Pick = Callable[[list[int]], int]


def core_whose_leader_picks(pick: Pick) -> type[RaftCore]:
    """A core whose leader's check-quorum deadline is `pick` of its voters' latest fetch times
    (newest first, its own "now" among them) plus the timeout, instead of the majority-th."""

    class WrongLeader(Leader):
        __slots__ = ()

        def check_quorum_deadline(self, now: int, timeout: int) -> int:
            times = [now if v == self.local_id else p.last_fetch_ms for v, p in self.voters.items()]
            times.sort(reverse=True)
            return pick(times) + timeout

    class Core(RaftCore):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._polls[WrongLeader] = self._poll_leader

        def _set_state(self, state: EpochState, now: int) -> None:
            if type(state) is Leader:
                state.__class__ = WrongLeader
            super()._set_state(state, now)

    return Core


def first_violation(core_class: type[RaftCore], seeds: range) -> InvariantViolation | None:
    faults = ("flapping", "partition")
    runs = (SimParams(seed=s, voters=5, faults=faults, fault_ms=20_000, settle_ms=6_000) for s in seeds)
    return first_violation_of(core_class, runs)


def test_the_timeout_is_kafkas_factor_of_the_fetch_timeout() -> None:
    assert check_quorum_timeout_ms(2000) == 3000
    assert check_quorum_timeout_ms(1001) == 1501


def test_the_real_core_keeps_both_bounds() -> None:
    assert first_violation(RaftCore, range(6)) is None


@pytest.mark.parametrize(
    ("pick", "rule"),
    [
        (lambda times: times[-1], "CheckQuorumEarly"),  # every voter must fetch, not a majority
        (lambda times: times[1], "CheckQuorumResigns"),  # one other voter is taken for a majority of five
    ],
    ids=["all-voters", "one-voter"],
)
def test_a_leader_counting_the_wrong_voters_is_caught(pick: Pick, rule: str) -> None:
    found = first_violation(core_whose_leader_picks(pick), range(10))
    assert found is not None and found.name == rule, found


class AsksLongAfterItsBackoff(RaftCore):
    """Draws its election backoff right, but asks for pre-votes only three maximum backoffs after
    the round's start (the draw alone is judged by BackoffGrowth; this is when it asks)."""

    def _poll_prospective(self, state: Prospective, now: int) -> None:
        if state.send_at <= now < min(state.deadline, state.send_at + 3 * self.config.election_backoff_max_ms):
            return
        super()._poll_prospective(state, now)


def test_a_backoff_past_its_maximum_is_caught() -> None:
    found = first_violation(AsksLongAfterItsBackoff, range(10))
    assert found is not None and found.name == "ElectionBackoff", found
