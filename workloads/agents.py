"""Simulated broker agents: what the registry and isr workloads know about their fake brokers,
and the register/heartbeat/unregister ops they send to the active controller.

An agent is a broker id from a pool disjoint from the real brokers (1000+; a pool may rotate
its agents to fresh ids, `AgentBook.rotate`). Its `Agent` record
is the clients' belief: the current incarnation and epoch (set by a successful registration),
every epoch it ever had (zombies send with old ones on purpose), when it last heartbeated.
Beliefs only steer the generators; the history records what was sent and answered.

Ops (checker model `registry`, history field `workload: "registry"`):
- `register` {"broker", "incarnation"[, "retry"][, "zombie"]} → {"epoch"}; fail DUPLICATE_BROKER_REGISTRATION
  (another incarnation holds a live lease), INCONSISTENT_CLUSTER_ID, ... A re-send of the same
  incarnation says why in `retry`: "in-doubt" (the previous send got no answer: it ended `info` —
  timed out, connection lost, NOT_CONTROLLER — or was not even sent; a new process re-sends it
  after a backoff, as a real broker retries a registration whose answer it never saw) or
  "duplicate" (sent again after an `ok`: the first answer was not seen in time). The controller
  must answer a live incarnation's re-send with the epoch it already has (KAFKA-16952 is the bug
  where it issues a new one). `zombie`: an incarnation a newer registration replaced registers
  again (its process lives on unaware): refused while the id stays registered.
- `heartbeat` {"broker", "epoch", "want_fence", "want_shut_down", "offset"[, "zombie"]} →
  {"fenced", "should_shut_down", "caught_up"}; fail STALE_BROKER_EPOCH (the broker's epoch is
  not this one) or BROKER_ID_NOT_REGISTERED. `offset` is the metadata offset the agent says it
  has replayed: everything, except that a fenced agent sometimes reports an offset short of its
  own registration, as a broker still replaying the log does (`reported_offset`): the controller
  must keep it fenced until it has caught up (KIP-631).
- `unregister` {"broker"}; fail BROKER_ID_NOT_REGISTERED.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Feature, Listener
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest
from kio.static.primitive import i16, u16

from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.kafka import check, error_name
from kraftlab.workloads.session import Handlers, Session

REGISTRY = "registry"
# Agents advertise a closed loopback port: nobody should ever connect to a simulated broker.
AGENT_HOST, AGENT_PORT = "127.0.0.1", 1
METADATA_VERSION_RANGE = (1, 30)
NOT_SENT = "not-sent"  # how a DefiniteFailure that never reached the cluster starts (workloads.kafka)
CAUGHT_UP = 2**62  # a metadata offset beyond any epoch: the agent says it has replayed everything
P_REPLAYING = 0.3
"""How often a fenced agent's heartbeat reports a metadata offset below its own registration record
(a broker still replaying the log after registering): without such heartbeats a controller that
unfences a broker before it caught up (UnfencedBeforeCaughtUp) could never be seen."""
REPLAY_LAG = (1, 200)  # how far short of its registration such a heartbeat's offset falls


@dataclass
class Agent:
    id: int
    zombie: bool = False
    incarnation: str | None = None
    epoch: int | None = None
    fenced: bool = True
    epochs: list[int] = field(default_factory=list)
    last_heartbeat: float = -1e9
    down_until: float | None = None  # shut down: silent until then, then registers anew
    quiet_until: float | None = None  # stalled: no heartbeat until then, then heartbeats on as the same registration
    offline_until: float | None = None  # asked to be fenced: keeps asking (WantFence) until then
    incarnations: list[str] = field(default_factory=list)
    """The incarnations it registered since its last acknowledged unregistration, oldest first (an
    unregistration frees the id: an older incarnation may then register again as a new one)."""
    replace_at: float | None = None  # stalled: when a new incarnation replaces it (if it will)
    revenant: tuple[int, str, float] | None = None
    """A stalled process that a new incarnation replaced meanwhile: (its epoch, its incarnation,
    when it wakes) — it then speaks as it was, unaware (STALE_BROKER_EPOCH, DUPLICATE_BROKER_REGISTRATION)."""
    attempt: str | None = None  # the incarnation of the latest registration sent as a new one
    resend: tuple[str, str] | None = None  # (incarnation, "in-doubt" | "duplicate"): may be re-sent
    resend_due: float | None = None  # when the pending re-send goes out (after a backoff)
    registering_since: float | None = None  # a registration of it is in flight since then (generator time)
    invocations: int = 0  # ops sent for it so far (its key's history length: see AgentBook.rotate)
    unknown: int = 0  # its ops that ended info (outcome unknown), which cost a key's check the most

    def registering(self, now: float, patience: float) -> bool:
        """A registration is in flight: a broker process registers once at a time. Forgotten after
        `patience` (an op the interpreter could not even send never reaches the handler)."""
        return self.registering_since is not None and now - self.registering_since < patience

    def in_doubt(self, incarnation: str) -> None:
        """A registration of `incarnation` got no answer (it ended info, or was not even sent):
        re-sendable, unless the agent has moved on to another incarnation since."""
        if incarnation == self.attempt:
            self.resend = (incarnation, "in-doubt")

    def acknowledged(self, incarnation: str) -> None:
        """A registration of `incarnation` was answered ok: a duplicate send may follow."""
        if incarnation == self.attempt and self.resend is None:
            self.resend = (incarnation, "duplicate")

    def registered(self, incarnation: str, epoch: int) -> None:
        self.incarnation, self.epoch, self.fenced, self.down_until = incarnation, epoch, True, None
        self.quiet_until = self.replace_at = self.offline_until = None  # a registration answered: its process is live
        if epoch not in self.epochs:
            self.epochs.append(epoch)
        if incarnation not in self.incarnations:
            self.incarnations.append(incarnation)

    def silent(self, now: float) -> bool:
        """Shut down, or stalled: the agent sends nothing of its own now."""
        return self.down_until is not None or (self.quiet_until is not None and now < self.quiet_until)

    def old_epochs(self) -> list[int]:
        """Epochs of its earlier registrations (what a zombie of it would still send)."""
        return [e for e in self.epochs if e != self.epoch]

    def old_incarnations(self) -> list[str]:
        """Incarnations a newer registration of it replaced (since its last unregistration: those
        the controller must refuse as zombies)."""
        return [i for i in self.incarnations if i != self.incarnation]

    def unregistered(self) -> None:
        """Its unregistration was acknowledged: the id is free, no incarnation of it is retired."""
        self.forget()
        self.incarnations.clear()

    def forget(self) -> None:
        self.incarnation, self.epoch, self.fenced = None, None, True


ID_SPAN = 900
"""Agent ids of one book stay in [base, base + ID_SPAN): rotation wraps around (skipping live ids),
so a book never reaches another book's pool."""


