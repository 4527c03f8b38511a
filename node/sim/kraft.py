"""A deterministic simulation of a whole KRaft cluster: the real Raft core (node.raft) over the
simulator's in-memory storage, network and scheduler (node.sim), with QuorumControllers on the
voters and brokers (lifecycle, metadata replay, client APIs) on Raft observers.

Brokers register and heartbeat over the simulated network to the controller they believe
active; a client creates topics through random brokers (forwarded to the controller), most of
them valid, some with a default, zero or too large partition count or replication factor, half
of them with topic configs (Kafka's keys, random values). Faults:
isolating a node, crashing and restarting a controller or a broker (a broker restarts as a new
incarnation), a broker's controlled shutdown followed by its restart, the active controller's
resignation now and then (leadership goes back and forth: a controller that resigned wins again in
the same process life), a broker's log directory failing and repaired later (`node.sim.log_dirs`:
its heartbeats name it offline; it restarts to register it again, the same disk or one formatted
anew); a broker's heartbeats stopping for a while (shorter or longer than the session timeout)
while it keeps serving, and an earlier life's heartbeat reaching the controller after the broker
registered again (a stale broker epoch); optionally a lossy network.
A broker restarted after a controlled shutdown registers with the epoch it stopped at (the
clean-shutdown marker, KIP-966's PreviousBrokerEpoch); after a crash with -1.
Checked while running, after every step that moved a node's committed offset: images identical
at equal offsets on every node, no fenced or unregistered broker in any ISR or leading; no broker
back from a crash in the ISR, the remembered last ISR members or the leadership of a partition it
replicated before on a directory it no longer registers, or at all when it registers none (its
log may have lost acknowledged records; with no data plane here nothing can bring it back in); no
replica on a failed log directory leading or in an ISR; the active controller keeps leases only of
brokers it knows, and after each tick holds one for every unfenced broker it knows (else a dead
one is never fenced); every committed partition record's leader is the one Kafka's PartitionChangeBuilder chooses
(`node.sim.leader_choice`); after every step of a node, each line its controller or broker journalled
true of what it then holds and every change journalled (`node.sim.controller_truth`), and so for every
step of every Raft core (`node.sim.journal_truth`).
Each answer: a topic Kafka would refuse (no partitions, no replicas, more replicas than brokers)
is never created. An admin client (`node.sim.kraft_admin`) asks the active controller for
preferred leader elections, to unregister brokers that are down and fenced (or unknown) and to
alter client quotas (a third of them through a broker, which forwards them), now and then at a
standby (every item answered NOT_CONTROLLER), each answer
judged against the controller's image when it decided. A token client (`node.sim.kraft_tokens`)
creates, renews and expires delegation tokens with edge values at the active controller, judged
against Kafka's token semantics and the image the decision left; after each tick the active
controller holds no token expired more than an expiry check interval ago (Kafka's token remover). A topic administrator
(`node.sim.kraft_topics`) sends CreateTopics and DeleteTopics straight to a controller with every
field drawn on its own (defaults, zero, negative, too many replicas, manual assignments, illegal and
repeated names, validate_only, deletes by name and by id, unknown and repeated ones), each per-topic
answer and the image the decision left judged against Kafka's ReplicationControlManager. An ACL
administrator (`node.sim.kraft_acls`) creates and deletes ACLs at a controller, bindings and filters
drawn over the space (ANY/MATCH/LITERAL/PREFIXED patterns, the wildcard, unknown principals, bindings
Kafka cannot store), judged against Kafka's AclControlManager and its filters' matching; a SCRAM
administrator (`node.sim.kraft_scram`) alters users' credentials (empty names, unknown mechanisms,
iterations at and beyond Kafka's bounds, a user changed twice), judged against ScramControlManager. A reader
(`node.sim.kraft_reader`) asks brokers for Metadata, DescribeCluster and DescribeClientQuotas, each
answer judged against the answering broker's image; a creation a broker acknowledges before its
visibility wait ran out must be in that broker's image (read-your-writes). The client's
CreateTopics and the controller clients' requests go at a version drawn from the range the node
advertises (`node.sim.versions`), and every answer must come at the version asked. Every Kafka
request and response goes through Kafka's wire format (`node.sim.wire`). At the end (after healing): no
acknowledged topic lost, each with the partition count and replication factor asked for (or the
defaults) and exactly the configs asked for, every node converged.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from kio.schema.create_topics.v4.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from kraftlab.node.broker import (
    BrokerApis,
    BrokerConfig,
    BrokerEndpoint,
    BrokerLifecycle,
    BrokerMetadata,
    BrokerState,
    ClientReply,
    Forward,
    Refused,
    SendToController,
)
from kraftlab.node.controller import ControllerConfig, NotLeader, QuorumController, Reply
from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import UNASSIGNED_DIR, MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import RESOURCE_TOPIC
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import NotLeader as RaftNotLeader
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.sim.broker_lives import BrokerLives
from kraftlab.node.sim.controller_answers import ControllerAnswers
from kraftlab.node.sim.controller_truth import ControllerTruth
from kraftlab.node.sim.journal_truth import JournalTruth, JudgedRaftNode
from kraftlab.node.sim.kraft_acls import AclAdmin, AclFacts, is_acl_request
from kraftlab.node.sim.kraft_admin import ADMIN_ID, AdminClient
from kraftlab.node.sim.kraft_reader import LISTENER, BrokerReader
from kraftlab.node.sim.kraft_scram import ScramAdmin, ScramFacts, is_scram_request
from kraftlab.node.sim.kraft_tokens import TOKENS, TokenClient, TokenFacts, is_token_request
from kraftlab.node.sim.kraft_tokens import overdue as overdue_tokens
from kraftlab.node.sim.kraft_topics import TopicAdmin, TopicFacts, is_topic_request
from kraftlab.node.sim.leader_choice import LeaderChoice
from kraftlab.node.sim.log_dirs import LogDirs, before_offline_dirs, offline_dirs_problems, schedule_failures
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.sim.network import Network
from kraftlab.node.sim.retention import drawn_retention
from kraftlab.node.sim.scheduler import EventQueue
from kraftlab.node.sim.versions import BROKER, CONTROLLER, drawn
from kraftlab.node.sim.wire import WireViolation, raft_through_the_wire, through_the_wire

CLUSTER_ID = "c2ltdWxhdGVkLWNsdXN0ZXI"
DELIVER, TICK, APP, RPC, REPLY, TIMEOUT, CLIENT, FAULT, ADMIN, ADMIN_REPLY, READ, TOKEN, OPERATOR = range(13)
APP_TICK_MS = 50
RPC_TIMEOUT_MS = 2_000
# Topic configs a client may create a topic with (Kafka's keys), each with values to draw from.
TOPIC_CONFIGS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("delete", "compact", "compact,delete"),
    "retention.ms": ("60000", "86400000", "-1"),
    "min.insync.replicas": ("1", "2"),
    "segment.bytes": ("1048576", "104857600"),
    "compression.type": ("producer", "zstd", "lz4"),
}


class _Judging(Protocol):
    """A simulator client that judges the answer to a request it sent, given what the decision saw."""

    def judge(self, request: Any, facts: Any, response: Any) -> str | None: ...


class SimViolation(AssertionError):
    pass


@dataclass(eq=False)
class KNode:
    node_id: int
    voter: bool
    log: MemoryLog = field(default_factory=MemoryLog)
    quorum: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    raft: RaftNode | None = None
    ctrl: QuorumController | None = None
    lifecycle: BrokerLifecycle | None = None
    metadata: BrokerMetadata | None = None
    apis: BrokerApis | None = None
    incarnation: int = 0
    clean_epoch: int = -1
    """The broker epoch its last controlled shutdown ended at (its clean-shutdown marker), -1 after a crash."""
    tick_at: int | None = None
    checked_offset: int = -1

    @property
    def alive(self) -> bool:
        return self.raft is not None

    def broker(self) -> tuple[BrokerLifecycle, BrokerMetadata, BrokerApis]:
        """A live broker's parts (set together when it starts, cleared together when it stops)."""
        assert self.lifecycle is not None and self.metadata is not None and self.apis is not None, \
            f"node {self.node_id} runs no broker"
        return self.lifecycle, self.metadata, self.apis

    def image(self) -> tuple[int, MetadataImage]:
        replay = self.ctrl.replay if self.ctrl is not None else self.broker()[1].replay
        return replay.next_offset, replay.image

    def leader_id(self) -> int | None:
        return self.raft.core.leader_id if self.raft is not None else None


