"""The `acl` workload: CreateAcls, DeleteAcls and DescribeAcls over a few resource patterns, and
authorization probes that make brokers decide (and journal) with the ACLs it changes.

Ops (checker model `acl`, history field `workload: "acl"`; an ACL binding is written with Kafka's
names: {"resource_type": "TOPIC", "resource_name": "acl-0", "pattern_type": "LITERAL",
"principal": "User:ANONYMOUS", "host": "*", "operation": "DESCRIBE_CONFIGS", "permission": "ALLOW"}):
- `create` {binding[, "via": "controller"]}: CreateAcls with that one creation, through the
  process's broker (which forwards it) or to the active controller. ok (Kafka acknowledges a
  binding already stored without a second record: create is idempotent); fail on a definite
  refusal (INVALID_REQUEST, SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED: no effect); info on
  NOT_CONTROLLER / REQUEST_TIMED_OUT / a lost connection.
- `delete` {binding[, "via"]}: DeleteAcls with the exact filter of that binding → {"deleted":
  [bindings]}: what the controller removed (the binding, or nothing when it was not stored).
- `describe` {"resource_type", "resource_name", "pattern_type", "node", "broker_read": true}:
  DescribeAcls of exactly that pattern on a broker → {"acls": [bindings]}.
- `list` {"node", "broker_read": true[, "final": true]}: DescribeAcls of every ACL → {"acls":
  [bindings]} (only this workload's resources, names starting `prefix`).
- `authorize` {"topic", "node", "broker_read": true}: DescribeConfigs of that topic on a broker, as
  the connection's principal (User:ANONYMOUS on a PLAINTEXT listener) → {"allowed": bool}. It
  changes nothing and the linearizability checker does not judge it: it makes the broker decide
  DESCRIBE_CONFIGS on the topic with the ACLs this workload keeps changing, so `checker.authorization`
  can judge the decisions the broker journals (StaleAuthorization: a broker cut from the quorum
  must not keep allowing by an ACL whose removal was committed past its self-fencing bound).

Writes are judged per binding (the model's key; checker.acl_model); broker reads are eventually consistent
in Kafka, so only the final lists are judged (checker.judged). The workload needs an authorizer on
the cluster (kraftlab.deploy renders Kafka's StandardAuthorizer with
`allow.everyone.if.no.acl.found=true`, so resources without ACLs, the cluster's above all, stay open
to the other workloads' anonymous clients); it puts ACLs only on resources named `prefix…`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kraftlab.node.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from kraftlab.workloads import versions
from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import check, error_name
from kraftlab.workloads.ops import OncePer, broker_read, judged_final_broker, op, read_node
from kraftlab.workloads.session import Handlers, Session

WORKLOAD = "acl"
PATTERN_FIELDS = ("resource_type", "resource_name", "pattern_type")
ENTRY_FIELDS = ("principal", "host", "operation", "permission")
BINDING_FIELDS = PATTERN_FIELDS + ENTRY_FIELDS
PRINCIPALS = ("User:ANONYMOUS", "User:acl-alice")
OPERATIONS = ("DESCRIBE_CONFIGS", "READ", "ALL")
"""The first and last allow the probes' DESCRIBE_CONFIGS; READ does not."""
TOPIC_AUTHORIZATION_FAILED = 29


def binding_codes(b: Mapping[str, Any]) -> dict[str, Any]:
    """A binding's fields as the wire carries them (Kafka's codes)."""
    return {"resource_type": ResourceType[b["resource_type"]], "resource_name": b["resource_name"],
            "pattern_type": PatternType[b["pattern_type"]], "principal": b["principal"], "host": b["host"],
            "operation": AclOperation[b["operation"]], "permission": AclPermission[b["permission"]]}


def binding_names(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
                  operation: int, permission: int) -> dict[str, Any]:
    """A binding from the wire's codes, in Kafka's names (as the history records it)."""
    return {"resource_type": ResourceType(int(resource_type)).name, "resource_name": resource_name,
            "pattern_type": PatternType(int(pattern_type)).name, "principal": principal, "host": host,
            "operation": AclOperation(int(operation)).name, "permission": AclPermission(int(permission)).name}