@dataclass
class AgentBook:
    """The agents of one workload, by id.

    A book may rotate its agents (`rotate`), as Jepsen's independent workloads rotate keys: an
    agent that has lived long enough is decommissioned and a fresh broker id takes its place.
    Each broker id is a key of the `registry` model's linearizability check, whose cost grows
    with a key's history (most of all with its ops that ended `info`, which stay concurrent with
    everything after them): bounded lifetimes keep an hour's history as checkable as a minute's,
    and each rotation also exercises a broker id the controller has never seen."""

    agents: dict[int, Agent]
    base: int = 0
    next_id: int = 0

    @classmethod
    def pool(cls, base: int, n: int, zombies: int = 0) -> AgentBook:
        if not 0 < n < ID_SPAN:
            raise ValueError(f"an agent pool holds 1..{ID_SPAN - 1} agents, not {n}")
        return cls({base + i: Agent(base + i, zombie=i < zombies) for i in range(n)}, base, base + n)

    def rotate(self, agent: Agent) -> Agent:
        """Retire `agent` (its id is not used again until the span wraps around) and add a fresh
        agent of the same kind under the next free id."""
        del self.agents[agent.id]
        while True:
            b, self.next_id = self.next_id, self.base + (self.next_id + 1 - self.base) % ID_SPAN
            if b not in self.agents and b != agent.id:
                break
        fresh = self.agents[b] = Agent(b, zombie=agent.zombie)
        return fresh

    def __getitem__(self, b: int) -> Agent:
        return self.agents[b]

    @property
    def ids(self) -> list[int]:
        return sorted(self.agents)

    def find(self, b: int) -> Agent | None:
        return self.agents.get(b)

    def replaceable(self, now: float) -> list[Agent]:
        """Stalled agents due for replacement (silent past their session: the controller fenced
        them): a supervisor starts a new incarnation while the stalled process sleeps on."""
        return [a for a in self.agents.values() if a.replace_at is not None and now >= a.replace_at
                and a.quiet_until is not None and now < a.quiet_until and a.epoch is not None
                and a.registering_since is None]

    def awake(self, now: float) -> list[Agent]:
        """Agents whose replaced stalled process has woken."""
        return [a for a in self.agents.values() if a.revenant is not None and now >= a.revenant[2]]

    def restartable(self, now: float) -> list[Agent]:
        """Agents that were shut down and have stayed silent long enough to come back."""
        return [a for a in self.agents.values() if a.down_until is not None and now >= a.down_until]


def register_op(agent: Agent, rng: random.Random) -> Invocation:
    """A registration as a new incarnation (a seeded random UUID); the agent moves on to it."""
    incarnation = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    agent.attempt, agent.resend, agent.resend_due = incarnation, None, None
    agent.invocations += 1
    return Invocation("register", {"broker": agent.id, "incarnation": incarnation}, {"workload": REGISTRY})


