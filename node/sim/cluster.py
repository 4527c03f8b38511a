"""The deterministic simulation of a Raft cluster: the real core over in-memory storage, a
seeded scheduler and a simulated network, with faults, a client appending records, optionally a
rogue client sending requests every node must refuse (`node.sim.rogue`), and the safety
invariants checked after every event — the leader's DescribeQuorum answer judged against the
deliveries the simulator made (`node.sim.quorum_view`), and KIP-595's check-quorum and election
backoff bounds judged after every step (`node.sim.timing_rules`), every timer of the core judged
when it falls due (`node.sim.timer_rules`), every request answered in its bound and every
response true to its sender (`node.sim.response_rules`), every durable claim and restart true to the
simulated disks (`node.sim.durability`), every node's kraft.version, voter set and control batches
as Kafka reads its log (`node.sim.control_log`); liveness is checked once the faults are healed.

A run is a pure function of its `SimParams`: `SimParams.replay_command()` reproduces it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import NotLeader, Output, RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.raft.retention import RetentionPolicy
from kraftlab.node.sim.backoff_growth import BackoffGrowth
from kraftlab.node.sim.commit_progress import CommitProgress
from kraftlab.node.sim.control_log import ControlLog
from kraftlab.node.sim.crash_bias import MomentFaults
from kraftlab.node.sim.durability import DurabilityRules
from kraftlab.node.sim.faults import FaultEvent, schedule
from kraftlab.node.sim.invariants import Invariants, InvariantViolation
from kraftlab.node.sim.journal_truth import JournalTruth
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.sim.network import LinkFaults, Network
from kraftlab.node.sim.quorum_view import QuorumWitness
from kraftlab.node.sim.response_rules import ResponseRules
from kraftlab.node.sim.retention import drawn_retention
from kraftlab.node.sim.rogue import ROGUE_ID, ask, judge
from kraftlab.node.sim.scheduler import EventQueue
from kraftlab.node.sim.timer_rules import TimerRules
from kraftlab.node.sim.timing_rules import CheckQuorumBounds, ElectionBackoff
from kraftlab.node.sim.wire import raft_through_the_wire

DELIVER, TICK, CLIENT, FAULT, FLUSH, ROGUE = 0, 1, 2, 3, 4, 5
JUDGE = 6  # a moment a timer rule falls due (`node.sim.timer_rules`): nothing but the judging
# Events at one virtual instant beyond this mean a node spins without letting time pass.
_MAX_EVENTS_AT_ONE_TIME = 20_000


@dataclass(frozen=True, slots=True)
class SimParams:
    seed: int
    voters: int = 3
    observers: int = 0
    faults: tuple[str, ...] = ()
    fault_ms: int = 8_000
    settle_ms: int = 12_000
    append_interval_ms: int = 40
    snapshot_every: int = 25
    snapshot_chunk_bytes: int = 16
    flush_delay_ms: int = 0
    """0: every append is flushed within its step. Above 0: the leader's appends are flushed by a
    deferred flush (the core's `deferred_flush`) that completes 1..flush_delay_ms ms later; a crash
    before then loses them."""
    refusals: bool = False
    """False: a crashed node is silent (its host is down: requests to it time out). True: its host
    refuses connections (the process died): requests to it fail at once (`RequestFailed`)."""
    journal: bool = False
    first_id: int = 1
    """The first node id (voters, then observers, count up from it): Kafka's node ids start at 0."""
    observers_first: bool = False
    """Observers take the first ids, voters the ones after (an observer may be node 0)."""
    rogue: bool = False
    """A rogue client sends requests every node must refuse (`node.sim.rogue`), every few hundred ms."""
    wire: bool = False
    """Every message goes through Kafka's wire format as the node's transport sends it (`node.sim.wire`)."""
    retention_bytes: int | None = None
    """`metadata.max.retention.bytes` of every node; None: drawn from the seed (`node.sim.retention`)."""

    def retention(self) -> RetentionPolicy:
        drawn = drawn_retention(self.seed)
        return drawn if self.retention_bytes is None else replace(drawn, max_bytes=self.retention_bytes)

    def replay_command(self) -> str:
        return (
            f".venv/bin/python -m kraftlab.node.sim.replay --seed {self.seed} --voters {self.voters} "
            f"--observers {self.observers} --faults {','.join(self.faults) or 'none'} "
            f"--fault-ms {self.fault_ms} --settle-ms {self.settle_ms} --snapshot-every {self.snapshot_every} "
            f"--append-interval-ms {self.append_interval_ms} --snapshot-chunk-bytes {self.snapshot_chunk_bytes} "
            f"--flush-delay-ms {self.flush_delay_ms}{' --refusals' if self.refusals else ''}"
            f"{f' --first-id {self.first_id}' if self.first_id != 1 else ''}"
            f"{' --observers-first' if self.observers_first else ''}{' --rogue' if self.rogue else ''}"
            f"{' --wire' if self.wire else ''}{' --journal' if self.journal else ''}"
            f"{f' --retention-bytes {self.retention_bytes}' if self.retention_bytes is not None else ''}"
        )


@dataclass(slots=True)
class SimResult:
    params: SimParams
    events: int = 0
    end_ms: int = 0
    appended: int = 0
    committed_offset: int = 0
    leader_after_heal_ms: int | None = None
    commit_after_heal_ms: int | None = None
    max_epoch: int = 0
    snapshots_loaded: int = 0
    truncations: dict[str, int] = field(default_factory=dict)
    """Diverging truncations by kind (with `journal` on): `epoch_present` (the leader's log holds the
    follower's last epoch, ending it earlier) and `epoch_absent` (it never held that epoch)."""


@dataclass(eq=False)
class SimNode:
    node_id: int
    voter: bool
    log: MemoryLog = field(default_factory=MemoryLog)
    quorum: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    raft: RaftNode | None = None
    machine: CounterMachine | None = None
    incarnation: int = 0
    tick_at: int | None = None
    flush_pending: bool = False

    @property
    def core(self) -> RaftCore | None:
        return self.raft.core if self.raft is not None else None


class LivenessViolation(AssertionError):
    pass


class Simulation:
    def __init__(
        self,
        params: SimParams,
        config: RaftConfig | None = None,
        core_class: type[RaftCore] = RaftCore,
        faults: list[FaultEvent] | None = None,
    ) -> None:
        """`faults`, when given, replaces the schedule drawn from `params.faults` (scripted scenarios)."""
        self.params = params
        self.core_class = core_class
        self.config = (config or RaftConfig()).with_(
            fetch_snapshot_max_bytes=params.snapshot_chunk_bytes, retention=params.retention()
        )
        self.rng = random.Random(params.seed)
        self.queue = EventQueue()
        self.network = Network(random.Random(self.rng.getrandbits(64)))
        ids = list(range(params.first_id, params.first_id + params.voters + params.observers))
        if params.observers_first:
            self.observer_ids, self.voter_ids = ids[: params.observers], ids[params.observers :]
        else:
            self.voter_ids, self.observer_ids = ids[: params.voters], ids[params.voters :]
        self.nodes: dict[int, SimNode] = {
            i: SimNode(i, i in self.voter_ids) for i in self.voter_ids + self.observer_ids
        }
        self.invariants = Invariants(self.voter_ids)
        self.witness = QuorumWitness(self.voter_ids, self.invariants.fail)
        self.check_quorum = CheckQuorumBounds(self.witness, self.config.fetch_timeout_ms, self._fail)
        self.responses = ResponseRules(self._fail, ignore=(ROGUE_ID,))
        self.backoff = ElectionBackoff(self.config.election_backoff_max_ms, self._fail)
        self.growth = BackoffGrowth(self.config.retry_backoff_ms, self.config.election_backoff_max_ms, self._fail)
        self.journal_truth = JournalTruth(self._fail)
        self.timers = TimerRules(
            self.config, self._fail, lambda at: self.queue.push(at, JUDGE, None), self.check_quorum, self.backoff
        )
        self.durability = DurabilityRules(self._fail, self.nodes)
        self.control_log = ControlLog(self._fail, self.voter_ids)
        self.progress = CommitProgress(
            self.config, params.flush_delay_ms, LinkFaults().max_delay_ms, self._fail, self.nodes
        )
        self.result = SimResult(params)
        self._client_seq = 0
        self._same_time = 0
        self._healed_at: int | None = None
        self._committed_at_heal = 0
        self._tokens: dict[int, Any] = {}
        self._wakeups = 0
        """`wakeups` windows in force: each node is woken a millisecond before or after its deadline."""
        self._wakeup_rng = random.Random(params.seed ^ 0x7A4E5)
        self._quiet = 0
        """Quiet windows in force (`quiet` faults): no client, rogue or not, sends anything."""
        fault_rng = random.Random(self.rng.getrandbits(64))
        drawn = schedule(fault_rng, params.faults, self.voter_ids, self.observer_ids, params.fault_ms, self.config)
        for event in drawn if faults is None else [*faults, FaultEvent(params.fault_ms, "heal")]:
            self.queue.push(event.at, FAULT, event)
        kinds = params.faults if faults is None else ()  # (a scripted scenario gets only its own faults)
        self.moments = MomentFaults(params.seed, kinds, params.fault_ms, self.config, self._push_fault)
        # Halfway through the settle time: what every node must have applied by the end.
        self.queue.push(params.fault_ms + params.settle_ms // 2, FAULT, FaultEvent(0, "mark"))
        self._committed_at_mark = 0
        self.queue.push(0, CLIENT, None)
        # The rogue client's own generator: the runs without it stay what they were.
        self._rogue_rng = random.Random(params.seed ^ 0xBAD_C0DE)
        self._client_rng = random.Random(params.seed ^ 0xC11E_47)
        if params.rogue:
            self.queue.push(self._rogue_rng.randint(1, 500), ROGUE, None)

    # ------------------------------------------------------------------ nodes

    def start_node(self, node: SimNode, now: int) -> None:
        node.incarnation += 1
        seed = (self.params.seed * 1_000_003 + node.node_id * 7919 + node.incarnation) & (2**64 - 1)
        core = self.new_core(node, random.Random(seed))
        machine = CounterMachine()
        nid = node.node_id
        invariants = self.invariants
        machine.on_applied = lambda offset, digest: invariants.applied(nid, offset, digest)

        def loaded(sid: OffsetAndEpoch) -> None:
            self.result.snapshots_loaded += 1
            invariants.snapshot_loaded(nid, sid, machine.leader[2])

        machine.on_snapshot_load = loaded
        node.machine = machine
        node.raft = RaftNode(core, machine, self.params.snapshot_every)
        node.tick_at = None
        node.flush_pending = False
        self.journal_truth.starting(nid, core)
        self.durability.starting(node)
        self._dispatch(node, node.raft.start(now), now)

    def new_core(self, node: SimNode, rng: random.Random, **options: Any) -> RaftCore:
        """The core of a node's new incarnation (a static quorum of the voters; `options` are the
        core's keyword arguments a subclass adds)."""
        return self.core_class(
            self.config,
            node.node_id,
            options.pop("voters", self.voter_ids),
            node.log,
            node.quorum,
            node.snapshots,
            rng,
            journal=self.params.journal,
            deferred_flush=self.params.flush_delay_ms > 0,
            **options,
        )

    def crash_node(self, node: SimNode, wipe: bool) -> None:
        self.journal_truth.crashed(node.node_id)
        node.raft = None
        node.machine = None
        node.tick_at = None
        node.log.crash()
        node.snapshots.crash()
        if wipe:
            node.log.wipe()
            node.quorum.wipe()
            node.snapshots.wipe()

    # ------------------------------------------------------------------ the loop

    def run(self) -> SimResult:
        for node in self.nodes.values():
            self.start_node(node, 0)
        self._check_all(0)
        end = self.params.fault_ms + self.params.settle_ms
        queue = self.queue
        invariants = self.invariants
        nodes = self.nodes
        last = -1
        while queue:
            at = queue.peek_time()
            if at is None or at > end:
                break
            now, kind, payload = queue.pop()
            invariants.now = now
            self.responses.overdue(nodes, now)
            self.backoff.overdue(nodes, now)
            self.timers.overdue(nodes, now)
            if kind == JUDGE:
                continue
            if now == last:
                self._same_time += 1
                if self._same_time > _MAX_EVENTS_AT_ONE_TIME:
                    raise InvariantViolation("Progress", "too many events at one instant (a timer spins)", now)
            else:
                self._same_time = 0
                last = now
            touched: SimNode | None = None
            if kind == DELIVER:
                env, src_inc, dst_inc = payload
                node = nodes[env.dst]
                if nodes[env.src].incarnation != src_inc or self.network.blocked(env.src, env.dst):
                    continue
                if node.raft is None:
                    if self.params.refusals:
                        self._refuse(env, now)
                    continue
                if node.incarnation != dst_inc:
                    continue
                fetch = self.witness.before(node, env, now)
                self.responses.delivered(node, env, dst_inc, now)
                self.timers.delivered(node, env, now)
                out = node.raft.handle(env, now)
                if fetch is not None:
                    self.witness.after(node, env, out, fetch, now)
                self._dispatch(node, out, now)
                self.responses.settled(node, env, now)
                touched = node
            elif kind == TICK:
                node = nodes[payload]
                if node.raft is None or node.tick_at != now:
                    continue
                node.tick_at = None
                self._dispatch(node, node.raft.tick(now), now)
                touched = node
            elif kind == FLUSH:
                node_id, inc = payload
                node = nodes[node_id]
                if node.raft is None or node.incarnation != inc:
                    continue
                node.flush_pending = False
                node.log.flush()
                self.durability.flushed(node)
                self._dispatch(node, node.raft.flushed(now), now)
                touched = node
            elif kind == CLIENT:
                touched = self._client(now)
            elif kind == ROGUE:
                touched = self._rogue(now)
            elif kind == FAULT:
                self._fault(payload, now)
                self.result.events += 1
                self._check_all(now)
                continue
            else:
                touched = self.other_event(kind, payload, now)
            self.result.events += 1
            if touched is not None:
                invariants.check_node(touched, nodes)
                self.control_log.check(touched)
                # The leader's view is judged whenever its own timers run (often: linger, fetch
                # waits); a leadership is noted the moment it begins.
                if kind == TICK:
                    self.witness.check(touched, now)
                else:
                    self.witness.leadership(touched, now)
                self.check_quorum.judge(touched, now)
                if self._healed_at is not None and self.result.commit_after_heal_ms is None:
                    self._note_recovery(now)
        self.result.end_ms = end
        self.responses.overdue(nodes, end)
        self._check_liveness()
        return self.result

    def _fail(self, name: str, detail: str) -> None:
        """A rule's violation, raised by the invariants in force (a subclass may replace them)."""
        self.invariants.fail(name, detail)

    def other_event(self, kind: int, payload: Any, now: int) -> SimNode | None:
        """An event of a kind a subclass queued (above ROGUE); returns the node it stepped, if any."""
        raise ValueError(f"unknown simulator event kind {kind}")

    def _check_all(self, now: int) -> None:
        self.invariants.check_all(self.nodes)
        self.witness.forget(self.nodes)
        for node in self.nodes.values():
            self.witness.check(node, now)

    def _dispatch(self, node: SimNode, out: Output, now: int) -> None:
        self.responses.sent(node, out, node.incarnation, now)
        self.backoff.judge(node, out, now)
        self.growth.judge(node, now)
        if node.core is not None:
            self.journal_truth.stepped(node.node_id, node.core, out)
        self.timers.stepped(node, out, now)
        self.durability.sent(node, out, now)
        self.moments.observe(node, out, now)
        self.progress.stepped(node, now)
        network = self.network
        queue = self.queue
        inc = node.incarnation
        for e in out.events:  # only with `journal` on
            if e.get("ev") == "truncate" and e.get("reason") == "diverging":
                kind = "epoch_present" if e.get("diverging_epoch") == e.get("last_fetched_epoch") else "epoch_absent"
                self.result.truncations[kind] = self.result.truncations.get(kind, 0) + 1
        for env in out.messages:
            if env.dst == ROGUE_ID:
                judge(env, self.invariants.fail)
                continue
            if self.params.wire:
                env = raft_through_the_wire(env)
            for delay in network.delays(env.src, env.dst):
                queue.push(now + delay, DELIVER, (env, inc, self.nodes[env.dst].incarnation))
        if out.flush_to is not None and not node.flush_pending:
            node.flush_pending = True
            queue.push(now + 1 + self.rng.randrange(self.params.flush_delay_ms), FLUSH, (node.node_id, inc))
        deadline = out.deadline
        if deadline is not None:
            if deadline < now:
                deadline = now
            if self._wakeups:
                deadline = self._wake_near(deadline, now)
            if node.tick_at is None or deadline < node.tick_at:
                node.tick_at = deadline
                queue.push(deadline, TICK, node.node_id)

    def _push_fault(self, event: FaultEvent) -> None:
        self.queue.push(event.at, FAULT, event)

    def _wake_near(self, deadline: int, now: int) -> int:
        """When a driver whose wake-ups are a millisecond off wakes the node for `deadline`: on it,
        one ms before (a spurious wake-up: the core must not act before its time) or one ms after."""
        shift = self._wakeup_rng.randint(-1, 1)
        return deadline + shift if deadline + shift > now else deadline

    def _refuse(self, env: m.Envelope, now: int) -> None:
        """A request reaching a crashed node: the sender's transport learns the connection was refused."""
        if not m.is_request(env.message):
            return
        src = self.nodes[env.src]
        for delay in self.network.delays(env.dst, env.src)[:1]:
            refused = m.Envelope(env.dst, env.src, m.RequestFailed(m.Errors.BROKER_NOT_AVAILABLE), env.ref)
            self.queue.push(now + delay, DELIVER, (refused, self.nodes[env.dst].incarnation, src.incarnation))

    def _client(self, now: int) -> SimNode | None:
        """The client's next append, to the leader it reaches: while a deposed leader has not yet
        resigned (check-quorum), clients cut off with it still write to it, as brokers forward to
        whichever leader they reach — the uncommitted tail a later DivergingEpoch cuts."""
        self.queue.push(now + 1 + self.rng.randrange(2 * self.params.append_interval_ms), CLIENT, None)
        if self._quiet:
            return None
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        # its own generator: runs with one leader at a time draw exactly what they did before
        leader = leaders[self._client_rng.randrange(len(leaders))] if len(leaders) > 1 else self._leader()
        if leader is None or leader.raft is None:
            return None
        self._client_seq += 1
        record = Record(None, f"{self.params.seed}:{self._client_seq}".encode())
        try:
            base, out = leader.raft.append([record], now)
        except NotLeader:
            return None
        self.result.appended += 1
        self.timers.appended(leader, base, 1, now)
        self._dispatch(leader, out, now)
        return leader

    def _rogue(self, now: int) -> SimNode | None:
        """The rogue client's next request, to the leader or any live node; answers are judged in `_dispatch`."""
        rng = self._rogue_rng
        self.queue.push(now + rng.randint(100, 800), ROGUE, None)
        if self._quiet:
            return None
        live = [n for n in self.nodes.values() if n.raft is not None]
        leader = self._leader()
        node = leader if leader is not None and rng.random() < 0.6 else (rng.choice(live) if live else None)
        if node is None or node.raft is None:
            return None
        asked = ask(rng, node, sorted(self.nodes))  # its `ref`: the request and the state it found
        self._dispatch(node, node.raft.handle(m.Envelope(ROGUE_ID, node.node_id, asked.request, asked), now), now)
        return node

    def _leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        return max(leaders, key=lambda n: n.core.epoch if n.core is not None else -1) if leaders else None

    def _target(self, spec: int | str) -> SimNode | None:
        return self._leader() if spec == "leader" else self.nodes[int(spec)]

    def _fault(self, event: FaultEvent, now: int) -> None:
        net = self.network
        action = event.action
        if action == "block":
            net.block(*event.args)
        elif action == "unblock":
            net.unblock(*event.args)
        elif action == "isolate":
            victim = self._target(event.args[0])
            if victim is not None:
                links = [(victim.node_id, o) for o in self.nodes if o != victim.node_id]
                links += [(b, a) for a, b in links]
                for link in links:
                    net.block(*link)
                self._tokens[event.args[1]] = links
        elif action == "rejoin":
            for link in self._tokens.pop(event.args[0], []):
                net.unblock(*link)
        elif action in ("crash", "wipe"):
            node = self._target(event.args[0])
            if node is not None and node.raft is not None:
                self.crash_node(node, wipe=action == "wipe")
                self.invariants.restarted(node.node_id, wiped=action == "wipe")
                self._tokens[event.args[1]] = node.node_id
        elif action == "restart":
            victim_id = self._tokens.pop(event.args[1], None)
            if victim_id is not None and self.nodes[victim_id].raft is None:
                self.start_node(self.nodes[victim_id], now)
        elif action == "rates":
            name, value = event.args
            setattr(net.faults, name, value)
        elif action in ("quiet", "unquiet"):
            self._quiet += 1 if action == "quiet" else -1
        elif action == "wakeups":
            self._wakeups += event.args[0]
        elif action == "mark":
            self._committed_at_mark = self.committed_offset()
        elif action == "heal":
            net.heal()
            self._tokens.clear()
            self._quiet = 0
            self._wakeups = 0
            for node in self.nodes.values():
                if node.raft is None:
                    self.start_node(node, now)
            self._healed_at = now
            self.progress.healed(now)
            self._committed_at_heal = self.committed_offset()

    # ------------------------------------------------------------------ liveness

    def _note_recovery(self, now: int) -> None:
        """Record how long after healing the first leader and the first new commit came."""
        assert self._healed_at is not None
        result = self.result
        if result.leader_after_heal_ms is None and self._leader() is not None:
            result.leader_after_heal_ms = now - self._healed_at
        if self.committed_offset() > self._committed_at_heal:
            result.commit_after_heal_ms = now - self._healed_at

    def committed_offset(self) -> int:
        return max((n.core.high_watermark for n in self.nodes.values() if n.core is not None), default=0)

    def _check_liveness(self) -> None:
        result = self.result
        result.committed_offset = self.committed_offset()
        result.max_epoch = max((n.core.epoch for n in self.nodes.values() if n.core is not None), default=0)
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if not leaders:
            raise LivenessViolation(f"no leader {self.params.settle_ms} ms after the faults were healed")
        if result.committed_offset <= self._committed_at_heal:
            raise LivenessViolation(
                f"nothing committed in the {self.params.settle_ms} ms after healing "
                f"(committed offset stayed {self._committed_at_heal})"
            )
        lagging = [
            n.node_id
            for n in self.nodes.values()
            if n.machine is not None and n.machine.applied < self._committed_at_mark
        ]
        if lagging:
            raise LivenessViolation(
                f"nodes {lagging} did not apply offset {self._committed_at_mark}, committed "
                f"{self.params.settle_ms // 2} ms before the end"
            )


def run(params: SimParams, config: RaftConfig | None = None, core_class: type[RaftCore] = RaftCore) -> SimResult:
    return Simulation(params, config, core_class).run()


__all__ = ["InvariantViolation", "LivenessViolation", "SimParams", "SimResult", "Simulation", "run"]
