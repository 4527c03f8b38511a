"""Journal honesty of the deferred leader flush: every `hw` a leader journals is backed by durable ends
a majority of voters journalled before it (`flush`), the leader's own included, even when the leader's
log reports a flush as done before the driver told the core (`flushed`)."""

from __future__ import annotations

from typing import Any

import pytest
from sim_journal import Journal, run_recording

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.memory import MemoryLog


class _FlushedAheadOfReport:
    """A log made durable as soon as it is appended to, while the core hears of it only later
    (`flushed`): as if the flush thread finished every fsync before the driver's `flushed` step."""

    def __init__(self, log: MemoryLog) -> None:
        self._log = log

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)

    def append(self, batches: Any) -> None:
        self._log.append(batches)
        self._log.flush()


class EagerFlushLog(RaftCore):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.log = _FlushedAheadOfReport(self.log)  # type: ignore[assignment, arg-type]


def journal_of(params: SimParams, core_class: type[RaftCore] = RaftCore) -> Journal:
    return run_recording(Simulation(params, core_class=core_class))


def unbacked_leader_hws(seen: Journal, voters: list[int]) -> list[tuple[int, int, int, dict[int, int]]]:
    """The rule: when a leader journals `hw` H, the journalled durable ends of a majority of voters,
    the leader's own counted, are >= H. A node's journalled durable end is its last `flush.end`, its
    log end at `start` (recovery keeps only the durable log), cut to `truncate.to` by a truncation (a
    snapshot truncation sets it: the snapshot is durable). The simulator's journal is in one global
    order, so "before" is well defined across nodes. Returns (time, leader, hw, durable ends) of each
    `hw` that breaks it."""
    durable: dict[int, int] = {}
    leading: dict[int, bool] = {}
    majority = len(voters) // 2 + 1
    broken = []
    for now, node, e in seen:
        ev = e["ev"]
        if ev == "flush":
            durable[node] = e["end"]
        elif ev == "start":
            durable[node] = e["log_end"]
            leading[node] = False
        elif ev == "truncate":
            durable[node] = e["to"] if e["reason"] == "snapshot" else min(durable.get(node, 0), e["to"])
        elif ev == "role":
            leading[node] = e["role"] == "leader"
        elif ev == "hw" and leading.get(node):
            ends = sorted((durable.get(v, 0) for v in voters), reverse=True)
            if e["hw"] > ends[majority - 1]:
                broken.append((now, node, e["hw"], {v: durable.get(v, 0) for v in voters}))
    return broken


@pytest.mark.parametrize("core_class", [RaftCore, EagerFlushLog], ids=["flush-reported", "flush-ahead-of-report"])
@pytest.mark.parametrize("seed", range(3))
def test_every_leader_hw_is_backed_by_a_majority_of_journalled_flushes(core_class: type[RaftCore], seed: int) -> None:
    params = SimParams(
        seed=seed, voters=3, observers=1, faults=("crash", "partition"), flush_delay_ms=20, journal=True,
        fault_ms=5000, settle_ms=6000,
    )
    seen = journal_of(params, core_class)
    hws = [e for _, _, e in seen if e["ev"] == "hw"]
    assert len(hws) > 20 and any(e["ev"] == "flush" for _, _, e in seen)
    assert unbacked_leader_hws(seen, [1, 2, 3]) == [], params.replay_command()


def test_the_rule_catches_a_leader_counting_an_unreported_flush() -> None:
    """The check can fail: a leader that counts its log's flushed end (not the flushes reported to it)
    journals an HW ahead of its own `flush` event."""

    class CountsLogFlushedEnd(EagerFlushLog):
        def _durable_end(self) -> int:
            return self.log.flushed_end_offset()

    params = SimParams(seed=1, voters=3, faults=(), flush_delay_ms=20, journal=True, fault_ms=2000, settle_ms=4000)
    assert unbacked_leader_hws(journal_of(params, CountsLogFlushedEnd), [1, 2, 3])
