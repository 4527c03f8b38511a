"""The `isr` workload: the leaders of partitions whose replicas are simulated agents alter ISRs.

Setup ops run inside the main phase: agents (ids `base`…) register and keep heartbeating with
want_fence=false and a caught-up offset (so they unfence: `registry` ops), and topics named
`prefix`N are created with an explicit assignment onto agent ids (`topics` ops). Then:
- `alter` {"topic", "topic_id", "partition", "leader" (the sender), "broker_epoch",
  "leader_epoch", "partition_epoch", "isr" (requested)} → AlterPartition v3 to the active
  controller → {"leader", "leader_epoch", "partition_epoch", "isr"} (checker model `isr`: a
  compare-and-set on the partition epoch). Mostly the believed leader with its current epochs,
  shrinking or expanding the ISR by one; sometimes a stale leader, stale epochs or an old
  incarnation's broker epoch (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST,
  STALE_BROKER_EPOCH, INELIGIBLE_REPLICA: definite refusals, `fail`). An expansion draws its
  joiner from the whole replica set whatever the leader believes of it — fenced, shutting down,
  stalled or unregistered: a leader's view lags and the controller must refuse (INELIGIBLE_REPLICA);
  a member that re-registered is sometimes named with an older broker epoch, and now and then the
  ISR names a broker holding no replica (INVALID_REQUEST).
- controlled shutdowns, offline spells (an agent asks to be fenced for a while), stalls (an agent
  silent past its session, fenced by the controller, then heartbeating on), live decommissions and
  re-registrations of agents move leadership and ISR membership under the leaders (P_LIFECYCLE);
  a replaced incarnation's zombie heartbeats with its old epoch or registers again.
- `read` {"topic", "partition", "node", "broker_read": true[, "final": true]} → Metadata on a
  broker → {"exists", "leader", "leader_epoch", "isr", "replicas"}. Kafka's Metadata carries no
  partition epoch, so these reads steer the agents' beliefs and go to `checker.broker_reads`; the
  `isr` model checks the alters. Broker reads are eventually consistent in Kafka (a broker's
  image may lag), hence the `broker_read` mark; final reads run after heal and recovery.

Agents rotate as the `registry` workload's do (`registry.retirement`: after 100-200 ops an agent is
unregistered and a fresh broker id takes its place), so an hour-long soak's broker keys stay as
checkable as a minute's. The topics placed on a retired agent are retired with it: deleted, and
replaced by topics under new names placed on the current agents — a new name is a new key of the
`isr` model, whose partition epochs start again at 0, so each key's history stays bounded too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData

from kraftlab.workloads.agents import AgentBook, agent_handlers, register_op
from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import check, error_name
from kraftlab.workloads.ops import OncePer, broker_read, op, read_node
from kraftlab.workloads.registry import (
    go_offline,
    lifecycle_op,
    retirement,
    shut_down,
    silence,
    stall,
    stalled,
    zombie_op,
)
from kraftlab.workloads.session import Handlers, Session
from kraftlab.workloads.topics import create as create_topic
from kraftlab.workloads.topics import delete as delete_topic
from kraftlab.workloads.topics import metadata

ISR = "isr"
P_NON_REPLICA = 0.03
"""How often an AlterPartition's ISR also names a broker that holds no replica of the partition."""
P_OLD_MEMBER_EPOCH = 0.15
"""How often an ISR member that re-registered is named with the broker epoch of an older registration."""
P_LIFECYCLE = 0.08
"""How many of the ops on a topic with a believed leader are a replica's lifecycle event rather
than an AlterPartition: enough that in a 60-s mixed run the leaders' alters keep meeting replicas
that are fenced, shutting down, offline or unregistered under them (each rule of the ISR changes
— IsrJoinersEligible, NoIneligibleLeader, FencedLeavesIsr — is reached several times a run)."""
LIFECYCLE: tuple[tuple[str, float], ...] = (
    ("zombie", 1.0), ("shut-down", 2.0), ("stall", 1.0), ("offline", 2.0), ("decommission", 1.5), ("register", 0.5))
"""A lifecycle event's kind, weighted: a replaced incarnation's zombie speaks; a controlled
shutdown; a stall past the session; a broker that goes offline and asks to be fenced for a while;
an operator's live decommission (unregistration); a new incarnation (refused while the old lease
lives)."""


