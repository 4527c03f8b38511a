"""The simulators' metadata log retention: drawn per seed (none or small), and a log kept behind
snapshots keeps every invariant the simulator checks after each event."""

from __future__ import annotations

from sim_journal import run_recording

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.retention import UNLIMITED, RetentionPolicy
from kraftlab.node.sim.cluster import InvariantViolation, SimParams, Simulation, run
from kraftlab.node.sim.retention import SMALL_BYTES, drawn_retention


def test_retention_is_drawn_per_seed() -> None:
    drawn = [drawn_retention(seed) for seed in range(1, 41)]
    assert {r.max_bytes for r in drawn} == {0, SMALL_BYTES} and {r.max_ms for r in drawn} == {UNLIMITED}
    assert drawn == [drawn_retention(seed) for seed in range(1, 41)]
    assert [SimParams(seed=s).retention() for s in range(1, 41)] == drawn
    assert SimParams(seed=1, retention_bytes=7).retention() == RetentionPolicy(7, UNLIMITED)
    assert SimParams(seed=1, retention_bytes=7).replay_command().endswith(" --retention-bytes 7")
    assert "--retention-bytes" not in SimParams(seed=1).replay_command()  # drawn again from the seed


def test_a_log_kept_behind_snapshots_keeps_every_invariant() -> None:
    kept = 0
    for seed in range(1, 4):
        sim = Simulation(
            SimParams(seed=seed, voters=3, observers=1, faults=("crash", "partition"), journal=True,
                      retention_bytes=SMALL_BYTES)
        )  # fmt: skip
        seen = run_recording(sim)  # every invariant checked after every event
        created: dict[int, int] = {}
        for _, node, event in seen:
            if event["ev"] == "snapshot" and event["action"] == "create":
                created[node] = event["offset"]
            elif event["ev"] == "retention":
                assert event["from"] < event["log_start"] <= created[node]
                kept += event["log_start"] < created[node]
    assert kept  # segments behind the latest snapshot were kept, not deleted with it


class NoDivergingEpoch(RaftCore):
    """The leader's Fetch validation never answers a DivergingEpoch (below its log start it still
    sends the snapshot): a follower keeps its divergent tail."""

    def _validate_fetch(self, offset: int, last_epoch: int) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
        return None, super()._validate_fetch(offset, last_epoch)[1]


def test_a_leader_that_never_answers_a_diverging_epoch_is_caught_with_the_log_kept() -> None:
    for seed in range(20):
        params = SimParams(seed=seed, voters=3, observers=1, faults=("crash", "partition"), retention_bytes=SMALL_BYTES)
        try:
            run(params, core_class=NoDivergingEpoch)
        except InvariantViolation as exc:
            assert exc.name == "ConsistentCommittedData"  # the kept divergent tail applied as committed
            return
    raise AssertionError("no seed of 0..19 caught a leader that never answers a diverging epoch")
