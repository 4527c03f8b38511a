"""The broker's own answers to DescribeAcls and DescribeUserScramCredentials, from its image (pure).

DescribeAcls: the stored bindings the filter matches, grouped by resource pattern (an invalid
filter is INVALID_REQUEST). DescribeUserScramCredentials: each named user's mechanisms and
iteration counts (never a salt or key); all users when the request names none; a user with no
credential is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.acls import filter_of
from kraftlab.node.controller.messages import respond
from kraftlab.node.metadata.image import MetadataImage


def describe_acls_response(request: Any, image: MetadataImage) -> Any:
    flt = filter_of(request)
    problem = flt.invalid()
    if problem is not None:
        return respond(request, {"error_code": ErrorCode.invalid_request, "error_message": problem, "resources": []})
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for _, b in sorted(image.acls.items()):
        if flt.matches(b):
            groups.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append({
                "principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission,
            })
    resources = [
        {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": entries}
        for (rtype, name, ptype), entries in sorted(groups.items())
    ]
    return respond(request, {"error_code": ErrorCode.none, "resources": resources})


def describe_user_scram_credentials_response(request: Any, image: MetadataImage) -> Any:
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mech), c in sorted(image.scram.items()):
        by_user.setdefault(user, []).append({"mechanism": mech, "iterations": c.iterations})
    if request.users is None or not request.users:
        results = [{"user": u, "error_code": ErrorCode.none, "credential_infos": infos} for u, infos in by_user.items()]
        return respond(request, {"error_code": ErrorCode.none, "results": results})
    counts = Counter(u.name for u in request.users)
    results = []
    for name in dict.fromkeys(u.name for u in request.users):
        if counts[name] > 1:
            results.append({"user": name, "error_code": ErrorCode.duplicate_resource,
                            "error_message": "Cannot describe SCRAM credentials for the same user twice"})
        elif name not in by_user:
            results.append({"user": name, "error_code": ErrorCode.resource_not_found,
                            "error_message": "Attempt to describe a user credential that does not exist"})
        else:
            results.append({"user": name, "error_code": ErrorCode.none, "credential_infos": by_user[name]})
    return respond(request, {"error_code": ErrorCode.none, "results": results})
