"""The bug zoo in the deterministic simulator: run the real Raft core with one planted bug
(node.bugs) under the faults most likely to expose it, and report what caught it.

A hunt tries seeds in order until a run is caught, within a bound on seeds; a clean control run
(no bug) with the same faults must be caught by nothing. What counts as "caught":

- a safety invariant of node.sim.invariants (SingleLeader, MonotonicHighWatermark, …);
- StaleLeader (this module): a leader that has heard from no majority for twice the check-quorum
  timeout is still leader (brokers would keep following a deposed controller);
- the node stopping itself (RaftSafetyError, or the state machine refusing a misaligned commit):
  a real node would exit, which an end-to-end run sees as a crash.

Two storage faults exist only here, because only the zoo needs them: `torn` (a crash that also
loses the last batch the leader wrote — the page cache KAFKA-10527 is about) and, with
quorum-state-no-fsync, a quorum-state store whose last write is lost by a crash.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kraftlab.node.bugs import BY_NAME, NO_BUGS, BugSet
from kraftlab.node.raft.core import RaftCore, RaftSafetyError, core_class_with
from kraftlab.node.raft.ports import QuorumStateData
from kraftlab.node.raft.states import Leader, majority
from kraftlab.node.sim.cluster import LivenessViolation, SimNode, SimParams, Simulation
from kraftlab.node.sim.faults import FaultEvent
from kraftlab.node.sim.invariants import CheckedNode, Invariants, InvariantViolation
from kraftlab.node.sim.memory import MemoryQuorumStateStore


@dataclass(frozen=True, slots=True)
class Scenario:
    """How to hunt one bug: the random faults, and the zoo-only storage faults."""

    faults: tuple[str, ...] = ("partition", "crash")
    torn_crashes: bool = False
    fault_ms: int = 8_000
    settle_ms: int = 6_000
    snapshot_every: int = 25


RAFT_SCENARIOS: dict[str, Scenario] = {
    "hw-before-leader-change": Scenario(("partition", "crash", "delay")),
    "resume-old-epoch": Scenario((), torn_crashes=True),
    "ack-before-fsync": Scenario(("crash",)),
    # 16 s of crashes: since crashed peers refuse requests at once, elections end sooner and the
    # windows (an epoch learnt but not yet in the log) are shorter; 8 s needed up to ~120 seeds.
    "quorum-state-no-fsync": Scenario(("crash", "delay"), fault_ms=16_000),
    "no-check-quorum": Scenario(("partition",)),
    "vote-without-log-check": Scenario(("partition", "crash")),
    "hw-before-truncate": Scenario(("partition", "crash")),
    "snapshot-id-off-by-one": Scenario(("partition", "crash"), snapshot_every=10),
}
"""Bugs whose switch lives in the Raft core (or, for quorum-state-no-fsync, in its storage)."""


@dataclass(frozen=True, slots=True)
class SimOutcome:
    bug: str | None
    seed: int
    caught_by: str | None
    detail: str
    sim_ms: int
    """Simulated time at which it was caught (or the run's end)."""
    wall_s: float


class UnsyncedQuorumStateStore(MemoryQuorumStateStore):
    """quorum-state-no-fsync in the simulator: the file is renamed into place before it is
    synced, so a crash returns the state before the last write."""

    def __init__(self) -> None:
        super().__init__()
        self._durable: QuorumStateData | None = None

    def write(self, state: QuorumStateData) -> None:
        self._durable = self.state
        super().write(state)

    def crash(self) -> None:
        self.state = self._durable


class ZooInvariants(Invariants):
    """The simulator's invariants plus StaleLeader."""

    def __init__(self, voters: list[int], stale_after_ms: int) -> None:
        super().__init__(voters)
        self.stale_after_ms = stale_after_ms

    def check_node(self, node: CheckedNode, nodes: Mapping[int, CheckedNode]) -> None:
        super().check_node(node, nodes)
        core = node.core
        if core is None or not isinstance(core.state, Leader) or len(self.voters) < 2:
            return
        fetches = sorted((p.last_fetch_ms for v, p in core.state.voters.items() if v != node.node_id), reverse=True)
        heard = fetches[majority(len(self.voters)) - 2] if majority(len(self.voters)) > 1 else self.now
        if self.now - heard > self.stale_after_ms:
            self.fail("StaleLeader", f"node {node.node_id} still leads epoch {core.epoch}; no majority since t={heard}")


class ZooSimulation(Simulation):
    def __init__(self, params: SimParams, scenario: Scenario, core_class: type[RaftCore]) -> None:
        faults = _torn_schedule(random.Random(params.seed ^ 0x7A00), params.fault_ms) if scenario.torn_crashes else None
        super().__init__(params, core_class=core_class, faults=faults)
        self.invariants = ZooInvariants(self.voter_ids, 2 * self.config.check_quorum_timeout_ms)
        if core_class.bugs.on("quorum-state-no-fsync"):  # the switch lives in storage: model the store
            for node in self.nodes.values():
                node.quorum = UnsyncedQuorumStateStore()

    def crash_node(self, node: SimNode, wipe: bool) -> None:
        if isinstance(node.quorum, UnsyncedQuorumStateStore):
            node.quorum.crash()
        super().crash_node(node, wipe)

    def _fault(self, event: FaultEvent, now: int) -> None:
        if event.action != "torn":
            super()._fault(event, now)
            return
        node = self._leader()
        if node is None or node.raft is None:
            return
        self.crash_node(node, wipe=False)
        batches = node.log.batches()
        if batches and batches[-1].base_offset >= node.log.start_offset():
            node.log.truncate_to(batches[-1].base_offset)  # the last write never reached the disk
        self.invariants.restarted(node.node_id, wiped=False)
        self._tokens[event.args[1]] = node.node_id


def _torn_schedule(rng: random.Random, duration_ms: int) -> list[FaultEvent]:
    """Leader crashes that lose the leader's last write, each restarted quickly."""
    events: list[FaultEvent] = []
    t, token = 0, 10_000
    while True:
        t += rng.randint(300, 1500)
        if t >= duration_ms:
            return events
        token += 1
        back = t + rng.randint(1, 50)
        events += [FaultEvent(t, "torn", ("leader", token)), FaultEvent(back, "restart", ("leader", token))]


def params_for(scenario: Scenario, seed: int) -> SimParams:
    return SimParams(
        seed=seed,
        faults=scenario.faults,
        fault_ms=scenario.fault_ms,
        settle_ms=scenario.settle_ms,
        snapshot_every=scenario.snapshot_every,
        journal=True,  # as a real node: every step's journal judged too (node.sim.journal_truth)
    )


def run_once(bug: str | None, seed: int, scenario: Scenario | None = None) -> SimOutcome:
    """One seeded run of the cluster with `bug` planted (None: the clean control)."""
    if scenario is None:
        if bug is None:
            raise ValueError("a control run needs the scenario it controls")
        scenario = RAFT_SCENARIOS[bug]
    bugs = BugSet.of(bug) if bug else NO_BUGS
    return judge(bug, seed, ZooSimulation(params_for(scenario, seed), scenario, core_class_with(bugs)))


def judge(bug: str | None, seed: int, sim: Simulation) -> SimOutcome:
    """Run `sim` to its end or to the first thing that catches it."""
    started = time.perf_counter()
    caught: str | None = None
    detail = ""
    try:
        sim.run()
    except InvariantViolation as e:
        caught, detail = e.name, str(e)
    except LivenessViolation as e:
        caught, detail = "Liveness", str(e)
    except (RaftSafetyError, ValueError) as e:
        caught, detail = f"NodeStopped:{type(e).__name__}", str(e)
    return SimOutcome(bug, seed, caught, detail, sim.invariants.now, time.perf_counter() - started)


def hunt(
    bug: str, first_seed: int = 0, max_seeds: int = 40, run: Callable[[str, int], SimOutcome] | None = None
) -> SimOutcome:
    """Seeds `first_seed`, `first_seed + 1`, … of `run` (default: `run_once`) until the bug is
    caught; the last outcome otherwise."""
    if bug not in BY_NAME:
        raise ValueError(f"unknown bug {bug!r}")
    run_seed = run or run_once
    outcome = run_seed(bug, first_seed)
    for seed in range(first_seed + 1, first_seed + max_seeds):
        if outcome.caught_by is not None:
            break
        outcome = run_seed(bug, seed)
    return outcome


__all__ = ["RAFT_SCENARIOS", "Scenario", "SimOutcome", "hunt", "judge", "run_once"]
