"""The `registry` workload: simulated broker agents register, heartbeat, shut down, unregister.

Agents (ids `base`…, disjoint from the real brokers) register with fresh incarnation ids at the
active controller, heartbeat with their epoch (unfencing themselves with want_fence=false and a
caught-up metadata offset), sometimes ask for controlled shutdown (want_shut_down), unregister,
and re-register as a new incarnation while the old one may still be alive (the controller must
answer DUPLICATE_BROKER_REGISTRATION while its lease is live). Zombie agents keep heartbeating
with an old epoch on purpose (STALE_BROKER_EPOCH expected). After a lifetime of 100–200 ops an
agent is decommissioned (unregistered) and a never-used broker id takes its place, so each id's
history — one key of the linearizability check — stays short however long the run (LIFETIME,
sooner after MAX_UNKNOWN registrations with unknown outcomes).
Op formats: `workloads.agents`.

Re-sends, as real brokers do (KAFKA-16952 is about them): after a registration ends `info`
(timed out, connection lost, NOT_CONTROLLER) its process is retired, and a new process usually
re-sends `register` with the SAME incarnation, after a backoff, before the agent moves on (also
when a send could not even go out); now and then an agent also re-sends right after an `ok` (a
duplicate send). The value says `"retry": "in-doubt"` or
`"duplicate"`. A correct controller answers a live incarnation's re-send with the epoch it has.

Reads: `read` {"node", "broker_read": true[, "final": true], "api"} → {"unfenced": [agent ids]}
via DescribeCluster or Metadata on a broker. Kafka's broker APIs show only unfenced brokers and
no broker epochs, so these reads are NOT the `registry` model's `read` (which needs every
registration with its epoch): the linearizability checker gets the registry's writes, and the
broker reads are judged by no checker yet (`checker.judged` says which is which).
Broker reads are eventually consistent in Kafka (a broker's image may lag), hence the marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

from kraftlab.workloads.agents import (
    REGISTRY,
    Agent,
    AgentBook,
    agent_handlers,
    heartbeat_op,
    register_op,
    reported_offset,
    resend_op,
    unregister_op,
    zombie_register_op,
)
from kraftlab.workloads.client import Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import check
from kraftlab.workloads.ops import OncePer, broker_read, read_node
from kraftlab.workloads.session import Handlers, Session
from kraftlab.workloads.topics import metadata


def read_handler(book: AgentBook) -> Any:
    async def read(session: Session, inv: Invocation) -> Any:
        v = inv.value
        if v.get("api") == "Metadata":
            resp = await metadata(session, v["node"], [])
            ids = [int(b.node_id) for b in resp.brokers]
        else:
            resp = await session.broker(v["node"], DescribeClusterRequest(include_cluster_authorized_operations=False))
            check(resp.error_code, v)
            ids = [int(b.broker_id) for b in resp.brokers]
        return {"unfenced": sorted(b for b in ids if b in book.agents)}

    return read


def due_for_heartbeat(book: AgentBook, now: float, interval: float) -> Agent | None:
    """The registered agent that has waited longest, if it is due."""
    live = [a for a in book.agents.values()
            if a.epoch is not None and not a.silent(now) and now - a.last_heartbeat >= interval]
    return min(live, key=lambda a: a.last_heartbeat) if live else None


def keepalive(a: Agent, now: float, session_timeout: float, rng: Any) -> Invocation:
    assert a.epoch is not None
    a.last_heartbeat, a.quiet_until = now, None
    if a.offline_until is not None and now < a.offline_until:
        return heartbeat_op(a, a.epoch, want_fence=True)  # still offline: keeps asking to be fenced
    a.offline_until = None
    if rng.random() < 0.02:
        return go_offline(a, now, session_timeout, rng)
    return heartbeat_op(a, a.epoch, offset=reported_offset(a, rng))


OFFLINE = (0.3, 1.0)
"""How long a broker that asks to be fenced stays offline, in session timeouts (drawn each time)."""


def go_offline(a: Agent, now: float, session_timeout: float, rng: Any) -> Invocation:
    """The agent asks to be fenced (a broker going offline on purpose, as one whose log directories
    all failed does) and keeps asking in its keepalives for a drawn while before it asks to be
    unfenced again: a fenced window that spans several of its peers' ISR changes, as a real one
    does, rather than one heartbeat interval (IsrJoinersEligible, LeaderEligible, FencedLeavesIsr)."""
    assert a.epoch is not None
    a.last_heartbeat, a.quiet_until = now, None
    a.offline_until = now + session_timeout * rng.uniform(*OFFLINE)
    return heartbeat_op(a, a.epoch, want_fence=True)


SILENCE = (1.2, 2.5)
"""An agent that shut down stays silent for this many session timeouts (drawn per shutdown): past
the lease, and often past the session plus the checkers' slack and confirmation, so a controller
that fails to fence a silent broker is seen (SessionNotFenced needs more than 13 s at the default
9-s session)."""


def silence(session_timeout: float, rng: Any) -> float:
    return session_timeout * rng.uniform(*SILENCE)


def stall(a: Agent, now: float, quiet_for: float, rng: Any) -> Invocation:
    """The agent's last heartbeat before it stalls (a paused or partitioned broker process): silent
    past its session, so the controller must fence it, then it heartbeats on as the same
    registration — a silence SessionNotFenced judges, and a fenced broker whose stale peers still
    propose it for ISRs (IsrJoinersEligible) and that must catch up again to be unfenced."""
    assert a.epoch is not None
    a.last_heartbeat, a.quiet_until = now, now + quiet_for
    a.replace_at = now + quiet_for * REPLACE_AT if rng.random() < P_REPLACE else None
    return heartbeat_op(a, a.epoch, offset=reported_offset(a, rng))


def stalled(book: AgentBook, now: float) -> bool:
    """One of the book's agents is stalled now (at most one at a time stalls)."""
    return any(a.quiet_until is not None and now < a.quiet_until for a in book.agents.values())


