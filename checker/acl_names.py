"""Kafka's names for the codes of an ACL binding as metadata records store them
(AccessControlEntryRecord: resource type, pattern type, operation, permission), from Kafka's public
API (`org.apache.kafka.common.resource.ResourceType`, `PatternType`, `acl.AclOperation`,
`acl.AclPermissionType`) — the checker's own table, so a node that stored a wrong code is told apart
from one that answers with a wrong name."""

from __future__ import annotations

from typing import Any

RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}


def binding_of_record(stored: list[Any]) -> tuple[str, ...]:
    """(resource type, resource name, pattern type, principal, host, operation, permission) in Kafka's
    names, from a record's stored fields in that order (`checker.metadata.model.ImageModel.acls`);
    an unknown code keeps its number, so it matches no name a client could have been given."""
    rtype, name, ptype, principal, host, op, perm = stored
    return (RESOURCE_TYPES.get(int(rtype), str(rtype)), str(name), PATTERN_TYPES.get(int(ptype), str(ptype)),
            str(principal), str(host), OPERATIONS.get(int(op), str(op)), PERMISSIONS.get(int(perm), str(perm)))
