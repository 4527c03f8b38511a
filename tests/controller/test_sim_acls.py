"""The cluster simulator's ACL administrator (node/sim/kraft_acls.py): bindings and filters drawn over
the space Kafka allows, each answer judged against Kafka's AclControlManager and filter matching, and
controllers handling part of that space wrong — deliberately wrong handlers put in for the test —
caught in a run."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.static.primitive import i8

import kraftlab.node.controller.acls as acls
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from kraftlab.node.sim.kraft import KraftSim, SimViolation
from kraftlab.node.sim.kraft_acls import AclAdmin, FilterModel, storable

Handler = Callable[[Write, Any], Outcome]
T, LIT, PRE = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED
READ, ALLOW = AclOperation.READ, AclPermission.ALLOW


def _binding(name: str, pattern: int, principal: str = "User:alice", op: int = READ) -> AclBinding:
    return AclBinding(T, name, pattern, principal, "*", op, ALLOW)


def _flt(name: str | None, pattern: int, principal: str | None = None) -> FilterModel:
    return FilterModel(ResourceType.ANY, name, pattern, principal, None, AclOperation.ANY, AclPermission.ANY)


def test_filters_match_as_kafkas() -> None:
    lit, wild, pre = _binding("adm0", LIT), _binding("*", LIT), _binding("ad", PRE)
    match = _flt("adm0", PatternType.MATCH)
    assert match.matches(lit) and match.matches(wild) and match.matches(pre)
    assert not _flt("adm", PatternType.MATCH).matches(lit)
    assert _flt("adm0", PatternType.ANY).matches(lit) and not _flt("adm0", PatternType.ANY).matches(wild)
    assert not _flt("adm0", PatternType.ANY).matches(pre)  # ANY: that exact name, any pattern type
    assert _flt("ad", PRE).matches(pre) and not _flt("ad", LIT).matches(pre)
    assert _flt(None, PRE).matches(pre) and not _flt(None, PRE).matches(lit)
    assert not _flt(None, PatternType.ANY, "User:carol").matches(lit)


def test_bindings_kafka_stores() -> None:
    assert storable(_binding("adm0", LIT)) and storable(_binding("*", PRE))
    assert not storable(_binding("adm0", PatternType.MATCH)) and not storable(_binding("adm0", PatternType.ANY))
    assert not storable(_binding("adm0", LIT, op=AclOperation.ANY))
    assert not storable(_binding("adm0", LIT, principal="alice"))
    assert not storable(AclBinding(ResourceType.CLUSTER, "other", LIT, "User:a", "*", READ, ALLOW))


def _match_as_literal(original: Handler) -> Handler:
    """DeleteAcls reading a MATCH filter as LITERAL (wildcard and prefixed bindings survive it)."""
    def wrong(w: Write, req: Any) -> Outcome:
        filters = tuple(dataclasses.replace(f, pattern_type_filter=i8(LIT))
                        if f.pattern_type_filter == PatternType.MATCH else f for f in req.filters)
        return original(w, dataclasses.replace(req, filters=filters))
    return wrong


def _any_operation_stored(original: Handler) -> Handler:
    """CreateAcls storing a binding for operation ANY as ALL instead of refusing it."""
    def wrong(w: Write, req: Any) -> Outcome:
        creations = tuple(dataclasses.replace(c, operation=i8(AclOperation.ALL))
                          if c.operation == AclOperation.ANY else c for c in req.creations)
        return original(w, dataclasses.replace(req, creations=creations))
    return wrong


class _Edges(AclAdmin):
    """Every request an edge: wildcard and prefixed bindings, one for operation ANY, then a MATCH
    filter deleting by a name they cover."""

    def request(self) -> Any:
        self.sent = getattr(self, "sent", 0) + 1
        if self.sent % 2:
            return CreateAclsRequest(creations=tuple(
                AclCreation(resource_type=i8(T), resource_name=name, resource_pattern_type=i8(pattern),
                            principal="User:alice", host="*", operation=i8(op), permission_type=i8(ALLOW))
                for name, pattern, op in (("*", LIT, READ), ("ad", PRE, READ), ("adm0", LIT, AclOperation.ANY))))
        return DeleteAclsRequest(filters=(DeleteAclsFilter(
            resource_type_filter=i8(T), resource_name_filter="adm0", pattern_type_filter=i8(PatternType.MATCH),
            principal_filter=None, host_filter=None, operation=i8(AclOperation.ANY),
            permission_type=i8(AclPermission.ANY)),))


@pytest.mark.parametrize(("handler", "wrong"), [("delete_acls", _match_as_literal),
                                                ("create_acls", _any_operation_stored)])
def test_a_controller_handling_part_of_the_space_wrong_is_caught(handler: str, wrong: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acls, handler, wrong(getattr(acls, handler)))
    sim = KraftSim(seed=3)
    sim.acl_admin = _Edges(random.Random(3))
    with pytest.raises(SimViolation, match="Acls v"):
        sim.run(fault_ms=15_000, settle_ms=15_000)


def test_the_edges_are_answered_right() -> None:
    sim = KraftSim(seed=3)
    sim.acl_admin = _Edges(random.Random(3))
    sim.run(fault_ms=15_000, settle_ms=15_000)
    assert {("CreateAcls", "none"), ("CreateAcls", "invalid_request"), ("DeleteAcls", "none+")} \
        <= set(sim.acl_admin.answered)
