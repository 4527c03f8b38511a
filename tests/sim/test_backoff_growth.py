"""The election backoff's growth (node.sim.backoff_growth): it holds for the real core over seeds
with faults, and cores whose backoff grows too fast or too slowly, never grows, shrinks, waits too
long after a rejected candidacy or keeps its count across a later epoch are caught."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.states import Candidate, EpochState, Prospective
from kraftlab.node.sim.backoff_growth import BackoffGrowth
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation

QUICK = RaftConfig(election_timeout_ms=200, fetch_timeout_ms=400)
"""Short election timeouts: a voter cut off from the quorum fails many rounds in a row within a
fault window (the backoff's base and maximum stay Kafka's)."""


def first_violation(core_class: type[RaftCore], seeds: range, **params: Any) -> InvariantViolation | None:
    runs = (
        SimParams(seed=seed, **{"voters": 3, "faults": ("partition", "flapping"), "fault_ms": 8_000, **params})
        for seed in seeds
    )
    return first_violation_of(core_class, runs, QUICK)


def test_the_real_core_grows_its_backoff_as_kafka_does() -> None:
    assert first_violation(RaftCore, range(4)) is None
    assert first_violation(RaftCore, range(2), voters=5, faults=("crash", "drop", "partition")) is None


# ---------------------------------------------------------------- wrong cores


def _uniform(core: RaftCore, bound: int) -> int:
    return core.rng.randrange(0, min(core.config.election_backoff_max_ms, bound) + 1)


class GrowsTooFast(RaftCore):
    """Doubles once more than it should: after one failure it may wait four retry backoffs."""

    def _backoff(self) -> int:
        return _uniform(self, self.config.retry_backoff_ms << (self._failures + 1))


class NeverGrows(RaftCore):
    """Draws every backoff from the first failure's range whatever the count."""

    def _backoff(self) -> int:
        return _uniform(self, self.config.retry_backoff_ms)


class Shrinks(RaftCore):
    """Halves the range with each failure instead of doubling it."""

    def _backoff(self) -> int:
        return _uniform(self, self.config.retry_backoff_ms >> min(self._failures, 20))


class GrowsHalfAsFast(RaftCore):
    """Leaves one failure uncounted: after k failures it draws from the range of k - 1."""

    def _backoff(self) -> int:
        return _uniform(self, self.config.retry_backoff_ms << max(self._failures - 1, 0))


class RejectedCandidateWaitsLong(RaftCore):
    """A Candidate its voters rejected backs off as though two more rounds had failed."""

    def _round_lost(self, state: Prospective | Candidate, now: int) -> None:
        extra = 2 if isinstance(state, Candidate) else 0
        self._failures += extra
        try:
            super()._round_lost(state, now)
        finally:
            self._failures -= extra


class KeepsItsCount(RaftCore):
    """Never starts the count afresh: a follower's or a leader's next failed round backs off as
    though every earlier failure were still in a row."""

    def _set_state(self, state: EpochState, now: int) -> None:
        failures = self._failures
        super()._set_state(state, now)
        self._failures = failures


@pytest.mark.parametrize(
    ("core_class", "voters"),
    [
        (GrowsTooFast, 3),
        (NeverGrows, 3),
        (Shrinks, 3),
        (GrowsHalfAsFast, 3),
        (RejectedCandidateWaitsLong, 5),  # five voters split their first votes
        (KeepsItsCount, 3),
    ],
)
def test_a_wrong_backoff_growth_is_caught(core_class: type[RaftCore], voters: int) -> None:
    found = first_violation(core_class, range(6), voters=voters)
    assert found is not None and found.name == "BackoffGrowth", found


def _judged(draw: Callable[[int], int], max_ms: int = 1000) -> list[str]:
    """What the rule says of 29 draws in a row, one after each failed round (`draw` from the cap)."""
    details: list[str] = []
    rule = BackoffGrowth(20, max_ms, lambda name, detail: details.append(detail))
    for failed in range(1, 30):
        rule._drawn(1, failed, draw(rule.cap(failed)), failed)
    return details


def test_the_growth_judges_uniform_draws_rarely_and_slow_ones_always() -> None:
    """Uniform draws (a fixed seed) pass; draws that stay within the base, or in the lower half of
    their ranges, fail once a correct backoff would have done so with probability below 1e-6."""
    rng = random.Random(11)
    for max_ms in (1000, 1 << 40):
        assert _judged(lambda cap: rng.randrange(0, cap + 1), max_ms) == []
    assert "the base 20 ms" in _judged(lambda cap: rng.randrange(0, 21))[0]
    # Below the maximum only (at it, a slower backoff reaches the same cap): a maximum never reached.
    assert "lower half" in _judged(lambda cap: rng.randrange(0, cap // 2 + 1), 1 << 40)[0]
