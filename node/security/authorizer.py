"""Authorization decisions over the committed ACLs: Kafka's StandardAuthorizer semantics (pure).

- a principal named in `super.users` may do anything;
- among the bindings whose pattern covers the resource (literal name, literal `*`, prefixes), a
  DENY for the principal (or `User:*`) and host (or `*`) naming the operation or ALL wins;
- otherwise an ALLOW naming the operation, ALL, or an operation that implies it (DESCRIBE by
  READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS) allows;
- otherwise, if no binding covers the resource at all, `allow.everyone.if.no.acl.found` decides;
  else it is denied.

`Authorizer` is the seam (cores ask it); `AllowAll` stands for "no authorizer configured"
(`authorizer.class.name` unset), `StandardAuthorizer` for Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kraftlab.node.security.acl import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermission,
)

STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str
    """Which rule decided: `super.users`, `DENY <binding>`, `ALLOW <binding>`, `no ACL found`, …"""
    binding: AclBinding | None = None
    """The ACL that decided, if one did."""


class Authorizer(Protocol):
    """Decides whether `principal` from `host` may do `operation` on a resource."""

    @property
    def enabled(self) -> bool:
        """False when no authorizer is configured (ACL APIs answer SECURITY_DISABLED)."""
        ...

    def authorize(
        self, acls: Iterable[AclBinding], principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> Decision: ...


class AllowAll:
    """No authorizer configured: everything is allowed, as in Kafka without `authorizer.class.name`."""

    enabled = False

    def authorize(
        self, acls: Iterable[AclBinding], principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> Decision:
        return Decision(True, "no authorizer")


@dataclass(frozen=True)
class StandardAuthorizer:
    super_users: frozenset[str] = field(default_factory=frozenset)
    allow_if_no_acl: bool = False
    enabled: bool = True

    def authorize(
        self, acls: Iterable[AclBinding], principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> Decision:
        if principal in self.super_users:
            return Decision(True, "super.users")
        implied = IMPLIED_BY.get(AclOperation(operation), frozenset())
        found = False
        allow: AclBinding | None = None
        for b in acls:
            if not b.applies_to(resource_type, name):
                continue
            found = True
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
                continue
            if b.permission == AclPermission.DENY:
                if b.operation in (operation, AclOperation.ALL):
                    return Decision(False, f"DENY {b.describe()}", b)
            elif allow is None and (b.operation in (operation, AclOperation.ALL) or b.operation in implied):
                allow = b
        if allow is not None:
            return Decision(True, f"ALLOW {allow.describe()}", allow)
        if not found:
            return Decision(self.allow_if_no_acl, "no ACL found for the resource")
        return Decision(False, "no ALLOW ACL matches")
