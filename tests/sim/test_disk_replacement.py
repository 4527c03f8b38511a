"""The membership simulator's administrator replaces a voter's disk only in a settled quorum.

Replacing a disk loses it for good: no heal brings it back. An operator does it after checking
the quorum at its leader (DescribeQuorum): every voter follows the leader's epoch and holds its
high-water mark. The simulator once took an isolated leader that no other voter had followed yet
for a settled quorum and replaced that leader's disk: its epoch's entries then lived only on
observers, while another voter held an uncommitted tail naming a larger voter set — every election
was refused by the replicas' Kafka answers (log behind, another directory id) and the run ended
without a leader, which no correct node can avoid. These tests judge every replacement by what
the other voters' disks hold at that moment, and show a lax precondition caught.
"""

from __future__ import annotations

from typing import Any

import pytest

from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.cluster import LivenessViolation, SimNode, SimParams
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation

MEMBERSHIP_FAULTS = ("crash", "partition", "drop", "delay", "duplicate", "oneway")


def _params(seed: int) -> MembershipParams:
    """The membership seeds of the reference bench (bench/bench_raft_reference.py)."""
    faults = MEMBERSHIP_FAULTS[: 1 + seed % len(MEMBERSHIP_FAULTS)]
    return MembershipParams(
        SimParams(seed=seed, voters=5, faults=faults, flush_delay_ms=(seed % 3) * 15), initial=1 + seed % 3
    )


class Watched(MembershipSimulation):
    """Records, at every disk replacement made while a leader leads, the voters of its set whose
    disks hold no entry of the leader's epoch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replacements: list[tuple[int, int, list[int]]] = []
        """(replaced node, leader, voters without the leader's epoch) per replacement."""

    def crash_node(self, node: SimNode, wipe: bool) -> None:
        leader = self._leader()
        if wipe and leader is not None and leader.core is not None and isinstance(leader.core.state, Leader):
            epoch = leader.core.epoch
            behind = [
                v for v in leader.core.voter_set if v != leader.node_id and self.nodes[v].log.last_epoch() < epoch
            ]
            self.replacements.append((node.node_id, leader.node_id, behind))
        super().crash_node(node, wipe)


def test_a_disk_is_replaced_only_when_every_voter_follows_the_leaders_epoch() -> None:
    replacements = []
    for seed in (2, 15, 16, 77):  # 2, 15, 16 replace disks (the leader's own on 15)
        sim = Watched(_params(seed))
        sim.run()  # seed 77 ended without a leader when the leader's disk was replaced unfollowed
        assert sim.result.leader_after_heal_ms is not None, seed
        assert all(not behind for _, _, behind in sim.replacements), (seed, sim.replacements)
        replacements += sim.replacements
    assert len(replacements) >= 4


def test_a_lax_precondition_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The administrator's old check (a leader, no change in flight, every voter process up) lets
    seed 77 replace the disk of a leader no other voter has followed; no leader is elected after."""

    def lax(self: MembershipSimulation, leader: SimNode, now: int) -> bool:
        core = leader.core
        assert core is not None
        return (
            isinstance(core.state, Leader)
            and core.state.voter_change is None
            and core.control.last_change_offset() < core.high_watermark
            and all(self.nodes[v].raft is not None for v in core.voter_set)
        )

    monkeypatch.setattr(MembershipSimulation, "_settled", lax)
    sim = Watched(_params(77))
    with pytest.raises(LivenessViolation):  # and the run ends without a leader
        sim.run()
    assert any(behind for _, _, behind in sim.replacements), sim.replacements
