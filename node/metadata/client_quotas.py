"""Client quota entities and keys, as Kafka names them (KIP-546, ClientQuotaRecord).

An entity is a set of (type, name) components — `user`, `client-id` or `ip`; a name of None is
that type's default entity (`<default>` in Kafka's tools) — kept here as a sorted tuple so it can
key the image. Each entity type allows its own quota keys, with their value types:

- `user` / `client-id`: `producer_byte_rate`, `consumer_byte_rate` (whole bytes per second),
  `request_percentage` (percent of one request-handler thread's time per quota window),
  `controller_mutation_rate` (partition mutations per second);
- `ip`: `connection_creation_rate` (connections per second), never combined with another type.

`validate_entity` / `validate_op` give Kafka's refusals (INVALID_REQUEST with its reason);
`matches` is DescribeClientQuotas' filter (exact / default / any components, `strict`).
`resolve` is Kafka's precedence of quota entities for one request's (user, client-id).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
Entity = tuple[tuple[str, str | None], ...]
"""Sorted (entity type, name or None for the default) components."""

REQUEST_PERCENTAGE = "request_percentage"
_LONG, _DOUBLE = "long", "double"
KEYS: dict[str, dict[str, str]] = {
    USER: {"producer_byte_rate": _LONG, "consumer_byte_rate": _LONG, REQUEST_PERCENTAGE: _DOUBLE,
           "controller_mutation_rate": _DOUBLE},
    IP: {"connection_creation_rate": _LONG},
}
KEYS[CLIENT_ID] = KEYS[USER]

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
"""DescribeClientQuotas' component match types."""


class QuotaError(ValueError):
    """A refused entity, op or filter: Kafka answers INVALID_REQUEST with this message."""


def entity_of(components: Sequence[tuple[str, str | None]]) -> Entity:
    """The canonical entity of request components; QuotaError as Kafka refuses them."""
    if not components:
        raise QuotaError("Invalid empty client quota entity")
    types = [t for t, _ in components]
    for t in types:
        if t not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {t}")
    if len(set(types)) != len(types):
        raise QuotaError("Duplicate entity type in client quota entity")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    for t, name in components:
        if t == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaError(f"{name} is not a valid IP or resolvable host.") from None
        if name == "":
            raise QuotaError(f"Empty {t} name is not allowed in a client quota entity")
    return tuple(sorted((t, n) for t, n in components))


def validate_op(entity: Entity, key: str, value: float, remove: bool) -> None:
    """A quota key this entity's type allows, with a value of its type (unless removed)."""
    allowed = KEYS[entity[0][0]]
    kind = allowed.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if remove:
        return
    if math.isnan(value) or math.isinf(value):
        raise QuotaError(f"Configuration {key} must be a finite number")
    if kind == _LONG and value != math.floor(value):
        raise QuotaError(f"Configuration {key} must be a Long value")
    if value <= 0:
        raise QuotaError(f"Configuration {key} must be positive")


def check_filter(components: Sequence[tuple[str, int, str | None]]) -> None:
    """DescribeClientQuotas' components: known types and match types, each type at most once."""
    types = [t for t, _, _ in components]
    if len(set(types)) != len(types):
        raise QuotaError("Duplicate entity type in client quota filter")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid entity filter component combination, IP filter component should not be used "
                         "with User or ClientId filter component.")
    for t, match_type, match in components:
        if t not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {t}")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise QuotaError(f"Unknown match type {match_type}")
        if match_type == MATCH_EXACT and match is None:
            raise QuotaError("Exact match requires a name")


def matches(entity: Entity, components: Sequence[tuple[str, int, str | None]], strict: bool) -> bool:
    """Whether `entity` passes the filter: each component names a type it has (with that name, the
    default, or any); `strict` also refuses entities with types the filter does not name."""
    names = dict(entity)
    for t, match_type, match in components:
        if t not in names:
            return False
        if match_type == MATCH_EXACT and names[t] != match:
            return False
        if match_type == MATCH_DEFAULT and names[t] is not None:
            return False
    return not strict or len(names) == len(components)


def resolve(quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str, key: str) -> float | None:
    """The quota `key` applying to a request of `user` and `client_id`: the first entity in Kafka's
    precedence (user+client, user+default client, user, default user+client, default user+default
    client, default user, client, default client) that sets it; None when none does."""
    order: list[Entity] = [
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ]
    for entity in order:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value
    return None
