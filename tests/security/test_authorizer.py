"""StandardAuthorizer semantics and ACL filters (pure)."""

from __future__ import annotations

import pytest

from kraftlab.node.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    invalid_binding,
)
from kraftlab.node.security.authorizer import AllowAll, StandardAuthorizer

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
Op = AclOperation


def acl(name: str, op: int, perm: int = ALLOW, principal: str = "User:alice", pattern: int = LIT,
        rtype: int = TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(acls: list[AclBinding], op: int, name: str = "orders", principal: str = "User:alice",
            host: str = "10.0.0.1", rtype: int = TOPIC, **kw: object) -> bool:
    return StandardAuthorizer(**kw).authorize(acls, principal, host, op, rtype, name).allowed  # type: ignore[arg-type]


def test_literal_prefixed_and_wildcard_patterns_apply() -> None:
    assert allowed([acl("orders", Op.READ)], Op.READ)
    assert not allowed([acl("orders", Op.READ)], Op.READ, name="orders2")
    assert allowed([acl("ord", Op.READ, pattern=PRE)], Op.READ, name="orders2")
    assert not allowed([acl("x", Op.READ, pattern=PRE)], Op.READ)
    assert allowed([acl("*", Op.READ)], Op.READ, name="anything")


def test_deny_wins_over_allow_and_names_the_rule() -> None:
    acls = [acl("orders", Op.ALL), acl("ord", Op.WRITE, DENY, pattern=PRE)]
    decision = StandardAuthorizer().authorize(acls, "User:alice", "h", Op.WRITE, TOPIC, "orders")
    assert not decision.allowed and decision.reason.startswith("DENY")
    assert allowed(acls, Op.READ)


def test_implied_operations_allow_describe_but_a_deny_denies_only_what_it_names() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed([acl("orders", op)], Op.DESCRIBE)
    assert allowed([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl("orders", Op.DESCRIBE)], Op.READ)
    assert allowed([acl("orders", Op.DESCRIBE), acl("orders", Op.READ, DENY)], Op.DESCRIBE)
    assert not allowed([acl("orders", Op.ALL), acl("orders", Op.ALL, DENY)], Op.DESCRIBE)


def test_principal_and_host_must_match_or_be_wildcards() -> None:
    assert not allowed([acl("orders", Op.READ, principal="User:bob")], Op.READ)
    assert allowed([acl("orders", Op.READ, principal="User:*")], Op.READ)
    assert not allowed([acl("orders", Op.READ, host="10.0.0.9")], Op.READ)
    assert allowed([acl("orders", Op.READ, host="10.0.0.1")], Op.READ)


def test_no_acl_for_the_resource_follows_allow_everyone_if_no_acl_found() -> None:
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, allow_if_no_acl=True)
    # an ACL of someone else on the resource: the resource has ACLs, so it is denied either way
    assert not allowed([acl("orders", Op.READ, principal="User:bob")], Op.READ, allow_if_no_acl=True)
    assert allowed([acl("other", Op.READ, principal="User:bob")], Op.READ, allow_if_no_acl=True)


def test_super_users_may_do_anything_and_no_authorizer_allows_all() -> None:
    deny_all = [acl("orders", Op.ALL, DENY, principal="User:*")]
    assert allowed(deny_all, Op.DELETE, principal="User:admin", super_users=frozenset({"User:admin"}))
    assert not allowed(deny_all, Op.DELETE)
    assert AllowAll().authorize(deny_all, "User:alice", "h", Op.DELETE, TOPIC, "orders").allowed
    assert not AllowAll().enabled


def test_filters_match_as_describe_and_delete_acls_do() -> None:
    lit, pre, star = acl("orders", Op.READ), acl("ord", Op.READ, pattern=PRE), acl("*", Op.WRITE)
    every = [lit, pre, star]
    assert [b for b in every if AclFilter().matches(b)] == every
    assert [b for b in every if AclFilter(TOPIC, "orders", PatternType.MATCH).matches(b)] == every
    assert [b for b in every if AclFilter(TOPIC, "orders", PatternType.ANY).matches(b)] == [lit]
    assert [b for b in every if AclFilter(TOPIC, "ord", PRE).matches(b)] == [pre]
    assert [b for b in every if AclFilter(operation=Op.WRITE).matches(b)] == [star]
    assert [b for b in every if AclFilter(CLUSTER).matches(b)] == []
    assert AclFilter(operation=99).invalid() is not None
    assert AclFilter(resource_type=0).invalid() is not None


@pytest.mark.parametrize("binding", [
    acl("orders", Op.ANY), acl("orders", Op.READ, AclPermission.ANY), acl("orders", Op.READ, pattern=PatternType.MATCH),
    acl("orders", Op.READ, rtype=ResourceType.ANY), acl("x", Op.ALTER, rtype=CLUSTER), acl("", Op.READ),
    acl("orders", Op.READ, principal="alice"), acl("orders", Op.READ, host=""),
])
def test_bindings_kafka_would_refuse_to_store(binding: AclBinding) -> None:
    assert invalid_binding(binding) is not None


def test_a_valid_binding_is_stored() -> None:
    assert invalid_binding(acl("kafka-cluster", Op.ALTER, rtype=CLUSTER)) is None
