"""The bug zoo on the whole-cluster simulation (node/sim/kraft.py: the real Raft core,
QuorumControllers and broker lifecycles over the simulated network) — the controller and broker bugs.

A `ZooKraftSim` plants a BugSet in every controller's and broker's config and adds what the
cluster simulation alone does not judge:
- the checkers of real runs over the simulated nodes' journals: checker.raft, checker.fencing
  (StaleEpochAccepted, FencedInIsr, EpochBumpedForSameIncarnation, SelfFencing, …),
  checker.metadata (the committed records replayed with KIP-631's rules, every image compared)
  and checker.forwarding;
- ServesWhileCutOff: a broker with no successful heartbeat for longer than its self-fence
  timeout (+ two application ticks) still accepts client requests; ServesReadsWhileCutOff: it
  still answers read-only requests, authorized by the ACLs of its last image;
- DeadBrokerUnfenced: a broker dead for longer than the session timeout plus a failover
  allowance is still unfenced in the active controller's image;
- Unrecovered: after the faults stop and the cluster settles, a live broker is not RUNNING;
The cluster simulation's own checks (identical images, no fenced broker in an ISR, acknowledged
topics kept, convergence) raise SimViolation.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.checker.journal import journals_from
from kraftlab.checker.run import journal_checks
from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.sim.kraft import APP_TICK_MS, FAULT, REPLY, RPC, BrokerState, KNode, KraftSim, SimViolation
from kraftlab.node.sim.zoo import SimOutcome

FAILOVER_ALLOWANCE_MS = 8_000


class ZooViolation(AssertionError):
    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


class ZooKraftSim(KraftSim):
    def __init__(self, seed: int, bugs: BugSet = NO_BUGS, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.bugs = bugs
        self.now = 0
        self.last_hb_ok: dict[int, int] = {}
        self.dead_since: dict[int, int] = {}
        self.last_sent: dict[tuple[int, int], Any] = {}  # (broker, incarnation) → its last heartbeat request

    def start(self, node: KNode, now: int) -> None:
        super().start(node, now)  # the Raft core journals `start`: a new process life for the checkers
        if node.ctrl is not None:
            node.ctrl.config = dataclasses.replace(node.ctrl.config, bugs=self.bugs)
        if node.lifecycle is not None:
            node.lifecycle.config = dataclasses.replace(node.lifecycle.config, bugs=self.bugs)
            self.last_hb_ok[node.node_id] = now
        self.dead_since.pop(node.node_id, None)

    def crash(self, node: KNode, now: int) -> None:
        super().crash(node, now)
        if not node.voter:
            self.dead_since[node.node_id] = now

    def _rpc(self, node: KNode, kind: str, token: int, request: Any, now: int) -> None:
        if kind == "hb" and hasattr(request, "broker_epoch") and request.broker_epoch >= 0:
            self.last_sent[(node.node_id, node.incarnation)] = request
        super()._rpc(node, kind, token, request, now)

    def _fault(self, payload: tuple[Any, ...], now: int) -> None:
        if payload[0] != "zombie-heartbeat":
            super()._fault(payload, now)
            return
        # A heartbeat of an earlier incarnation of the broker, delayed in the network past its
        # restart and re-registration, reaches the active controller.
        bid, inc = payload[1], payload[2]
        sent = self.last_sent.get((bid, inc))
        leaders = [n.node_id for n in self.nodes.values() if n.ctrl is not None and n.ctrl.active]
        if sent is not None and leaders:
            self._send(bid, leaders[0], RPC, (leaders[0], bid, inc, "hb", -1, sent), now)

    def step(self, now: int, kind: int, payload: Any, fault_ms: int) -> None:
        self.now = now
        if kind == REPLY:
            bid, binc, rkind, _token, response = payload
            node = self.nodes[bid]
            if rkind == "hb" and node.incarnation == binc and response.error_code == ErrorCode.none:
                self.last_hb_ok[bid] = now
        super().step(now, kind, payload, fault_ms)
        self._check_brokers(now)

    def _check_brokers(self, now: int) -> None:
        for bid in self.broker_ids:
            life = self.nodes[bid].lifecycle
            if life is None or not life.serving_reads():
                continue
            limit = life.config.effective_self_fence_timeout_ms + 2 * APP_TICK_MS
            if now - self.last_hb_ok[bid] > limit:
                name, what = (("ServesWhileCutOff", "serves") if life.accepting_client_requests()
                              else ("ServesReadsWhileCutOff", "answers reads (authorized by its last ACLs)"))
                raise ZooViolation(name, f"broker {bid} {what} {now - self.last_hb_ok[bid]} ms "
                                         f"after its last heartbeat (self-fence after {limit} ms)")
        active = [n for n in self.nodes.values() if n.ctrl is not None and n.ctrl.active]
        for bid, since in self.dead_since.items():
            if now - since <= self.session_timeout_ms + FAILOVER_ALLOWANCE_MS:
                continue
            for n in active:
                reg = n.ctrl.committed_image.brokers.get(bid)  # type: ignore[union-attr]  # active ones have a ctrl
                if reg is not None and not reg.fenced:
                    raise ZooViolation("DeadBrokerUnfenced", f"broker {bid} dead since t={since} is unfenced "
                                                             f"at t={now} on active controller {n.node_id}")

    def check_recovered(self) -> None:
        """Once faults stop and the cluster settles, every live broker is back to RUNNING."""
        for bid in self.broker_ids:
            life = self.nodes[bid].lifecycle
            if life is not None and life.state != BrokerState.RUNNING:
                raise ZooViolation("Unrecovered", f"broker {bid} is {life.state.name} at t={self.now} after the faults "
                                                  "stopped and the cluster settled")

    def check_journals(self) -> None:
        """The checkers that judge a real run's journals (checker.run.journal_checks: Raft,
        fencing, metadata, forwarding) over the simulated nodes' journals."""
        journals = journals_from(self.journal_dicts(), f"kraft-sim seed {self.seed}")
        for name, check in journal_checks(journals, None, self.session_timeout_ms, 2_000).items():
            verdict = check()
            if verdict["valid"] is not True:
                names = sorted({a["type"] for a in verdict.get("anomalies", [])}) or ["unknown"]
                raise ZooViolation(f"checker.{name}:" + ",".join(names), str(verdict.get("explanation"))[:300])


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterScenario:
    fault_ms: int = 15_000
    settle_ms: int = 10_000
    lossy: bool = False
    scripted: tuple[tuple[int, tuple[Any, ...]], ...] = ()
    """Extra fault events (at, payload) as node.sim.kraft FAULT events."""