class _Writer:
    def __init__(self, sim: KraftSim, node: KNode) -> None:
        self.sim, self.node = sim, node

    def append(self, records: Any, now_ms: int) -> int:
        if self.node.raft is None:
            raise NotLeader()
        try:
            base, out = self.node.raft.append(records, now_ms)
        except RaftNotLeader as exc:
            raise NotLeader() from exc
        self.sim.truth.wrote(self.node.node_id, base, records)
        self.sim.appending += 1  # the controller's step goes on after the append: not over yet
        try:
            self.sim.dispatch(self.node, out, now_ms)
        finally:
            self.sim.appending -= 1
        return base

    def next_offset(self) -> int:
        return 0 if self.node.raft is None else self.node.raft.next_offset()


class KraftSim:
    def __init__(
        self,
        seed: int,
        controllers: int = 3,
        brokers: int = 3,
        session_timeout_ms: int = 3_000,
        heartbeat_interval_ms: int = 500,
        snapshot_every: int = 40,
        lossy: bool = False,
        fence_changes_per_tick: int | None = None,
        raft_wire: bool = False,
    ) -> None:
        """`lossy`: while faults run, 5% of messages (Raft and broker RPCs) are dropped and 5% duplicated.
        `fence_changes_per_tick`: the controllers' budget of partition changes per fencing tick; None: drawn
        per seed (mostly small, so fencing a broker takes several ticks, the FenceBrokerRecord after the last).
        `raft_wire`: every Raft message is also read by Kafka's schema (`node.sim.wire.raft_through_the_wire`:
        the real metadata batches by Kafka's control and data record rules); the message delivered is unchanged."""
        self.seed = seed
        self.raft_wire = raft_wire
        self.rng = random.Random(seed)
        self.queue = EventQueue()
        self.network = Network(random.Random(self.rng.getrandbits(64)))
        self.voter_ids = list(range(1, controllers + 1))
        self.broker_ids = list(range(101, 101 + brokers))
        self.nodes = {i: KNode(i, True) for i in self.voter_ids} | {i: KNode(i, False) for i in self.broker_ids}
        self.raft_config = RaftConfig(retention=drawn_retention(seed))
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.snapshot_every = snapshot_every
        self.digests: dict[int, str] = {}
        self.acked: set[str] = set()
        # Each topic's requested (partitions, replication factor), -1 for the default, drawn from
        # their own generator (the fault schedule stays the seed's): mostly valid, some invalid.
        self.shapes: dict[str, tuple[int, int]] = {}
        self.shape_rng = random.Random(seed ^ 0x5EED)
        # Each topic's requested configs, from a generator of their own too.
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.config_rng = random.Random(seed ^ 0xC0F16)
        self.created = 0
        self.fence_events: list[tuple[int, dict[str, Any]]] = []
        self.journal: list[tuple[int, int, JournalEvent]] = []
        self.crashed_brokers: dict[int, int] = {}
        self.unclean_returns: dict[uuid.UUID, set[tuple[uuid.UUID, int]]] = {}  # incarnation → partitions it had
        self.client_until = 0
        self.lossy = lossy
        self.fence_changes_per_tick = fence_changes_per_tick if fence_changes_per_tick is not None \
            else random.Random(seed ^ 0xFE2CE).choice([1, 3, 10, 500])
        self._hit: dict[int, int] = {}
        # The admin client's own generator (the fault schedule stays the seed's); the facts each
        # decision of an admin request saw (a duplicated request is decided more than once).
        self.admin = AdminClient(random.Random(seed ^ 0xAD417), random.Random(seed ^ 0x0407A))
        self.admin_asked = 0
        self.admin_brokered = 0
        self.broker_rng = random.Random(seed ^ 0xB20C)  # which admin requests go through a broker
        self.admin_answered = 0
        # Per admin request token: each delivery's request and its client's verdict on the answer.
        self._admin_facts: dict[int, list[tuple[Any, Callable[[Any], str | None]]]] = {}
        # The reader's own generator; when and through which broker (incarnation) each create was sent.
        self.reader = BrokerReader(random.Random(seed ^ 0x4EAD))
        self.reads = 0
        self.read_answers = 0
        self._reading: dict[int, Any] = {}
        self._client_sent: dict[int, tuple[int, int, int]] = {}
        self._client_versions: dict[int, int] = {}
        self.leader_choice = LeaderChoice()
        self.failover_rng = random.Random(seed ^ 0xF11F)  # when the active controller resigns
        self.tokens = TokenClient(random.Random(seed ^ 0x70CE))
        defaults = ControllerConfig(node_id=0, cluster_id=CLUSTER_ID)
        self.topic_admin = TopicAdmin(random.Random(seed ^ 0x70B1C), self.broker_ids, TOPIC_CONFIGS,
                                      defaults.default_num_partitions, defaults.default_replication_factor, CONTROLLER)
        self.acl_admin = AclAdmin(random.Random(seed ^ 0xAC15))
        self.scram_admin = ScramAdmin(random.Random(seed ^ 0x5C2A))
        self.operator_rng = random.Random(seed ^ 0x0BE2)  # which controller client asks next, when, and where
        self._active_since: dict[tuple[int, int, int], int] = {}  # (controller, incarnation, epoch) → first tick active
        self.version_rng = random.Random(seed ^ 0x7E25)  # the version each client request is sent at
        self.sent_versions: Counter[tuple[str, int]] = Counter()  # (API, version) of what the clients sent
        self.answers = ControllerAnswers()  # the controllers' answers judged against the requests delivered
        self.appending = 0  # > 0 while a controller's append is dispatched (its step is not over)
        # Each broker's log directories, and when one fails and is repaired (generators of their own).
        self.log_dirs = LogDirs.drawn(random.Random(seed ^ 0xD125), self.broker_ids)
        self.dir_rng = random.Random(seed ^ 0xD1FA)
        # Broker life shapes beyond crashes: heartbeats lost while the broker serves, and late ones.
        self.lives = BrokerLives(random.Random(seed ^ 0x11FE), self.session_timeout_ms)
        self.truth = ControllerTruth(self._untrue)  # every step's controller and broker lines against their state
        self.raft_truth = JournalTruth(self._untrue)  # and every step's Raft lines against the core's

    # ---- nodes --------------------------------------------------------------------------

    def start(self, node: KNode, now: int) -> None:
        node.incarnation += 1
        seed = self.seed * 1_000_003 + node.node_id * 7919 + node.incarnation
        core = RaftCore(
            self.raft_config, node.node_id, self.voter_ids, node.log, node.quorum, node.snapshots, random.Random(seed)
        )
        if node.voter:
            self.leader_choice.restart(node.node_id)
            self.answers.restarted(node.node_id)
            node.ctrl = QuorumController(
                ControllerConfig(
                    node_id=node.node_id, cluster_id=CLUSTER_ID, session_timeout_ms=self.session_timeout_ms, seed=seed,
                    tokens=TOKENS, fence_changes_per_tick=self.fence_changes_per_tick,
                ),
                _Writer(self, node),
            )
            machine: Any = node.ctrl
        else:
            cfg = BrokerConfig(
                node_id=node.node_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=uuid.UUID(int=node.node_id * 1000 + node.incarnation),
                listeners=(BrokerEndpoint(LISTENER, f"b{node.node_id}", 9092),),
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                session_timeout_ms=self.session_timeout_ms,
                previous_broker_epoch=node.clean_epoch,
                log_dirs=self.log_dirs.registered(node.node_id),
            )
            if node.clean_epoch < 0 and node.incarnation > 1:
                self.unclean_returns[cfg.incarnation_id] = self._replicated_by(node.node_id, cfg.log_dirs)
            node.clean_epoch = -1  # the marker is taken: a crash of this life is unclean
            late = self.lives.late_after_restart(node.incarnation)  # the old life's heartbeat, late
            if late is not None:
                self.queue.push(now + late, FAULT, ("stale-heartbeat", node.node_id))
            node.lifecycle = BrokerLifecycle(cfg)
            node.metadata = BrokerMetadata()
            node.apis = BrokerApis(CLUSTER_ID, node.metadata, node.lifecycle)
            node.lifecycle.start(now, restarted=node.incarnation > 1)
            machine = node.metadata
        self.raft_truth.starting(node.node_id, core)
        node.raft = JudgedRaftNode(core, machine, self.snapshot_every, self.raft_truth, node.node_id)
        node.tick_at = None
        node.checked_offset = -1
        self.dispatch(node, node.raft.start(now), now)

    def _replicated_by(self, broker: int, dirs: tuple[uuid.UUID, ...]) -> set[tuple[uuid.UUID, int]]:
        """The partitions `broker` replicates in the newest image an active controller holds whose
        log it cannot vouch for after a crash: every one when it registers no directory; else those
        on a directory it does not register (lost, or formatted anew with a new id). Back on the
        directory it left, a replica may lead again (KIP-966's balanced recovery)."""
        images = [n.ctrl.future_image for n in self.nodes.values() if n.ctrl is not None and n.ctrl.active]
        return {(t.topic_id, pid) for img in images for t, pid, p in img.partitions()
                if broker in p.replicas and (not dirs or p.directory(broker) not in (*dirs, UNASSIGNED_DIR))}

    def crash(self, node: KNode, now: int) -> None:
        self.raft_truth.crashed(node.node_id)
        node.raft = node.ctrl = node.lifecycle = node.metadata = node.apis = None
        node.tick_at = None
        node.log.crash()
        node.snapshots.crash()
        if not node.voter:
            self.crashed_brokers[node.node_id] = now

    # ---- plumbing ---------------------------------------------------------------------------

    def dispatch(self, node: KNode, out: Output, now: int) -> None:
        inc = node.incarnation
        for ev in out.events:  # the Raft core's journal lines (start, role, vote, append, hw, truncate, …)
            self.journal.append((now, node.node_id, JournalEvent(ev["ev"], {k: v for k, v in ev.items() if k != "ev"})))
        self.truth.told(node.node_id, out.events)
        for env in out.messages:
            if self.raft_wire:
                raft_through_the_wire(env)
            for delay in self.network.delays(env.src, env.dst):
                self.queue.push(now + delay, DELIVER, (env, inc, self.nodes[env.dst].incarnation))
        deadline = out.deadline
        if deadline is not None:
            deadline = max(deadline, now)
            if node.tick_at is None or deadline < node.tick_at:
                node.tick_at = deadline
                self.queue.push(deadline, TICK, node.node_id)
        self.drain(node, now)

    def drain(self, node: KNode, now: int) -> None:
        """Route the application outputs of `node` and check its committed image."""
        if node.ctrl is not None:
            outputs = node.ctrl.take_outputs()
            self.truth.told(node.node_id, outputs)
            self._judged(self.answers.observe(node.node_id, outputs, node.ctrl.committed_offset))
            for out in outputs:
                if isinstance(out, Reply):
                    bid, binc, kind, token = out.token
                    response = self._wire(out.response, f"controller {node.node_id}'s answer to {bid}")
                    reply = ADMIN_REPLY if bid == ADMIN_ID else REPLY
                    self._send(node.node_id, bid, reply, (bid, binc, kind, token, response), now)
                else:
                    self.journal.append((now, node.node_id, out))
                    if out.ev == "fence":
                        self.fence_events.append((now, out.fields))
                    wrong = self.leader_choice.observe(node.node_id, out, node.image)
                    if wrong is not None:
                        raise SimViolation(f"seed {self.seed}: controller {node.node_id}: {wrong}")
            if not self.appending:
                self._judged(self.answers.settle(node.node_id, node.ctrl.committed_offset, node.ctrl.active,
                                                 node.ctrl.log.next_offset()))
        if node.lifecycle is not None:
            lifecycle, metadata, apis = node.broker()
            broker_outs = lifecycle.take_outputs() + apis.take_outputs() + metadata.take_outputs()
            self.truth.told(node.node_id, broker_outs)
            for broker_out in broker_outs:
                if isinstance(broker_out, SendToController | Forward):
                    rpc_kind = "hb" if isinstance(broker_out, SendToController) else "fwd"
                    self._rpc(node, rpc_kind, broker_out.token, broker_out.request, now)
                elif isinstance(broker_out, ClientReply):
                    self._client_answer(node, broker_out, now)
                elif isinstance(broker_out, Refused) and broker_out.token[0] == "read":
                    self._reading.pop(broker_out.token[1])  # the connection closed: a refusal
                elif isinstance(broker_out, JournalEvent):
                    self.journal.append((now, node.node_id, broker_out))
        if not self.appending:
            self.truth.stepped(node, now)
        self.check(node)

    def _untrue(self, rule: str, detail: str) -> None:
        raise SimViolation(f"seed {self.seed}: {rule}: {detail}")

    def _judged(self, problems: list[str]) -> None:
        if problems:
            raise SimViolation(f"seed {self.seed}: {problems[0]}")

    def _send(self, src: int, dst: int, kind: int, payload: Any, now: int) -> None:
        for delay in self.network.delays(src, dst):
            self.queue.push(now + delay, kind, payload)

    def _wire(self, entity: Any, what: str) -> Any:
        try:
            return through_the_wire(entity, what)
        except WireViolation as exc:
            raise SimViolation(f"seed {self.seed}: {exc}") from exc

    def _rpc(self, node: KNode, kind: str, token: int, request: Any, now: int) -> None:
        request = self._wire(request, f"broker {node.node_id}'s request")
        if kind == "hb":
            self.lives.sent(node.node_id, node.incarnation, request)
        target = node.leader_id()
        if target is None or target not in self.voter_ids:
            self._failed(node, kind, token, now, sent=False)
            return
        if kind != "hb" or not self.lives.lost(node.node_id, now):
            self._send(node.node_id, target, RPC, (target, node.node_id, node.incarnation, kind, token, request), now)
        self.queue.push(now + RPC_TIMEOUT_MS, TIMEOUT, (node.node_id, node.incarnation, kind, token))

    def _failed(self, node: KNode, kind: str, token: int, now: int, *, sent: bool) -> None:
        lifecycle, _, apis = node.broker()
        if kind == "hb":
            lifecycle.on_failure(token, now)
        else:
            apis.on_forward_failure(token, now, sent=sent)

    def _client_answer(self, node: KNode, out: ClientReply, now: int) -> None:
        kind, number = out.token
        if kind == "read":
            self._read_answer(node, self._reading.pop(number), out.response)
            return
        if kind == "admin":  # an admin request a broker forwarded, its answer relayed
            self._admin_answer(number, self._wire(out.response, f"broker {node.node_id}'s answer to the admin"))
            return
        sent_by, incarnation, sent_at = self._client_sent.pop(number, (0, 0, 0))
        self._same_version(self._client_versions.pop(number, None), out.response, f"broker {node.node_id}")
        # Relayed before the visibility wait could have run out: the broker waited for its own image.
        waited = node.node_id == sent_by and node.incarnation == incarnation and (
            now - sent_at < node.broker()[2].visibility_wait_ms)
        for t in self._wire(out.response, "a broker's answer to the client").topics:
            partitions, factor = self.shapes.get(t.name, (-1, -1))
            if t.error_code == ErrorCode.none:
                if partitions == 0 or factor == 0 or factor > len(self.broker_ids):
                    raise SimViolation(f"seed {self.seed}: topic {t.name} created with {partitions} partitions and "
                                       f"replication factor {factor}: Kafka refuses it (INVALID_PARTITIONS / "
                                       "INVALID_REPLICATION_FACTOR)")
                self.acked.add(t.name)
                if waited and node.broker()[1].image.topic(t.name) is None:
                    raise SimViolation(f"seed {self.seed}: broker {node.node_id} acknowledged topic {t.name} "
                                       f"{now - sent_at} ms after it was asked, and its image does not show it "
                                       "(a client reading from the broker it wrote through must see its write)")

    def _read(self, now: int) -> None:
        """The reader's next request, to a random live broker, answered (or refused) at once."""
        if now < self.client_until:
            self.queue.push(now + 150 + self.reader.rng.randrange(300), READ, None)
        live = [self.nodes[b] for b in self.broker_ids if self.nodes[b].apis is not None]
        if not live:
            return
        node = self.reader.rng.choice(live)
        _, metadata, apis = node.broker()
        self.reads += 1
        self._reading[self.reads] = request = self._wire(self.reader.request(metadata.image), "the reader's request")
        apis.handle(("read", self.reads), request, now, LISTENER)
        self.drain(node, now)
        if self.reads in self._reading:  # a read is answered or refused at once, never left unanswered
            raise SimViolation(f"seed {self.seed}: broker {node.node_id} neither answered nor refused "
                               f"{type(request).__name__}")

    def _read_answer(self, node: KNode, request: Any, response: Any) -> None:
        response = self._wire(response, f"broker {node.node_id}'s answer to the reader")
        verdict = self.reader.judge(request, node.broker()[1].image, response)
        if verdict is not None:
            raise SimViolation(f"seed {self.seed}: broker {node.node_id}: {verdict}")
        self.read_answers += 1

    # ---- invariants -------------------------------------------------------------------------

    def check(self, node: KNode) -> None:
        if node.raft is None:
            return
        ctrl = node.ctrl
        if ctrl is not None and ctrl.active:
            # Kafka's heartbeat manager drops a broker when it is unregistered: a lease kept for a
            # broker the controller does not know grows without bound as brokers come and go.
            stray = sorted(set(ctrl.leases.last_contact) - set(ctrl.future_image.brokers))
            if stray:
                raise SimViolation(f"seed {self.seed}: controller {node.node_id} keeps leases of brokers it does "
                                   f"not know: {stray}")
        offset, image = node.image()
        if offset == node.checked_offset:
            return
        node.checked_offset = offset
        digest = image.digest()
        known = self.digests.setdefault(offset, digest)
        if known != digest:
            raise SimViolation(f"seed {self.seed}: node {node.node_id} image at offset {offset} differs")
        for topic, pid, p in image.partitions():
            for b in (*p.isr, *([p.leader] if p.leader >= 0 else [])):
                reg = image.brokers.get(b)
                if reg is None or reg.fenced:
                    raise SimViolation(
                        f"seed {self.seed}: node {node.node_id} offset {offset}: broker {b} fenced/unregistered "
                        f"but in {topic.name}-{pid} (isr {p.isr}, leader {p.leader})"
                    )
            offline = [b for b in (*p.isr, *([p.leader] if p.leader >= 0 else [])) if not image.replica_online(p, b)]
            if offline:
                raise SimViolation(
                    f"seed {self.seed}: node {node.node_id} offset {offset}: the replicas of {topic.name}-{pid} on "
                    f"brokers {offline} are on a failed log directory but lead or are in the ISR (isr {p.isr}, "
                    f"leader {p.leader})"
                )
            for b in {*p.isr, *p.last_known_elr, p.leader}:
                reg = image.brokers.get(b)
                if reg is not None and (topic.topic_id, pid) in self.unclean_returns.get(reg.incarnation_id, ()):
                    raise SimViolation(
                        f"seed {self.seed}: node {node.node_id} offset {offset}: broker {b} came back from a crash "
                        f"but may lead {topic.name}-{pid} (isr {p.isr}, last known elr {p.last_known_elr}, "
                        f"leader {p.leader})"
                    )

    def _check_leases(self, node: KNode) -> None:
        """After its tick, an active controller holds a lease for every unfenced broker it knows (Kafka's
        heartbeat manager tracks every registered broker from activation on): a broker without one is
        never fenced when it dies."""
        ctrl = node.ctrl
        if ctrl is None or not ctrl.active:
            return
        image = ctrl.future_image
        missing = sorted(b for b, reg in image.brokers.items() if not reg.fenced and b not in ctrl.leases.last_contact)
        if missing:
            raise SimViolation(f"seed {self.seed}: active controller {node.node_id} holds no lease for unfenced "
                               f"brokers {missing}: they would never be fenced if they died")

    def _check_token_sweep(self, node: KNode, now: int) -> None:
        """After its tick, an active controller holds no token that expired more than an expiry check
        interval ago (Kafka's token remover), counted from when it became active in this term."""
        ctrl, raft = node.ctrl, node.raft
        if ctrl is None or raft is None or not ctrl.active:
            return
        since = self._active_since.setdefault((node.node_id, node.incarnation, raft.core.epoch), now)
        late = overdue_tokens(ctrl.future_image, now, since, slack_ms=APP_TICK_MS)
        if late:
            raise SimViolation(f"seed {self.seed}: active controller {node.node_id} at {now} still holds tokens "
                               f"expired more than {TOKENS.expiry_check_interval_ms} ms ago: {late}")

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, fault_ms: int = 15_000, settle_ms: int = 15_000, faults: bool = True) -> None:
        for node in self.nodes.values():
            self.start(node, 0)
        self.queue.push(APP_TICK_MS, APP, None)
        self.queue.push(2_000, CLIENT, None)
        self.queue.push(2_500, ADMIN, None)
        self.queue.push(2_200, READ, None)
        self.queue.push(2_300, TOKEN, None)
        self.queue.push(2_400, OPERATOR, None)
        if faults:
            self._schedule_faults(fault_ms)
            self._schedule_resignations(fault_ms)
            for t, fault in schedule_failures(self.dir_rng, self.broker_ids, fault_ms) + self.lives.schedule(
                    self.broker_ids, fault_ms):
                self.queue.push(t, FAULT, fault)
        if self.lossy:
            self.network.faults.drop = 0.05
            self.network.faults.duplicate = 0.05
        self.queue.push(fault_ms, FAULT, ("heal",))
        end = fault_ms + settle_ms
        self.client_until = fault_ms + settle_ms // 2
        while self.queue and (self.queue.peek_time() or 0) <= end:
            now, kind, payload = self.queue.pop()
            self.step(now, kind, payload, fault_ms)

    def step(self, now: int, kind: int, payload: Any, fault_ms: int) -> None:
        nodes = self.nodes
        if kind == DELIVER:
            env, src_inc, dst_inc = payload
            node = nodes[env.dst]
            if node.raft is None or node.incarnation != dst_inc or nodes[env.src].incarnation != src_inc:
                return
            if self.network.blocked(env.src, env.dst):
                return
            self.dispatch(node, node.raft.handle(env, now), now)
        elif kind == TICK:
            node = nodes[payload]
            if node.raft is None or node.tick_at != now:
                return
            node.tick_at = None
            self.dispatch(node, node.raft.tick(now), now)
        elif kind == APP:
            self.queue.push(now + APP_TICK_MS, APP, None)
            for node in nodes.values():
                if node.ctrl is not None:
                    node.ctrl.tick(now)
                    self._check_leases(node)
                    self._check_token_sweep(node, now)
                elif node.lifecycle is not None:
                    lifecycle, metadata, apis = node.broker()
                    lifecycle.tick(now, metadata.highest_offset)
                    apis.tick(now)
                self.drain(node, now)
        elif kind == RPC:
            target, bid, binc, rkind, token, request = payload
            node = nodes[target]
            if node.ctrl is None:
                return
            decided: Any = None
            if bid == ADMIN_ID:
                image = node.ctrl.future_image
                client: _Judging  # the client that sent it, chosen once: it judges the answer too
                if is_token_request(request):
                    client, decided = self.tokens, self.tokens.facts(request, image, now)
                elif is_topic_request(request):
                    client, decided = self.topic_admin, self.topic_admin.facts(image)
                elif is_acl_request(request):
                    client, decided = self.acl_admin, self.acl_admin.facts(image)
                elif is_scram_request(request):
                    client, decided = self.scram_admin, self.scram_admin.facts(image)
                else:
                    client, decided = self.admin, self.admin.facts(request, image)
                self._admin_facts.setdefault(token, []).append((request, partial(client.judge, request, decided)))
            self.answers.delivered(target, (bid, binc, rkind, token), request, node.ctrl.active, now)
            self.truth.asked(target, request)
            before = before_offline_dirs(node.ctrl, request)
            node.ctrl.handle_request((bid, binc, rkind, token), request, now)
            if isinstance(decided, TokenFacts | TopicFacts | AclFacts | ScramFacts):
                decided.after = node.ctrl.future_image.copy()  # what the decision left
            self._judged(offline_dirs_problems(node.ctrl, node.node_id, request, before))
            self.drain(node, now)
        elif kind == REPLY:
            bid, binc, rkind, token, response = payload
            node = nodes[bid]
            if node.lifecycle is None or node.incarnation != binc:
                return
            if rkind == "hb":
                node.lifecycle.on_response(token, response, now)
            else:
                node.broker()[2].on_forward_response(token, response)
            self.drain(node, now)
        elif kind == TIMEOUT:
            bid, binc, rkind, token = payload
            node = nodes[bid]
            if node.lifecycle is None or node.incarnation != binc:
                return
            self._failed(node, rkind, token, now, sent=True)
            self.drain(node, now)
        elif kind == CLIENT:
            if now < self.client_until:
                self.queue.push(now + 100 + self.rng.randrange(200), CLIENT, None)
            live = [nodes[b] for b in self.broker_ids if nodes[b].apis is not None]
            if live:
                node = self.rng.choice(live)
                self.created += 1
                partitions = self.shape_rng.choice([2, 2, 2, 1, 3, -1, 0])
                factor = self.shape_rng.choice([2, 2, 2, 1, 3, -1, 0, len(self.broker_ids) + 1])
                self.shapes[f"t{self.created}"] = (partitions, factor)
                configs = self._draw_configs()
                self.topic_configs[f"t{self.created}"] = configs
                topic = CreatableTopic(
                    name=TopicName(f"t{self.created}"), num_partitions=i32(partitions), replication_factor=i16(factor),
                    assignments=(),
                    configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in sorted(configs.items())),
                )
                timeout = i32Timedelta.parse(datetime.timedelta(milliseconds=5_000))
                newest = CreateTopicsRequest(topics=(topic,), timeout=timeout)
                request = self._wire(drawn(self.version_rng, newest, BROKER), "the client's request")
                self._client_sent[self.created] = (node.node_id, node.incarnation, now)
                self._client_versions[self.created] = request.__version__
                self.sent_versions[("CreateTopics", request.__version__)] += 1
                node.broker()[2].handle(("client", self.created), request, now)
                self.drain(node, now)
        elif kind == FAULT:
            self._fault(payload, now)
        elif kind == ADMIN:
            self._admin_request(now)
        elif kind == ADMIN_REPLY:
            self._admin_answer(payload[3], payload[4])
        elif kind == READ:
            self._read(now)
        elif kind == TOKEN:
            self._token_request(now)
        elif kind == OPERATOR:
            self._operator_request(now)

    def _draw_configs(self) -> dict[str, str]:
        """No configs for half the topics, one to three of TOPIC_CONFIGS for the others."""
        if self.config_rng.random() < 0.5:
            return {}
        keys = self.config_rng.sample(sorted(TOPIC_CONFIGS), self.config_rng.randint(1, 3))
        return {k: self.config_rng.choice(TOPIC_CONFIGS[k]) for k in keys}

    def _admin_request(self, now: int) -> None:
        """The admin client's next request, to the controller that believes it is active (or now
        and then to a standby, as a tool with a stale view of the quorum would)."""
        if now < self.client_until:
            self.queue.push(now + 200 + self.admin.rng.randrange(400), ADMIN, None)
        active = [(n.raft.core.epoch, n, n.ctrl) for n in self.nodes.values()
                  if n.ctrl is not None and n.ctrl.active and n.raft is not None]
        if not active:
            return
        _, target, ctrl = max(active, key=lambda a: a[0])
        down = [b for b in self.broker_ids if self.nodes[b].raft is None]
        request = self.admin.request(ctrl.future_image, down)
        request = self._wire(drawn(self.version_rng, request, CONTROLLER), "the admin client's request")
        self.sent_versions[(api_name(request), request.__version__)] += 1
        standby = self.admin.standby([n.node_id for n in self.nodes.values() if n.ctrl is not None and n is not target])
        if standby is not None:
            target = self.nodes[standby]
        self.admin_asked += 1
        live = [self.nodes[b] for b in self.broker_ids if self.nodes[b].apis is not None]
        if live and self.admin.through_a_broker(request, self.broker_rng):
            broker = self.broker_rng.choice(live)
            # False: judged as answered through a broker
            self._admin_facts[self.admin_asked] = [(request, partial(self.admin.judge, request, False))]
            self.admin_brokered += 1
            broker.broker()[2].handle(("admin", self.admin_asked), request, now)
            self.drain(broker, now)
            return
        payload = (target.node_id, ADMIN_ID, 0, "admin", self.admin_asked, request)
        self._send(ADMIN_ID, target.node_id, RPC, payload, now)

    def _token_request(self, now: int) -> None:
        """The token client's next request, to the controller that believes it is active."""
        if now < self.client_until - TOKENS.max_lifetime_ms:  # every token gone before the end
            self.queue.push(now + 100 + self.tokens.rng.randrange(200), TOKEN, None)
        active = [(n.raft.core.epoch, n.node_id) for n in self.nodes.values()
                  if n.ctrl is not None and n.ctrl.active and n.raft is not None]
        if not active:
            return
        target = max(active)[1]
        self.admin_asked += 1
        request = self._wire(drawn(self.version_rng, self.tokens.request(), CONTROLLER), "the token client's request")
        self.sent_versions[(api_name(request), request.__version__)] += 1
        self._send(ADMIN_ID, target, RPC, (target, ADMIN_ID, 0, "admin", self.admin_asked, request), now)

    def _operator_request(self, now: int) -> None:
        """The operator's next request, from one of its controller clients (topics, ACLs, SCRAM
        credentials; drawn by a generator of its own, each client drawing its request with its own)
        to the controller that believes it is active or, a fifth of the time, to a standby."""
        rng = self.operator_rng
        if now < self.client_until:
            self.queue.push(now + 200 + rng.randrange(400), OPERATOR, None)
        def acls(_: MetadataImage) -> Any:
            return drawn(self.acl_admin.rng, self.acl_admin.request(), CONTROLLER)

        def scram(_: MetadataImage) -> Any:
            return self.scram_admin.request()
        self._to_a_controller(rng, rng.choice((self.topic_admin.request, acls, scram)), now)

    def _to_a_controller(self, rng: random.Random, request_of: Callable[[MetadataImage], Any], now: int) -> None:
        """A request (`request_of` the active controller's image) to the controller that believes it
        is active or, a fifth of the time (`rng`), to a standby."""
        active = [(n.raft.core.epoch, n.node_id) for n in self.nodes.values()
                  if n.ctrl is not None and n.ctrl.active and n.raft is not None]
        if not active:
            return
        target = max(active)[1]
        ctrl = self.nodes[target].ctrl
        assert ctrl is not None
        request = self._wire(request_of(ctrl.future_image), "a controller client's request")
        self.sent_versions[(api_name(request), request.__version__)] += 1
        standbys = [n.node_id for n in self.nodes.values() if n.ctrl is not None and n.node_id != target]
        if standbys and rng.random() < 0.2:
            target = rng.choice(standbys)
        self.admin_asked += 1
        self._send(ADMIN_ID, target, RPC, (target, ADMIN_ID, 0, "admin", self.admin_asked, request), now)

    def _same_version(self, asked: int | None, response: Any, who: str) -> None:
        """Kafka answers a request at the request's version (its client parses nothing else)."""
        if asked is not None and response.__version__ != asked:
            raise SimViolation(f"seed {self.seed}: {who} answered a v{asked} request with "
                               f"{type(response).__name__} v{response.__version__}")

    def _admin_answer(self, token: int, response: Any) -> None:
        decided = self._admin_facts.get(token, [])
        if decided:
            self._same_version(decided[0][0].__version__, response, "the admin's answer")
        verdicts = [judge(response) for _, judge in decided]
        if decided and None not in verdicts:
            raise SimViolation(f"seed {self.seed}: {verdicts[0]}")
        self.admin_answered += 1

    def _schedule_faults(self, fault_ms: int) -> None:
        t, fault_id = 3_000, 0
        while t < fault_ms - 1_000:
            fault_id += 1
            spec = self.rng.choice([*self.voter_ids, *self.broker_ids, "leader", "leader"])
            action = self.rng.choice(["isolate", "crash", "shutdown"])
            length = self.rng.randint(500, 4_000)
            self.queue.push(t, FAULT, (action, fault_id, spec))
            self.queue.push(min(t + length, fault_ms), FAULT, ("undo-" + action, fault_id))
            t += length + self.rng.randint(200, 2_000)

    def _schedule_resignations(self, fault_ms: int) -> None:
        """The active controller resigns now and then (as Kafka's does on a controlled shutdown or an
        error), from a generator of its own: leadership goes back and forth between live controllers,
        so one that resigned wins again while brokers heartbeat (its leases rebuilt on each activation)."""
        t = 2_500 + self.failover_rng.randrange(1_000)
        while t < fault_ms - 1_000:
            self.queue.push(t, FAULT, ("resign",))
            t += self.failover_rng.randint(1_000, 3_000)

    def _life_fault(self, action: str, broker: int, now: int, length: int = 0) -> None:
        node = self.nodes[broker]
        if action == "pause":
            if node.lifecycle is not None:
                self.lives.pause(broker, now, length)
            return
        active = [n for n in self.nodes.values() if n.ctrl is not None and n.ctrl.active]
        if not active or active[0].ctrl is None:
            return
        target = active[0].node_id
        reg = active[0].ctrl.future_image.brokers.get(broker)
        late = self.lives.stale(broker, reg.epoch if reg is not None else None)  # sent before a registration since
        if late is not None:
            inc, request = late
            self._send(broker, target, RPC, (target, broker, inc, "hb", -1, request), now)

    def _dir_fault(self, action: str, broker: int, now: int) -> None:
        node = self.nodes[broker]
        if action == "fail-dir":
            failed = self.log_dirs.fail(broker)
            if failed is not None and node.lifecycle is not None:
                node.lifecycle.report_offline_log_dirs([failed])
                self.drain(node, now)
        elif self.log_dirs.repair(broker) and node.raft is not None:
            self.crash(node, now)  # the process stops for the disk change
            self.start(node, now)

    def _fault(self, payload: tuple[Any, ...], now: int) -> None:
        action = payload[0]
        if action in ("fail-dir", "repair-dir"):
            self._dir_fault(action, payload[1], now)
            return
        if action in ("pause", "stale-heartbeat"):
            self._life_fault(action, payload[1], now, *payload[2:])
            return
        if action == "resign":
            for node in self.nodes.values():
                if node.raft is not None and node.raft.core.is_leader:
                    self.dispatch(node, node.raft.resign(now), now)
            return
        if action == "heal":
            self.network.heal()
            self.lives.heal()
            for node in self.nodes.values():
                if node.raft is None:
                    self.start(node, now)
            return
        if action.startswith("undo-"):
            target = self._hit.pop(payload[1], None)
            if target is None:
                return
        else:
            target = payload[2]
            if target == "leader":
                leaders = [n.node_id for n in self.nodes.values() if n.raft is not None and n.raft.core.is_leader]
                if not leaders:
                    return
                target = leaders[0]
            self._hit[payload[1]] = target
        node = self.nodes[target]
        others = [o for o in self.nodes if o != node.node_id]
        if action == "isolate":
            for o in others:
                self.network.block(node.node_id, o)
                self.network.block(o, node.node_id)
        elif action == "undo-isolate":
            for o in others:
                self.network.unblock(node.node_id, o)
                self.network.unblock(o, node.node_id)
        elif action == "crash" and node.raft is not None:
            self.crash(node, now)
        elif action == "shutdown" and node.lifecycle is not None:
            node.lifecycle.begin_controlled_shutdown(now)  # SIGTERM; the process ends at undo time
        elif action == "undo-shutdown":
            if node.raft is not None:  # the SIGTERMed process ends: logs flushed, marker written
                epoch = node.lifecycle.broker_epoch if node.lifecycle is not None else -1
                self.crash(node, now)
                node.clean_epoch = epoch
            self.start(node, now)
        elif action == "undo-crash" and node.raft is None:
            self.start(node, now)

    def journal_dicts(self) -> list[dict[str, Any]]:
        """Every node's journal as the real nodes write it (one line per event, `ts`/`mono` from the
        simulated clock), for the same checkers that judge real runs."""
        return [{"ts": t, "mono": t * 1_000_000, "node": nid, **e.to_json()} for t, nid, e in self.journal]

    def led_again(self) -> bool:
        """Whether some controller led two epochs within one process life (it resigned and won again)."""
        led: dict[int, set[int]] = {}
        for e in self.journal_dicts():
            if e["ev"] == "start":
                led[e["node"]] = set()
            elif e["ev"] == "role" and e.get("role") == "leader":
                led.setdefault(e["node"], set()).add(e["epoch"])
        return any(len(epochs) >= 2 for epochs in led.values())

    # ---- final checks -----------------------------------------------------------------------

    def check_converged(self) -> None:
        offsets = {n.node_id: n.image()[0] for n in self.nodes.values()}
        digests = {n.node_id: n.image()[1].digest() for n in self.nodes.values()}
        if len(set(offsets.values())) != 1 or len(set(digests.values())) != 1:
            raise SimViolation(f"seed {self.seed}: not converged: offsets {offsets}")
        image = self.nodes[self.voter_ids[0]].image()[1]
        lost = sorted(t for t in self.acked if image.topic(t) is None)
        if lost:
            raise SimViolation(f"seed {self.seed}: acknowledged topics lost: {lost}")
        defaults = ControllerConfig(node_id=0, cluster_id=CLUSTER_ID)
        for name in sorted(self.acked):
            partitions, factor = self.shapes.get(name, (-1, -1))
            want_p = defaults.default_num_partitions if partitions == -1 else partitions
            want_f = defaults.default_replication_factor if factor == -1 else factor
            info = image.topic(name)
            assert info is not None  # not lost: checked above
            got = sorted({len(p.replicas) for p in info.partitions.values()})
            if len(info.partitions) != want_p or got != [want_f]:
                raise SimViolation(f"seed {self.seed}: topic {name} asked for {want_p} partitions of {want_f} "
                                   f"replicas, has {len(info.partitions)} partitions of {got} replicas")
            configs = image.configs.get((RESOURCE_TOPIC, name), {})
            if configs != self.topic_configs.get(name, {}):
                raise SimViolation(f"seed {self.seed}: topic {name} created with configs "
                                   f"{self.topic_configs.get(name, {})}, has {configs}")
        for b in self.broker_ids:
            node = self.nodes[b]
            if node.lifecycle is None or node.lifecycle.state != BrokerState.RUNNING:
                raise SimViolation(f"seed {self.seed}: broker {b} not RUNNING after healing")
            if image.brokers[b].fenced:
                raise SimViolation(f"seed {self.seed}: broker {b} still fenced after healing")
