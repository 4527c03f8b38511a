"""ACL bindings and filters with Kafka's codes and matching rules (pure).

An `AclBinding` is a resource pattern (resource type, name, pattern type LITERAL or PREFIXED) and
an entry (principal `Type:name`, host, operation, ALLOW/DENY). `AclFilter` is what DescribeAcls
and DeleteAcls send: every field may be ANY/null; a MATCH pattern type selects the bindings that
apply to one resource name (the literal name, the literal wildcard `*`, and every prefix of it).
`invalid_binding` says why CreateAcls must refuse a binding (Kafka's INVALID_REQUEST cases).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"
"""The only name of the CLUSTER resource."""
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
"""An ALLOW of any of these operations also allows the key (Kafka's implied operations); a DENY
denies only the operation it names (and ALL)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def applies_to(self, resource_type: int, name: str) -> bool:
        """Whether this binding's pattern covers the resource (literal, wildcard or prefix)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return False

    def describe(self) -> str:
        """Kafka's way of saying a binding, for logs and explanations."""
        return (
            f"(pattern={ResourceType(self.resource_type).name}:{PatternType(self.pattern_type).name}:"
            f"{self.resource_name}, principal={self.principal}, host={self.host}, "
            f"operation={AclOperation(self.operation).name}, permission={AclPermission(self.permission).name})"
        )


@dataclass(frozen=True, slots=True)
class AclEntry:
    """A binding as the metadata keeps it: with the id its records carry."""

    id: uuid.UUID
    binding: AclBinding


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission == AclPermission.ANY or self.permission == b.permission

    def _pattern_matches(self, b: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (self.resource_name, WILDCARD)
            return b.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(b.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == b.resource_name

    def invalid(self) -> str | None:
        """Why a filter cannot be served (unknown codes), or None."""
        for value, kind in (
            (self.resource_type, ResourceType),
            (self.pattern_type, PatternType),
            (self.operation, AclOperation),
            (self.permission, AclPermission),
        ):
            if value not in kind._value2member_map_ or value == 0:
                return f"unknown {kind.__name__} {value}"
        return None


def parse_principal(text: str) -> tuple[str, str] | None:
    """`User:alice` → ("User", "alice"); None if not `Type:name`."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        return None
    return kind, name


def invalid_binding(b: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (INVALID_REQUEST), or None if it may be stored."""
    if b.resource_type not in ResourceType._value2member_map_ or b.resource_type in (
        ResourceType.UNKNOWN,
        ResourceType.ANY,
    ):
        return f"invalid resource type {b.resource_type}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"invalid pattern type {b.pattern_type}: only LITERAL or PREFIXED may be stored"
    if b.operation not in AclOperation._value2member_map_ or b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"invalid operation {b.operation}"
    if b.permission not in (AclPermission.ALLOW, AclPermission.DENY):
        return f"invalid permission type {b.permission}"
    if not b.resource_name:
        return "empty resource name"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if parse_principal(b.principal) is None:
        return f"principal {b.principal!r} is not Type:name"
    if not b.host:
        return "empty host"
    return None
