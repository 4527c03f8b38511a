"""The whole cluster in the deterministic simulator: 3 controllers + 3 brokers on the real Raft
core, with isolations and crashes of controllers and brokers and resignations of the active
controller (see node/sim/kraft.py for the checks); each faulty run's journals also judged by the
checkers of real runs (`metadata`: every committed record against KIP-631's rules, every node's
image against the replay; `fencing`: sessions, leases, epochs, ISRs)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from typing import Any

import pytest

import kraftlab.node.controller.cluster as cluster
import kraftlab.node.sim.kraft as kraft
from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.journal import journals_from
from kraftlab.checker.metadata.check import check_metadata
from kraftlab.node.broker import BrokerState
from kraftlab.node.bugs import BugSet
from kraftlab.node.controller.log_dirs import handle_offline_dirs
from kraftlab.node.controller.partitions import remove_broker
from kraftlab.node.controller.write import Write
from kraftlab.node.metadata.records import BrokerRegistrationChangeRecord
from kraftlab.node.sim.kraft import FAULT, KraftSim, SimViolation


def _judged(sim: KraftSim) -> dict[str, dict[str, Any]]:
    """The run's journals through the real runs' metadata and fencing checkers."""
    entries = sim.journal_dicts()
    return {"metadata": check_metadata(journals_from(entries, "sim")),
            "fencing": check_fencing(journals_from(entries, "sim"), session_timeout_ms=sim.session_timeout_ms)}


def _assert_journals_valid(sim: KraftSim) -> None:
    for name, res in _judged(sim).items():
        assert res["valid"] is True, (name, res["anomalies"][:3])


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
    assert sim.log_dirs.failures and sim.log_dirs.repairs, "no log directory failed and came back"
    assert sim.lives.pauses, "no broker's heartbeats stopped while it served"
    _assert_journals_valid(sim)


def test_lossy_network_with_duplicates_and_leadership_back_and_forth() -> None:
    sim = KraftSim(seed=4, lossy=True, raft_wire=True)  # every Raft message also read by Kafka's schema
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    assert sim.acked
    assert sim.led_again(), "no controller resigned and won again in the same process life"
    _assert_journals_valid(sim)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 40))
def test_faults_many_seeds(seed: int) -> None:
    sim = KraftSim(seed=seed, brokers=5, lossy=seed % 2 == 0, raft_wire=True)
    sim.run(fault_ms=20_000, settle_ms=20_000)
    sim.check_converged()
    _assert_journals_valid(sim)


class _ShortLeases(cluster.Leases):
    """Leases running out after a tenth of the session timeout (less than a heartbeat interval)."""

    def __init__(self, session_timeout_ms: int, journal_interval_ms: int) -> None:
        super().__init__(session_timeout_ms // 10, journal_interval_ms)


def test_a_controller_whose_leases_run_out_too_soon_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "Leases", _ShortLeases)
    sim = KraftSim(seed=3)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    assert "FencedWithLiveSession" in {a["type"] for a in _judged(sim)["fencing"]["anomalies"]}


def test_a_controller_that_forgets_the_leases_of_brokers_it_inherits_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    planted = functools.partial(kraft.ControllerConfig, bugs=BugSet.of("forget-leases-on-failover"))
    monkeypatch.setattr(kraft, "ControllerConfig", planted)
    with pytest.raises(SimViolation, match="holds no lease for unfenced brokers"):
        KraftSim(seed=1).run(fault_ms=15_000, settle_ms=15_000)


def test_dead_broker_fenced_within_session_timeout_plus_slack() -> None:
    sim = KraftSim(seed=5, fence_changes_per_tick=500)  # fenced in one tick
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
    lifecycle = sim.nodes[101].lifecycle
    assert lifecycle is not None and lifecycle.state == BrokerState.RUNNING


def _forgets_the_replicas(w: Write, broker_id: int, epoch: int, offline: Iterable[uuid.UUID]) -> list[str]:
    """A controller that records a broker's failed directories but leaves its replicas there leading
    and in their ISRs."""
    b = w.image.brokers[broker_id]
    online = tuple(d for d in b.log_dirs if d not in set(offline))
    if online != b.log_dirs:
        w.emit(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, log_dirs=online))
    return []


def test_a_controller_that_leaves_replicas_on_a_failed_directory_in_place_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "handle_offline_dirs", _forgets_the_replicas)
    with pytest.raises(SimViolation, match="on a failed log directory but lead or are in the ISR"):
        KraftSim(seed=2).run(fault_ms=15_000, settle_ms=15_000)


def test_a_controller_that_accepts_a_stale_broker_epoch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """An old life's heartbeat arrives after the broker registered again (seed 9 sends one)."""
    planted = functools.partial(kraft.ControllerConfig, bugs=BugSet.of("accept-stale-broker-epoch"))
    monkeypatch.setattr(kraft, "ControllerConfig", planted)
    sim = KraftSim(seed=9)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    assert sim.lives.stale_sent
    assert "StaleEpochAccepted" in {a["type"] for a in _judged(sim)["fencing"]["anomalies"]}


def test_a_controller_that_ignores_a_reported_offline_directory_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "handle_offline_dirs", lambda w, broker_id, epoch, offline: [])
    with pytest.raises(SimViolation, match="naming offline log directories"):
        KraftSim(seed=2).run(fault_ms=15_000, settle_ms=15_000)


def _moves_every_replica(w: Write, broker_id: int, epoch: int, offline: Iterable[uuid.UUID]) -> list[str]:
    """A controller that takes the broker out of every ISR and leadership, not only where its
    replica is on the failed directory."""
    remove_broker(w.image, broker_id, w.emit, unclean=w.config.unclean_leader_election)
    return handle_offline_dirs(w, broker_id, epoch, offline)


def test_a_controller_that_moves_replicas_on_healthy_directories_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "handle_offline_dirs", _moves_every_replica)
    with pytest.raises(SimViolation, match="on a healthy directory"):
        KraftSim(seed=2).run(fault_ms=15_000, settle_ms=15_000)
