"""The `scram` workload: SCRAM credential upserts and deletions (AlterUserScramCredentials), and
logins with them on the brokers' SASL_PLAINTEXT listeners.

Ops (history field `workload: "scram"`; judged by `checker.scram`, not by a linearizability model):
- `upsert` {"user", "mechanism": "SCRAM-SHA-256" | "SCRAM-SHA-512", "password"[, "via": "controller"]}:
  AlterUserScramCredentials with one upsertion (a fresh salt, 4096 iterations, the password salted
  here as Kafka's clients do), through the process's broker (forwarded) or to the active
  controller. ok; fail on a definite refusal (UNACCEPTABLE_CREDENTIAL, …); info on NOT_CONTROLLER,
  REQUEST_TIMED_OUT or a lost connection. Every upsert sets a password never used before.
- `delete` {"user", "mechanism"[, "via"]}: one deletion. ok; fail RESOURCE_NOT_FOUND (an
  observation: there was no such credential).
- `login` {"user", "mechanism", "password", "node", "broker_read": true}: a new connection to that
  broker's SASL_PLAINTEXT listener, SaslHandshake v1 and the SCRAM exchange (SaslAuthenticate), then
  one DescribeCluster on the authenticated connection (a broker that fenced itself refuses it: the
  login then says nothing) → {"authenticated": true}, or {"authenticated": false} when the broker
  answered SASL_AUTHENTICATION_FAILED (or did not offer the mechanism).

A login changes nothing, so an unanswered one is a `fail` (the process lives on). `checker.scram`
judges that an authenticated login used a password some upsert set, and that no login succeeds
once a deletion of its credential was acknowledged longer ago than the brokers' propagation bound
(their self-fencing timeout plus slack: a broker that serves has heard from the quorum within it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.static.primitive import i8, i32

from kraftlab.node.security.client_login import SaslLogin
from kraftlab.node.security.scram import MECHANISMS, MIN_ITERATIONS, AuthenticationFailed, salted_password
from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import call, check
from kraftlab.workloads.ops import OncePer, broker_read, op, read_node
from kraftlab.workloads.session import Handlers, Session

WORKLOAD = "scram"
ALTER_USER_SCRAM_CREDENTIALS = 51


def _code_of(resp: Any) -> int:
    return int(resp.results[0].error_code) if resp.results else 0


async def _alter(session: Session, inv: Invocation, request: Any) -> Any:
    """AlterUserScramCredentials v0 (the one version Kafka serves) through the process's broker or
    straight to the active controller; the result's error in Jepsen's terms."""
    direct = inv.value.get("via") == "controller"
    if session.cluster.nodes[session.node].broker and not direct:
        resp = await session.broker(session.node, request)
    else:
        resp = await session.controller.send(request, _code_of)
    check(_code_of(resp), inv.value)
    return resp


async def upsert(session: Session, inv: Invocation) -> Any:
    v = inv.value
    mech = MECHANISMS[v["mechanism"]]
    salt = os.urandom(16)
    request = alter_req.AlterUserScramCredentialsRequest(deletions=(), upsertions=(alter_req.ScramCredentialUpsertion(
        name=v["user"], mechanism=i8(mech.code), iterations=i32(MIN_ITERATIONS), salt=salt,
        salted_password=salted_password(mech, v["password"], salt, MIN_ITERATIONS)),))
    await _alter(session, inv, request)
    return {}


async def delete(session: Session, inv: Invocation) -> Any:
    v = inv.value
    request = alter_req.AlterUserScramCredentialsRequest(upsertions=(), deletions=(alter_req.ScramCredentialDeletion(
        name=v["user"], mechanism=i8(MECHANISMS[v["mechanism"]].code)),))
    await _alter(session, inv, request)
    return {}


async def login(session: Session, inv: Invocation) -> Any:
    v = inv.value
    addr = session.cluster.nodes[v["node"]].sasl if v["node"] in session.cluster.nodes else None
    if addr is None:
        raise DefiniteFailure(f"not-sent: {v['node']} has no SASL listener")
    transport = session.conns.connector(addr)  # a connection of its own: one identity per connection
    try:
        try:
            await SaslLogin(v["mechanism"], v["user"], v["password"])(lambda r: call(transport, r))
        except AuthenticationFailed as e:
            if "SASL_AUTHENTICATION_FAILED" in str(e) or "UNSUPPORTED_SASL_MECHANISM" in str(e):
                return {"authenticated": False}
            raise DefiniteFailure(f"login: {e}", v) from e
        resp = await call(transport, DescribeClusterRequest(include_cluster_authorized_operations=False))
        check(resp.error_code)
        return {"authenticated": True}
    finally:
        await transport.close()


@dataclass
class ScramWorkload:
    """Configuration and generators of the scram workload."""

    brokers: Sequence[str]
    users: Sequence[str] = ("scram-u0", "scram-u1", "scram-u2")
    _set: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    _count: int = 0

    def handlers(self) -> Handlers:
        return {(WORKLOAD, "upsert"): upsert, (WORKLOAD, "delete"): delete, (WORKLOAD, "login"): login}

    def next_op(self, ctx: Context) -> Invocation:
        user, mech = ctx.rng.choice(list(self.users)), ctx.rng.choice(sorted(MECHANISMS))
        r = ctx.rng.random()
        if r < 0.5:
            value: dict[str, Any] = {"user": user, "mechanism": mech}
            if ctx.rng.random() < 0.2:
                value["via"] = "controller"
            if r < 0.3:
                self._count += 1
                value["password"] = f"pw-{self._count}-{ctx.rng.randrange(1 << 30)}"
                self._set.setdefault((user, mech), []).append(value["password"])
                return op(WORKLOAD, "upsert", value)
            return op(WORKLOAD, "delete", value)
        tried = self._set.get((user, mech), [])
        # mostly the newest password set, sometimes an older one or one never set
        if tried and ctx.rng.random() < 0.8:
            password = tried[-1] if ctx.rng.random() < 0.8 else ctx.rng.choice(tried)
        else:
            password = "never-set"
        return broker_read(WORKLOAD, "login", read_node(ctx, self.brokers), user=user, mechanism=mech,
                           password=password)

    def generator(self) -> FnGen:
        return FnGen(self.next_op)

    def final_reads(self) -> OncePer:
        """A login per broker with the newest password of the first user (after heal: every broker
        has caught up, so it succeeds exactly when that credential is stored)."""
        def make(node: str) -> Invocation:
            mech = sorted(MECHANISMS)[0]
            tried = self._set.get((self.users[0], mech), ["never-set"])
            return broker_read(WORKLOAD, "login", node, final=True, user=self.users[0], mechanism=mech,
                               password=tried[-1])

        return OncePer(list(self.brokers), make)
