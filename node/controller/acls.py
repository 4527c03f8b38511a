"""ACLs on the active controller: CreateAcls and DeleteAcls (Kafka's AclControlManager).

CreateAcls, per creation: a binding Kafka would store (`security.acl.invalid_binding`:
INVALID_REQUEST otherwise) becomes an AccessControlEntryRecord with a fresh id; a binding already
stored (or created earlier in the same request) is acknowledged without a second record. DeleteAcls,
per filter: an invalid filter is INVALID_REQUEST; otherwise every stored binding it matches (and
no earlier filter of the request removed) gets a RemoveAccessControlEntryRecord and is listed in
the filter's result. Each request's records are one batch (all or nothing).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kraftlab.node.security.acl import AclBinding, AclFilter, PatternType, invalid_binding


def binding_of(c: Any) -> AclBinding:
    """The binding of a CreateAcls creation (v0 has no pattern type: LITERAL)."""
    return AclBinding(
        int(c.resource_type), c.resource_name, int(getattr(c, "resource_pattern_type", PatternType.LITERAL)),
        c.principal, c.host, int(c.operation), int(c.permission_type),
    )


def filter_of(f: Any) -> AclFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (v0: LITERAL patterns only)."""
    return AclFilter(
        int(f.resource_type_filter), f.resource_name_filter,
        int(getattr(f, "pattern_type_filter", PatternType.LITERAL)), f.principal_filter, f.host_filter,
        int(f.operation), int(f.permission_type),
    )


def _new_acl_id(w: Write) -> uuid.UUID:
    while True:
        aid = uuid.UUID(int=w.rng.getrandbits(128), version=4)
        if aid not in w.image.acls:
            return aid


def create_acls(w: Write, req: Any) -> Outcome:
    results, decisions = [], []
    for c in req.creations:
        b = binding_of(c)
        problem = invalid_binding(b)
        code = ErrorCode.invalid_request if problem else ErrorCode.none
        if problem is None and b not in w.image.acls.values():
            w.emit(AccessControlEntryRecord(
                id=_new_acl_id(w), resource_type=b.resource_type, resource_name=b.resource_name,
                pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission,
            ))
        results.append({"error_code": code, "error_message": problem})
        decisions.append({"api": "CreateAcls", "acl": b.describe(), "error": error_name(code)})
    return Outcome({"results": results}, decisions)


def delete_acls(w: Write, req: Any) -> Outcome:
    results, decisions = [], []
    for f in req.filters:
        flt = filter_of(f)
        problem = flt.invalid()
        matching = []
        if problem is None:
            for aid, b in sorted(w.image.acls.items()):
                if flt.matches(b):
                    matching.append(b)
                    w.emit(RemoveAccessControlEntryRecord(id=aid))
        code = ErrorCode.invalid_request if problem else ErrorCode.none
        results.append({
            "error_code": code, "error_message": problem,
            "matching_acls": [{
                "error_code": ErrorCode.none, "resource_type": b.resource_type, "resource_name": b.resource_name,
                "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host, "operation": b.operation,
                "permission_type": b.permission,
            } for b in matching],
        })
        decisions.append({"api": "DeleteAcls", "deleted": [b.describe() for b in matching], "error": error_name(code)})
    return Outcome({"filter_results": results}, decisions)
