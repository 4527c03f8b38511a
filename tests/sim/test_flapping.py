"""The simulator's flapping partitions: the lab nemesis's shapes (random halves, bridge, majorities
ring, the leader isolated) back to back, sized to the nodes' timeouts, and what they are for —
followers whose logs diverge from a new leader's and are cut by its DivergingEpoch."""

from __future__ import annotations

import itertools
import random

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.sim.cluster import SimParams, run
from kraftlab.node.sim.faults import FLAP_GAP_MS, flapping, schedule


def test_a_flapping_series_changes_shape_back_to_back_within_the_timeouts() -> None:
    config = RaftConfig()
    nodes = [1, 2, 3, 4, 5, 6]
    for seed in range(30):
        events, end, token = flapping(random.Random(seed), 1000, nodes, 60_000, 0, config)
        opened: dict[int, list[int]] = {}
        for e in events:
            if e.action in ("block", "isolate"):
                opened.setdefault(e.at, [])
        starts = sorted(opened)
        assert 2 <= len(starts) == token <= 4
        for a, b in itertools.pairwise(starts):
            gap = b - a - FLAP_GAP_MS
            assert config.fetch_timeout_ms <= gap <= config.fetch_timeout_ms + 2 * config.election_timeout_ms
        blocks = sorted((e.at, e.args) for e in events if e.action == "block")
        unblocks = sorted(e.args for e in events if e.action == "unblock")
        assert sorted(args for _, args in blocks) == unblocks, "every link blocked is unblocked"
        assert all(src != dst for _, (src, dst) in blocks)
        assert end > starts[-1]


def test_flapping_is_drawn_only_when_asked_for() -> None:
    plain = schedule(random.Random(3), ("partition", "crash"), [1, 2, 3], [4], 8000)
    assert plain == schedule(random.Random(3), ("partition", "crash"), [1, 2, 3], [4], 8000, RaftConfig())
    flaps = schedule(random.Random(3), ("flapping",), [1, 2, 3], [4], 8000)
    assert {e.action for e in flaps} <= {"block", "unblock", "isolate", "rejoin", "heal"}
    assert any(e.action != "heal" for e in flaps)


def test_flapping_makes_followers_diverge_and_every_invariant_holds() -> None:
    """Ten seeded runs of three voters and an observer under flapping alone (no snapshots, so a
    divergence is cut by a truncation, not covered by a snapshot): the invariants are checked after
    every event, and most runs see a follower's tail cut by a DivergingEpoch."""
    reached = 0
    for seed in range(1, 11):
        result = run(SimParams(seed=seed, voters=3, observers=1, faults=("flapping",), journal=True,
                               snapshot_every=0))
        reached += sum(result.truncations.values()) > 0
        assert set(result.truncations) <= {"epoch_present", "epoch_absent"}
    assert reached >= 4