def pick_lifecycle(rng: Any) -> str:
    """One lifecycle event kind, drawn by LIFECYCLE's weights."""
    return str(rng.choices([k for k, _ in LIFECYCLE], weights=[w for _, w in LIFECYCLE])[0])


@dataclass
class Belief:
    """What the agents believe about partition 0 of one topic."""

    replicas: tuple[int, ...]
    topic_id: str | None = None
    leader: int = -1
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = ()
    orphan: bool = False  # exists, but its id is unknown (its create ended in doubt)

    def forget(self) -> None:
        """The topic is gone (deleted): a new one starts at epoch 0."""
        self.topic_id, self.orphan, self.leader = None, False, -1
        self.leader_epoch = self.partition_epoch = 0
        self.isr = ()

    def seen(self, leader: int, leader_epoch: int, isr: Sequence[int]) -> None:
        """A read's view, taken only when it shows a newer leader epoch (reads carry no partition
        epoch, so an ISR seen under the same leader epoch may be older than ours); the partition
        epoch is at least the leader epoch."""
        if leader_epoch > self.leader_epoch or (self.leader == -1 and leader_epoch == self.leader_epoch):
            self.partition_epoch = max(self.partition_epoch, leader_epoch)
            self.leader, self.leader_epoch, self.isr = leader, leader_epoch, tuple(isr)