def zombie_register_op(agent: Agent, incarnation: str) -> Invocation:
    """A replaced incarnation's process registers again (it never learnt it was replaced): the
    controller must refuse it while the id stays registered (DUPLICATE_BROKER_REGISTRATION)."""
    agent.invocations += 1
    return Invocation("register", {"broker": agent.id, "incarnation": incarnation, "zombie": True},
                      {"workload": REGISTRY})


def resend_op(agent: Agent) -> Invocation:
    """The agent's pending re-send (`Agent.resend`) of a registration with the same incarnation."""
    assert agent.resend is not None
    incarnation, why = agent.resend
    agent.resend = agent.resend_due = None
    agent.invocations += 1
    return Invocation("register", {"broker": agent.id, "incarnation": incarnation, "retry": why},
                      {"workload": REGISTRY})


def reported_offset(agent: Agent, rng: random.Random) -> int:
    """The metadata offset a heartbeat of `agent`'s current registration reports (see P_REPLAYING)."""
    if agent.fenced and agent.epoch is not None and agent.epoch > 0 and rng.random() < P_REPLAYING:
        return max(0, agent.epoch - rng.randint(*REPLAY_LAG))
    return CAUGHT_UP


def heartbeat_op(agent: Agent, epoch: int, *, want_fence: bool = False, want_shut_down: bool = False,
                 zombie: bool = False, offset: int = CAUGHT_UP) -> Invocation:
    agent.invocations += 1
    value: dict[str, Any] = {"broker": agent.id, "epoch": epoch, "want_fence": want_fence,
                             "want_shut_down": want_shut_down, "offset": offset}
    if zombie:
        value["zombie"] = True
    return Invocation("heartbeat", value, {"workload": REGISTRY})


def unregister_op(agent: Agent) -> Invocation:
    agent.invocations += 1
    return Invocation("unregister", {"broker": agent.id}, {"workload": REGISTRY})


def agent_handlers(books: list[AgentBook]) -> Handlers:
    """register/heartbeat/unregister handlers that keep the books' beliefs up to date."""

    def agent_of(b: int) -> Agent | None:
        for book in books:
            if (a := book.find(b)) is not None:
                return a
        return None

    async def register(session: Session, inv: Invocation) -> Any:
        v = inv.value
        a = agent_of(v["broker"])
        try:
            req = BrokerRegistrationRequest(
                broker_id=v["broker"], cluster_id=await session.cluster_id(),
                incarnation_id=uuid.UUID(v["incarnation"]),
                listeners=(Listener(name="PLAINTEXT", host=AGENT_HOST, port=u16(AGENT_PORT),
                                    security_protocol=i16(0)),),
                features=(Feature(name="metadata.version", min_supported_version=i16(METADATA_VERSION_RANGE[0]),
                                  max_supported_version=i16(METADATA_VERSION_RANGE[1])),),
                rack=None)
            resp = await session.controller.send(req, lambda r: r.error_code)
            check(resp.error_code, v)
        except DefiniteFailure as e:
            if a is not None and e.error.startswith(NOT_SENT):  # no answer either: a broker tries again
                a.in_doubt(v["incarnation"])
            raise
        except BaseException:  # the op completes info (a timeout cancels us): its outcome is unknown
            if a is not None:
                a.in_doubt(v["incarnation"])
                a.unknown += 1
            raise
        finally:
            if a is not None:
                a.registering_since = None
        if a is not None:
            a.registered(v["incarnation"], int(resp.broker_epoch))
            a.acknowledged(v["incarnation"])
        return {"epoch": int(resp.broker_epoch)}

    async def heartbeat(session: Session, inv: Invocation) -> Any:
        v = inv.value
        req = BrokerHeartbeatRequest(broker_id=v["broker"], broker_epoch=v["epoch"],
                                     current_metadata_offset=v["offset"], want_fence=v["want_fence"],
                                     want_shut_down=v["want_shut_down"])
        resp = await session.controller.send(req, lambda r: r.error_code)
        a = agent_of(v["broker"])
        if a is not None and a.epoch == v["epoch"]:
            if error_name(resp.error_code) in ("STALE_BROKER_EPOCH", "BROKER_ID_NOT_REGISTERED"):
                a.forget()  # someone re-registered or unregistered it
            elif int(resp.error_code) == 0:
                a.fenced = bool(resp.is_fenced)
        check(resp.error_code, v)
        return {"fenced": bool(resp.is_fenced), "should_shut_down": bool(resp.should_shut_down),
                "caught_up": bool(resp.is_caught_up)}

    async def unregister(session: Session, inv: Invocation) -> Any:
        v = inv.value
        resp = await session.controller.send(UnregisterBrokerRequest(broker_id=v["broker"]), lambda r: r.error_code)
        check(resp.error_code, v)
        if (a := agent_of(v["broker"])) is not None:
            a.unregistered()
        return None

    return {(REGISTRY, "register"): register, (REGISTRY, "heartbeat"): heartbeat,
            (REGISTRY, "unregister"): unregister}