def _sorted(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(bindings, key=lambda b: tuple(str(b[f]) for f in BINDING_FIELDS))


async def create(session: Session, inv: Invocation) -> Any:
    c = binding_codes(inv.value)

    def make(version: int) -> Any:
        mod = versions.request_module(versions.CREATE_ACLS, version)
        creation = versions.entity(mod.AclCreation, resource_type=c["resource_type"], resource_name=c["resource_name"],
                                   resource_pattern_type=c["pattern_type"], principal=c["principal"],
                                   host=c["host"], operation=c["operation"], permission_type=c["permission"])
        return mod.CreateAclsRequest(creations=(creation,))

    resp = await session.admin(versions.CREATE_ACLS, make, lambda r: r.results[0].error_code if r.results else 0,
                               direct=inv.value.get("via") == "controller")
    check(resp.results[0].error_code, inv.value)
    return {}


def _filter(mod: Any, cls: Any, v: Mapping[str, Any], exact: bool) -> Any:
    """A DescribeAcls request / DeleteAcls filter: the pattern of `v`, and its entry when `exact`."""
    c = binding_codes({**v, "principal": v.get("principal", ""), "host": v.get("host", ""),
                       "operation": v.get("operation", "ANY"), "permission": v.get("permission", "ANY")})
    return versions.entity(cls, resource_type_filter=c["resource_type"], resource_name_filter=c["resource_name"],
                           pattern_type_filter=c["pattern_type"], principal_filter=c["principal"] if exact else None,
                           host_filter=c["host"] if exact else None,
                           operation=c["operation"] if exact else AclOperation.ANY,
                           permission_type=c["permission"] if exact else AclPermission.ANY)


async def delete(session: Session, inv: Invocation) -> Any:
    def make(version: int) -> Any:
        mod = versions.request_module(versions.DELETE_ACLS, version)
        return mod.DeleteAclsRequest(filters=(_filter(mod, mod.DeleteAclsFilter, inv.value, exact=True),))

    resp = await session.admin(versions.DELETE_ACLS, make,
                               lambda r: r.filter_results[0].error_code if r.filter_results else 0,
                               direct=inv.value.get("via") == "controller")
    result = resp.filter_results[0]
    check(result.error_code, inv.value)
    deleted = []
    for m in result.matching_acls:
        if int(m.error_code) != 0:  # Kafka reports a binding it failed to remove per match
            raise DefiniteFailure(error_name(m.error_code), inv.value)
        deleted.append(binding_names(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                                     m.operation, m.permission_type))
    return {"deleted": _sorted(deleted)}


async def _describe_acls(session: Session, node: str, pattern: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    def make(version: int) -> Any:
        mod = versions.request_module(versions.DESCRIBE_ACLS, version)
        if pattern is None:
            return versions.entity(mod.DescribeAclsRequest, resource_type_filter=ResourceType.ANY,
                                   resource_name_filter=None, pattern_type_filter=PatternType.ANY,
                                   principal_filter=None, host_filter=None, operation=AclOperation.ANY,
                                   permission_type=AclPermission.ANY)
        return _filter(mod, mod.DescribeAclsRequest, pattern, exact=False)

    resp = await session.broker_api(node, versions.DESCRIBE_ACLS, make)
    check(resp.error_code)
    return [binding_names(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                          a.permission_type)
            for r in resp.resources for a in r.acls]


async def describe(session: Session, inv: Invocation) -> Any:
    v = inv.value
    found = await _describe_acls(session, v["node"], {f: v[f] for f in PATTERN_FIELDS})
    return {"acls": _sorted([b for b in found if all(b[f] == v[f] for f in PATTERN_FIELDS)])}


def list_handler(prefix: str) -> Any:
    async def list_acls(session: Session, inv: Invocation) -> Any:
        found = await _describe_acls(session, inv.value["node"], None)
        return {"acls": _sorted([b for b in found if str(b["resource_name"]).startswith(prefix)])}

    return list_acls


async def authorize(session: Session, inv: Invocation) -> Any:
    v = inv.value

    def make(version: int) -> Any:
        mod = versions.request_module(versions.DESCRIBE_CONFIGS, version)
        resource = versions.entity(mod.DescribeConfigsResource, resource_type=ResourceType.TOPIC,
                                   resource_name=v["topic"], configuration_keys=None)
        return versions.entity(mod.DescribeConfigsRequest, resources=(resource,), include_synonyms=False,
                               include_documentation=False)

    resp = await session.broker_api(v["node"], versions.DESCRIBE_CONFIGS, make)
    code = int(resp.results[0].error_code)
    if code == TOPIC_AUTHORIZATION_FAILED:
        return {"allowed": False}
    if code not in (0, 3):  # NONE, or UNKNOWN_TOPIC_OR_PARTITION: allowed, and the topic does not exist
        check(code)
    return {"allowed": True}


@dataclass
class AclWorkload:
    """Configuration and generators of the acl workload."""

    brokers: Sequence[str]
    prefix: str = "acl-"

    @property
    def patterns(self) -> list[tuple[str, str, str]]:
        """The resource patterns it changes: two literal topics, a topic prefix, a group."""
        p = self.prefix
        return [("TOPIC", f"{p}0", "LITERAL"), ("TOPIC", f"{p}1", "LITERAL"), ("TOPIC", f"{p}p", "PREFIXED"),
                ("GROUP", f"{p}g", "LITERAL")]

    @property
    def probe_topics(self) -> list[str]:
        """Topics whose authorization the probes ask: each covered by one or two of the patterns."""
        return [f"{self.prefix}0", f"{self.prefix}1", f"{self.prefix}p0"]

    def handlers(self) -> Handlers:
        return {(WORKLOAD, "create"): create, (WORKLOAD, "delete"): delete, (WORKLOAD, "describe"): describe,
                (WORKLOAD, "list"): list_handler(self.prefix), (WORKLOAD, "authorize"): authorize}

    def binding(self, ctx: Context) -> dict[str, Any]:
        """Mostly ALLOWs for the probes' principal (User:ANONYMOUS), whose removals a stale broker
        would keep honouring; DENYs only for the other principal, so they never mask those."""
        rtype, name, ptype = ctx.rng.choice(self.patterns)
        if ctx.rng.random() < 0.7:  # the probes' principal: the two operations that allow DESCRIBE_CONFIGS
            return {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "principal": PRINCIPALS[0],
                    "host": "*", "operation": ctx.rng.choice(OPERATIONS[::2]), "permission": "ALLOW"}
        return {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "principal": PRINCIPALS[1],
                "host": "*", "operation": ctx.rng.choice(OPERATIONS),
                "permission": "DENY" if ctx.rng.random() < 0.4 else "ALLOW"}

    def next_op(self, ctx: Context) -> Invocation:
        r = ctx.rng.random()
        if r < 0.55:
            value = self.binding(ctx)
            if ctx.rng.random() < 0.2:
                value["via"] = "controller"
            return op(WORKLOAD, "create" if r < 0.3 else "delete", value)
        node = read_node(ctx, self.brokers)
        if r < 0.65:
            rtype, name, ptype = ctx.rng.choice(self.patterns)
            return broker_read(WORKLOAD, "describe", node, resource_type=rtype, resource_name=name, pattern_type=ptype)
        return broker_read(WORKLOAD, "authorize", node, topic=ctx.rng.choice(self.probe_topics))

    def generator(self) -> FnGen:
        return FnGen(self.next_op)

    def final_reads(self) -> OncePer:
        judged = judged_final_broker(self.brokers)
        return OncePer(list(self.brokers), lambda node: broker_read(WORKLOAD, "list", node, final=True,
                                                                    judged=node == judged))