def zombie_op(a: Agent, rng: Any) -> Invocation | None:
    """What the process of one of the agent's replaced registrations sends, if it had one: a
    heartbeat with its old broker epoch (STALE_BROKER_EPOCH expected) or, now and then, its
    registration again (DUPLICATE_BROKER_REGISTRATION while the id stays registered)."""
    if (incs := a.old_incarnations()) and rng.random() < 0.4:
        return zombie_register_op(a, rng.choice(incs))
    if old := a.old_epochs():
        return heartbeat_op(a, rng.choice(old), zombie=True)
    return None


def shut_down(a: Agent, now: float, restart_after: float) -> Invocation:
    """Ask for controlled shutdown, then stay silent until the lease is surely gone and come
    back as a new incarnation."""
    assert a.epoch is not None
    a.down_until = now + restart_after
    return heartbeat_op(a, a.epoch, want_shut_down=True)


P_SHUT_DOWN, P_STALL, P_STALL_KEEPALIVE = 0.05, 0.05, 0.02
"""Of a registry agent's own heartbeats, how many ask for controlled shutdown (it then comes back
as a new incarnation, leaving an old epoch and incarnation its zombie may use) and how many are its
last before a stall (one agent of a book at a time); and how many of the keepalives a book's agents
are due for are their last before a stall — keepalives are most of a busy run's agent ops, so
stalls come about once or twice a minute per book."""


LIFETIME = (100, 200)
"""How many ops an agent sends before it is decommissioned (unregistered) and a fresh broker id
takes its place (drawn per agent): about what one broker id sees in a 60-s run, so a key's
history stays checkable in an hour-long soak (AgentBook.rotate)."""
MAX_UNKNOWN = 12
"""An agent is decommissioned sooner once this many of its registrations ended `info`: each may or
may not have taken effect, so the check of its key branches on every one (a broker id whose
registrations kept timing out through a long outage had 89 and could not be checked in 300 s)."""


def retirement(book: AgentBook, lifetimes: dict[int, int], ctx: Context, patience: float) -> Invocation | None:
    """The decommission of the first agent past its lifetime (or its share of unknown outcomes)
    that has no registration in flight and is not silent after a shutdown (a pending re-send is given up: an agent
    whose registrations keep timing out always has one): it is unregistered — whatever the clients
    believe of it, a lost registration may have taken — and replaced by a fresh agent."""
    for a in [book[b] for b in book.ids]:
        limit = lifetimes.setdefault(a.id, ctx.rng.randint(*LIFETIME))
        in_flight = a.registering(ctx.time, patience) and a.resend is None  # (a held re-send marks it too)
        silent = a.down_until is not None and ctx.time < a.down_until  # shut down, not back yet
        if (a.invocations < limit and a.unknown < MAX_UNKNOWN) or silent or in_flight:
            continue
        a.resend = a.resend_due = None  # a broker being decommissioned gives up its pending re-send
        del lifetimes[a.id]
        book.rotate(a)
        return unregister_op(a)
    return None


P_RESEND = {"in-doubt": 0.8, "duplicate": 0.1}  # how often a pending re-send is sent, by why
RESEND_BACKOFF = {"in-doubt": 0.5, "duplicate": 0.0}  # seconds before it goes out


def resend(book: AgentBook, ctx: Context) -> Invocation | None:
    """The first pending re-send (by agent id) that is due. Each pending one is rolled for once:
    dropped (the agent moves on), or held for its backoff, during which the agent starts no new
    incarnation (it is still registering)."""
    for b in book.ids:
        a = book[b]
        if a.resend is None:
            continue
        why = a.resend[1]
        if a.down_until is not None or (a.resend_due is None and ctx.rng.random() >= P_RESEND[why]):
            a.resend = a.resend_due = None
            continue
        if a.resend_due is None:
            a.resend_due = ctx.time + RESEND_BACKOFF[why]
        a.registering_since = ctx.time
        if ctx.time >= a.resend_due:
            return resend_op(a)
    return None


P_REPLACE, REPLACE_AT, REPLACE_RETRY = 0.5, 0.9, 1.0
"""How often a stall ends in a replacement: a new incarnation registers when that much of the
stall has passed (past the session: a stall lasts at least 1.2 of them, so its lease expired)."""


