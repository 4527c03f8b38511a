"""Request versions for the cluster simulator's clients, as Kafka's clients negotiate them: each
request is sent at a version drawn from the range the node advertises in ApiVersions
(`node.protocol.served`) for the role that answers it — not always the newest — and rebuilt at that
version from the client's newest form (fields the version lacks dropped, fields only it has at
their schema default), so every version's encoding, decoding and answer goes through the node.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

from kraftlab.node.controller.messages import api_name, as_values, build
from kraftlab.node.protocol.served import BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS, TOKEN_FORWARDED_API_VERSIONS

BROKER = {**BROKER_API_VERSIONS, **TOKEN_FORWARDED_API_VERSIONS}
CONTROLLER = CONTROLLER_API_VERSIONS


def _class_at(entity: Any, version: int) -> type | None:
    """The kio class of `entity`'s API at `version` (None: kio has no schema of it)."""
    parts = type(entity).__module__.split(".")
    parts[-2] = f"v{version}"
    try:
        module = importlib.import_module(".".join(parts))
    except ModuleNotFoundError:
        return None
    cls = getattr(module, type(entity).__name__, None)
    return cls if isinstance(cls, type) else None


def at_version(entity: Any, version: int) -> Any:
    """`entity` rebuilt at `version` of its API."""
    cls = _class_at(entity, version)
    if cls is None:
        raise ValueError(f"no schema of {type(entity).__name__} v{version}")
    return build(cls, as_values(entity))


def versions(entity: Any, served: dict[str, tuple[int, int, int]]) -> list[int]:
    """The versions of `entity`'s API that `served` advertises and that have a schema."""
    _, low, high = served[api_name(entity)]
    return [v for v in range(low, high + 1) if _class_at(entity, v) is not None]


def drawn(rng: random.Random, entity: Any, served: dict[str, tuple[int, int, int]]) -> Any:
    """`entity` at a version drawn uniformly from those `served` advertises."""
    return at_version(entity, rng.choice(versions(entity, served)))
