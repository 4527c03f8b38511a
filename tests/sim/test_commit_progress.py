"""CommitProgress (node.sim.commit_progress): with the faults healed, the real core commits what its
leader appends within the bound the configuration gives over many seeds, and a leader that answers
the Fetches it holds on only every other batch it writes (safe, but slow) is caught."""

from __future__ import annotations

from typing import Any

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import Batch
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.commit_progress import commit_bound_ms
from kraftlab.node.sim.invariants import InvariantViolation


def params(seed: int) -> SimParams:
    return SimParams(
        seed=seed,
        voters=3 + 2 * (seed % 2),
        faults=("crash", "partition"),
        flush_delay_ms=5 * (seed % 4),
        fault_ms=4_000,
        settle_ms=6_000,
    )


def test_the_bound_counts_the_flush_and_two_round_trips() -> None:
    assert commit_bound_ms(RaftConfig(), 0, 5) == 21
    assert commit_bound_ms(RaftConfig(), 15, 5) == 36


def test_the_real_core_commits_within_the_bound() -> None:
    simulations = [Simulation(params(seed)) for seed in range(6)]
    for simulation in simulations:
        simulation.run()
    progress = [s.progress for s in simulations]
    assert all(p.judged > 20 for p in progress)  # appends after the heal were judged
    assert all(p.worst_ms <= p.bound for p in progress)


class AnswersHeldFetchesEveryOtherAppend(RaftCore):
    """A leader that answers the Fetches it holds on every other batch it writes only (the others
    wait for the next batch, or their wait): safe, but commits lag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batches = 0

    def _complete_parked(self, state: Leader) -> None:
        if self._writing:
            self._batches += 1
            if self._batches % 2:
                return
        super()._complete_parked(state)

    def _write_batch(self, state: Leader, batch: Batch, now: int) -> None:
        self._writing = True
        try:
            super()._write_batch(state, batch, now)
        finally:
            self._writing = False

    _writing = False


def test_a_leader_slow_to_answer_held_fetches_is_caught() -> None:
    found = None
    for seed in range(4):
        try:
            Simulation(params(seed), core_class=AnswersHeldFetchesEveryOtherAppend).run()
        except InvariantViolation as exc:
            found = exc
            break
    assert found is not None and found.name == "CommitProgress", found