_ZOMBIE_HEARTBEAT = ((5_000, ("crash", 9001, 102)), (6_000, ("undo-crash", 9001)),
                     (9_000, ("zombie-heartbeat", 102, 1)), (12_000, ("zombie-heartbeat", 102, 1)))
_DEAD_BROKER_AND_FAILOVER = ((6_000, ("crash", 9001, 102)), (6_200, ("crash", 9002, "leader")),
                             (8_000, ("undo-crash", 9002)))

CLUSTER_SCENARIOS: dict[str, ClusterScenario] = {
    "respond-before-commit": ClusterScenario(),
    "no-revert-on-resign": ClusterScenario(),
    "accept-stale-broker-epoch": ClusterScenario(scripted=_ZOMBIE_HEARTBEAT),
    "reregister-bumps-epoch": ClusterScenario(lossy=True),
    "fenced-stays-in-isr": ClusterScenario(),
    "forget-leases-on-failover": ClusterScenario(fault_ms=20_000, scripted=_DEAD_BROKER_AND_FAILOVER),
    "no-self-fencing": ClusterScenario(),
    "stale-acls-while-fenced": ClusterScenario(),
    "stuck-in-recovery": ClusterScenario(),
    "trust-unclean-return": ClusterScenario(),  # the simulation's own check: crashed brokers come back untrusted
}


def run_cluster_once(bug: str | None, seed: int, scenario: ClusterScenario) -> SimOutcome:
    bugs = BugSet.of(bug) if bug else NO_BUGS
    sim = ZooKraftSim(seed, bugs, lossy=scenario.lossy)
    for at, payload in scenario.scripted:
        sim.queue.push(at, FAULT, payload)
    started = time.perf_counter()
    caught: str | None = None
    detail = ""
    try:
        sim.run(fault_ms=scenario.fault_ms, settle_ms=scenario.settle_ms, faults=not scenario.scripted)
        sim.check_journals()
        sim.check_converged()
        sim.check_recovered()
    except ZooViolation as e:
        caught, detail = e.name, str(e)
    except SimViolation as e:
        caught, detail = "kraft_sim", str(e)
    except (AssertionError, ValueError, KeyError) as e:
        caught, detail = f"NodeStopped:{type(e).__name__}", str(e)
    return SimOutcome(bug, seed, caught, detail, sim.now, time.perf_counter() - started)


def hunt_cluster(bug: str, first_seed: int = 0, max_seeds: int = 10) -> SimOutcome:
    scenario = CLUSTER_SCENARIOS[bug]
    outcome = run_cluster_once(bug, first_seed, scenario)
    for seed in range(first_seed + 1, first_seed + max_seeds):
        if outcome.caught_by is not None:
            break
        outcome = run_cluster_once(bug, seed, scenario)
    return outcome