@dataclass
class IsrWorkload:
    brokers: Sequence[str]
    base: int = 2000
    agents: int = 4
    topics: int = 2
    prefix: str = "isr-"
    replication: int = 3
    session_timeout: float = 9.0  # the cluster's broker.session.timeout.ms, in seconds
    book: AgentBook = field(init=False)
    beliefs: dict[str, Belief] = field(init=False, default_factory=dict)  # the topics in use, by name
    retiring: set[str] = field(init=False, default_factory=set)  # topics of retired agents, to delete
    lifetimes: dict[int, int] = field(init=False, default_factory=dict)  # ops per agent before it retires
    _topics_made: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.book = AgentBook.pool(self.base, self.agents)
        for _ in range(self.topics):
            self._new_topic()

    def _new_topic(self) -> None:
        """A topic under the next name, its replicas placed on the current agents (round robin)."""
        i, ids = self._topics_made, self.book.ids
        self._topics_made += 1
        rf = min(self.replication, len(ids))
        self.beliefs[f"{self.prefix}{i}"] = Belief(tuple(ids[(i + k) % len(ids)] for k in range(rf)))

    def _retire_topics_of(self, agent: int) -> None:
        """The agent is being unregistered: its topics go (deleted by later ops), new ones come."""
        for topic in [t for t, b in self.beliefs.items() if agent in b.replicas]:
            del self.beliefs[topic]
            self.retiring.add(topic)
            self._new_topic()

    # --- handlers -----------------------------------------------------------------------------

    def handlers(self) -> Handlers:
        return {**agent_handlers([self.book]), ("topics", "create"): self._create, ("topics", "delete"): self._delete,
                (ISR, "alter"): self._alter, (ISR, "read"): self._read}

    async def _create(self, session: Session, inv: Invocation) -> Any:
        """The topics create, learning the topic id of an isr topic: Metadata before v10 lacks
        it, so a topic whose id was never learnt (its create ended in doubt) is deleted and
        created anew."""
        belief = self.beliefs.get(inv.value["topic"])
        try:
            out = await create_topic(session, inv)
        except DefiniteFailure as e:
            if belief is not None and belief.topic_id is None and e.error == "TOPIC_ALREADY_EXISTS":
                belief.orphan = True
            raise
        if belief is not None and out.get("topic_id"):
            belief.topic_id, belief.orphan = out["topic_id"], False
        return out

    async def _delete(self, session: Session, inv: Invocation) -> Any:
        topic = inv.value["topic"]
        try:
            out = await delete_topic(session, inv)
        except DefiniteFailure as e:
            if e.error == "UNKNOWN_TOPIC_OR_PARTITION":
                self._gone(topic)  # already gone (an earlier delete that ended in doubt took)
            raise
        self._gone(topic)
        return out

    def _gone(self, topic: str) -> None:
        self.retiring.discard(topic)
        if (belief := self.beliefs.get(topic)) is not None:
            belief.forget()

    async def _alter(self, session: Session, inv: Invocation) -> Any:
        v = inv.value
        req = AlterPartitionRequest(broker_id=v["leader"], broker_epoch=v["broker_epoch"], topics=(TopicData(
            topic_id=uuid.UUID(v["topic_id"]), partitions=(PartitionData(
                partition_index=v["partition"], leader_epoch=v["leader_epoch"], partition_epoch=v["partition_epoch"],
                new_isr_with_epochs=tuple(BrokerState(broker_id=b, broker_epoch=e) for b, e in v["isr_epochs"])),)),))

        def code_of(r: Any) -> int:
            if int(r.error_code) or not r.topics or not r.topics[0].partitions:
                return int(r.error_code)
            return int(r.topics[0].partitions[0].error_code)

        resp = await session.controller.send(req, code_of)
        check(resp.error_code, v)
        part = resp.topics[0].partitions[0]
        belief = self.beliefs.get(v["topic"])
        name = error_name(part.error_code)
        if belief is not None and belief.partition_epoch == v["partition_epoch"]:
            if name == "INVALID_UPDATE_VERSION":
                belief.partition_epoch += 1  # learn the partition epoch by trying the next one
            elif name == "NOT_CONTROLLER":  # our epochs were ahead of the controller's
                belief.partition_epoch = max(belief.leader_epoch, belief.partition_epoch - 1)
        check(part.error_code, v)
        out: dict[str, Any] = {"leader": int(part.leader_id), "leader_epoch": int(part.leader_epoch),
               "partition_epoch": int(part.partition_epoch), "isr": sorted(int(b) for b in part.isr)}
        if belief is not None and out["partition_epoch"] > belief.partition_epoch:
            belief.leader, belief.leader_epoch = out["leader"], out["leader_epoch"]
            belief.partition_epoch, belief.isr = out["partition_epoch"], tuple(out["isr"])
        return out

    async def _read(self, session: Session, inv: Invocation) -> Any:
        v = inv.value
        resp = await metadata(session, v["node"], [v["topic"]])
        t = resp.topics[0]
        if int(t.error_code) == 3:
            return {"exists": False}
        check(t.error_code, v)
        belief = self.beliefs.get(v["topic"])
        topic_id = getattr(t, "topic_id", None)
        if belief is not None and topic_id is not None and topic_id.int:
            belief.topic_id = str(topic_id)
        p = next((p for p in t.partitions if int(p.partition_index) == v["partition"]), None)
        if p is None:
            return {"exists": True, "partition": None}
        out: dict[str, Any] = {"exists": True, "leader": int(p.leader_id),
                               "leader_epoch": int(getattr(p, "leader_epoch", -1)),
               "isr": sorted(int(b) for b in p.isr_nodes), "replicas": [int(b) for b in p.replica_nodes]}
        if belief is not None:
            belief.seen(out["leader"], out["leader_epoch"], out["isr"])
        return out

    # --- generator ----------------------------------------------------------------------------

    def next_op(self, ctx: Context) -> Invocation:
        rng = ctx.rng
        if (farewell := retirement(self.book, self.lifetimes, ctx, self.session_timeout)) is not None:
            self._retire_topics_of(farewell.value["broker"])
            return farewell
        if self.retiring and rng.random() < 0.2:
            return op("topics", "delete", {"topic": rng.choice(sorted(self.retiring)), "via": "controller"})
        if (due := lifecycle_op(self.book, ctx, self.session_timeout)) is not None:
            return due
        unregistered = [a for a in self.book.agents.values() if a.epoch is None]
        if unregistered and rng.random() < 0.7:
            return register_op(rng.choice(unregistered), rng)
        topic = rng.choice(sorted(self.beliefs))
        belief = self.beliefs[topic]
        if belief.topic_id is None:
            if belief.orphan and rng.random() < 0.5:
                return op("topics", "delete", {"topic": topic, "via": "controller"})
            if rng.random() < 0.5 and any(self.book[b].epoch is not None for b in belief.replicas):
                return op("topics", "create", {"topic": topic, "assignment": [list(belief.replicas)],
                                               "via": "controller"})  # v7 answers with the topic id
            return self._read_op(ctx, topic)
        r = rng.random()
        if r < 0.3 or (belief.leader not in belief.replicas and r < 0.6):  # leaderless: wait and see
            return self._read_op(ctx, topic)
        if r < 1 - P_LIFECYCLE:
            return self._alter_op(ctx, topic, belief)
        # A replica's lifecycle; half the time the believed leader's (a broker that shuts down,
        # stalls or goes offline usually leads something: ShutDownWhileLeading's reach).
        leads = belief.leader in belief.replicas and rng.random() < 0.5
        agent = self.book[belief.leader if leads else rng.choice(belief.replicas)]
        event = pick_lifecycle(rng)
        if event == "zombie" and (zombie := zombie_op(agent, rng)) is not None:
            return zombie  # a replaced incarnation of a replica speaks
        if agent.epoch is None or agent.silent(ctx.time):
            return self._read_op(ctx, topic)
        if event == "shut-down":
            return shut_down(agent, ctx.time, silence(self.session_timeout, ctx.rng))  # leadership and ISR move away
        if event == "stall" and not stalled(self.book, ctx.time):
            return stall(agent, ctx.time, silence(self.session_timeout, rng), rng)  # fenced for its silence
        if event == "offline":
            return go_offline(agent, ctx.time, self.session_timeout, rng)  # fenced while it stays offline
        if event == "decommission":  # an operator decommissions it now, live, while it may lead or sit in ISRs
            self.lifetimes[agent.id] = 0
            if (farewell := retirement(self.book, self.lifetimes, ctx, self.session_timeout)) is not None:
                self._retire_topics_of(farewell.value["broker"])
                return farewell
        return register_op(agent, rng)  # a new incarnation (refused while the old one's lease lives)

    def _read_op(self, ctx: Context, topic: str, final: bool = False) -> Invocation:
        return broker_read(ISR, "read", read_node(ctx, self.brokers), final=final, topic=topic, partition=0)

    def _alter_op(self, ctx: Context, topic: str, b: Belief) -> Invocation:
        rng = ctx.rng
        sender = b.leader if b.leader in b.replicas and rng.random() < 0.85 else rng.choice(b.replicas)
        agent = self.book[sender]
        epoch = agent.epoch if agent.epoch is not None else -1
        if agent.epochs and rng.random() < 0.1:
            epoch = rng.choice(agent.epochs)  # an old incarnation speaks
        le, pe = b.leader_epoch, b.partition_epoch
        if rng.random() < 0.1:
            le, pe = max(0, le - 1), max(0, pe - 1)  # a stale leader
        isr = [x for x in b.isr] or [sender]
        if sender not in isr:
            isr.insert(0, sender)
        # A joiner is drawn from the whole replica set, whatever the leader believes of it: fenced,
        # shutting down, stalled, unregistered — a leader's view lags, the controller must refuse.
        outside = [x for x in b.replicas if x not in isr]
        if outside and (len(isr) == 1 or rng.random() < 0.5):
            isr.append(rng.choice(outside))
        elif len(isr) > 1:
            isr.remove(rng.choice([x for x in isr if x != sender]))
        strangers = [x for x in self.book.ids if x not in b.replicas]
        if strangers and rng.random() < P_NON_REPLICA:
            isr.append(rng.choice(strangers))  # a broker that holds no replica (INVALID_REQUEST)
        isr_epochs = [[x, self._member_epoch(x, rng)] for x in sorted(isr)]
        return op(ISR, "alter", {"topic": topic, "topic_id": b.topic_id, "partition": 0, "leader": sender,
                                 "broker_epoch": epoch, "leader_epoch": le, "partition_epoch": pe,
                                 "isr": sorted(isr), "isr_epochs": isr_epochs})

    def _member_epoch(self, b: int, rng: Any) -> int:
        """The broker epoch an AlterPartition names for ISR member `b`: the leader's belief (-1 for
        none), now and then one of its older registrations' (INELIGIBLE_REPLICA expected)."""
        agent = self.book[b]
        if (old := agent.old_epochs()) and rng.random() < P_OLD_MEMBER_EPOCH:
            return rng.choice(old)
        return agent.epoch if agent.epoch is not None else -1

    def generator(self) -> FnGen:
        return FnGen(self.next_op)

    def final_reads(self) -> OncePer:
        """One read per broker of each topic in use at the end of the run."""
        return OncePer(lambda: [f"{n}\t{t}" for n in self.brokers for t in sorted(self.beliefs)], self._final_read)

    def _final_read(self, item: str) -> Invocation:
        node, topic = item.split("\t")
        return broker_read(ISR, "read", node, final=True, topic=topic, partition=0)