def replace(a: Agent, now: float, rng: Any) -> Invocation:
    """A new incarnation of a stalled agent, while the stalled process sleeps on and wakes as a
    revenant (see `revenant_op`). Refused while the old lease lives — and a newly active controller
    grants every registered broker a fresh one — it is tried again every REPLACE_RETRY seconds until
    accepted (`Agent.registered` ends the stall) or the stall ends (the old process is then live)."""
    assert a.epoch is not None and a.incarnation is not None and a.quiet_until is not None
    if a.revenant is None:
        a.revenant = (a.epoch, a.incarnation, a.quiet_until)
    a.replace_at = now + REPLACE_RETRY
    a.registering_since = now
    return register_op(a, rng)


def revenant_op(a: Agent, rng: Any) -> Invocation:
    """The woken stalled process of a replaced incarnation: its heartbeat with its old epoch, and
    now and then its registration again (it restarts its lifecycle); then it is gone."""
    assert a.revenant is not None
    epoch, incarnation, _ = a.revenant
    a.revenant = None
    if incarnation == a.incarnation:  # the replacement did not take: it is the live process again
        return heartbeat_op(a, epoch, offset=reported_offset(a, rng))
    if rng.random() < 0.5:
        return zombie_register_op(a, incarnation)
    return heartbeat_op(a, epoch, zombie=True)


def lifecycle_op(book: AgentBook, ctx: Context, session_timeout: float) -> Invocation | None:
    """The keepalive (every sixth of the session timeout), restart or replacement an agent is due
    for, or a replaced stalled process that woke, if any (most of the time)."""
    if (back := book.restartable(ctx.time)) and ctx.rng.random() < 0.8:
        return register_op(ctx.rng.choice(back), ctx.rng)
    if woke := book.awake(ctx.time):
        return revenant_op(ctx.rng.choice(woke), ctx.rng)
    if stuck := book.replaceable(ctx.time):
        return replace(ctx.rng.choice(stuck), ctx.time, ctx.rng)
    if (a := due_for_heartbeat(book, ctx.time, session_timeout / 6)) is not None and ctx.rng.random() < 0.8:
        if ctx.rng.random() < P_STALL_KEEPALIVE and not stalled(book, ctx.time):
            return stall(a, ctx.time, silence(session_timeout, ctx.rng), ctx.rng)
        return keepalive(a, ctx.time, session_timeout, ctx.rng)
    return None


@dataclass
class RegistryWorkload:
    brokers: Sequence[str]
    base: int = 1000
    agents: int = 6
    zombies: int = 2
    session_timeout: float = 9.0  # the cluster's broker.session.timeout.ms, in seconds
    book: AgentBook = field(init=False)
    lifetimes: dict[int, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.book = AgentBook.pool(self.base, self.agents, self.zombies)

    def handlers(self) -> Handlers:
        return {**agent_handlers([self.book]), (REGISTRY, "read"): read_handler(self.book)}

    def next_op(self, ctx: Context) -> Invocation:
        if (farewell := retirement(self.book, self.lifetimes, ctx, self.session_timeout)) is not None:
            return farewell
        if (again := resend(self.book, ctx)) is not None:
            return again
        if (due := lifecycle_op(self.book, ctx, self.session_timeout)) is not None:
            return due
        a = self.book[ctx.rng.choice(self.book.ids)]
        r = ctx.rng.random()
        if a.zombie and r < 0.3 and (zombie := zombie_op(a, ctx.rng)) is not None:
            return zombie
        if a.epoch is None:
            return self._register(a, ctx) if r < 0.8 else self._read(ctx)
        if a.silent(ctx.time):
            return self._read(ctx)
        if r < 0.4:
            if (pick := ctx.rng.random()) < P_SHUT_DOWN:
                return shut_down(a, ctx.time, silence(self.session_timeout, ctx.rng))
            if pick < P_SHUT_DOWN + P_STALL and not stalled(self.book, ctx.time):
                return stall(a, ctx.time, silence(self.session_timeout, ctx.rng), ctx.rng)
            a.last_heartbeat = ctx.time
            return heartbeat_op(a, a.epoch, offset=reported_offset(a, ctx.rng))
        if r < 0.55:
            return self._register(a, ctx)  # a new incarnation while the old one may be alive
        if r < 0.62:
            return unregister_op(a)
        return self._read(ctx)

    def _register(self, a: Agent, ctx: Context) -> Invocation:
        """A new incarnation of `a`, unless one of its registrations is in flight (a read then):
        a broker registers once at a time, so one that ends info is re-sent, not overtaken."""
        if a.registering(ctx.time, self.session_timeout):
            return self._read(ctx)
        a.registering_since = ctx.time
        return register_op(a, ctx.rng)

    def _read(self, ctx: Context) -> Invocation:
        api = ctx.rng.choice(["DescribeCluster", "Metadata"])
        return broker_read(REGISTRY, "read", read_node(ctx, self.brokers), api=api)

    def generator(self) -> FnGen:
        return FnGen(self.next_op)

    def final_reads(self) -> OncePer:
        return OncePer(list(self.brokers),
                       lambda node: broker_read(REGISTRY, "read", node, final=True, api="DescribeCluster"))
