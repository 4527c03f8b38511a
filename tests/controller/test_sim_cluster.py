"""The whole cluster in the deterministic simulator: 3 controllers + 3 brokers on the real Raft
core, with isolations and crashes of controllers and brokers (see node/sim/kraft.py for the checks)."""

from __future__ import annotations

import pytest

from kraftlab.node.broker import BrokerState
from kraftlab.node.sim.kraft import FAULT, KraftSim


def test_quiet_cluster_all_brokers_unfenced_quickly() -> None:
    sim = KraftSim(seed=1)
    sim.run(fault_ms=0, settle_ms=12_000, faults=False)
    sim.check_converged()
    assert len(sim.acked) > 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_faults_lose_no_acknowledged_metadata_and_converge(seed: int) -> None:
    sim = KraftSim(seed=seed)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    assert sim.acked, "no topic was ever acknowledged"


def test_lossy_network_with_duplicates() -> None:
    sim = KraftSim(seed=4, lossy=True)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    assert sim.acked


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 40))
def test_faults_many_seeds(seed: int) -> None:
    sim = KraftSim(seed=seed, brokers=5, lossy=seed % 2 == 0)
    sim.run(fault_ms=20_000, settle_ms=20_000)
    sim.check_converged()


def test_dead_broker_fenced_within_session_timeout_plus_slack() -> None:
    sim = KraftSim(seed=5)
    sim.queue.push(6_000, FAULT, ("crash", 1, 102))
    sim.run(fault_ms=0, settle_ms=12_000, faults=False)
    crashed_at = sim.crashed_brokers[102]
    fenced = [t for t, f in sim.fence_events if f["broker"] == 102 and f["action"] == "fence"]
    assert fenced, "the dead broker was never fenced"
    # its last heartbeat was at most one interval before the crash
    assert fenced[0] - crashed_at <= sim.session_timeout_ms + 2 * 50  # + two controller ticks
    assert fenced[0] - crashed_at >= sim.session_timeout_ms - sim.heartbeat_interval_ms
    image = sim.nodes[1].image()[1]
    assert image.brokers[102].fenced
    assert all(p.leader != 102 and 102 not in p.isr for _, _, p in image.partitions())
    assert sim.nodes[101].lifecycle.state == BrokerState.RUNNING
