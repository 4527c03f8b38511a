"""A SCRAM administrator for the cluster simulator: AlterUserScramCredentials sent straight to a
controller (`kafka-configs --bootstrap-controller --alter --add-config SCRAM-SHA-256=…`), with users,
mechanisms and iteration counts drawn over the space Kafka allows, each answer and the image the
decision left judged against a model of Kafka's ScramControlManager.alterCredentials.

Each request: 1-3 deletions and upsertions of users alice, bob, carol or "" (the empty name), with
SCRAM-SHA-256, SCRAM-SHA-512 or an unknown mechanism, iterations 4096, 8192, 16384 or just outside
(4095, 16385) or far below (100). Kafka keys a request's changes by user name and judges, per user,
its first change (deletions before upsertions): an empty name UNACCEPTABLE_CREDENTIAL, an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, a
deletion of a credential not stored RESOURCE_NOT_FOUND; an acceptable first change followed by any
other change of that user DUPLICATE_RESOURCE; else NONE. One result per user asked. After the
decision: a deleted credential is gone, an upserted one is stored with the salt and iterations asked,
and a refused user's credentials are as they were. A fifth of the requests go to a standby: every
result NOT_CONTROLLER.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import MetadataImage

USERS = ("alice", "bob", "carol", "")
MECHANISMS = {1: 32, 2: 64}
"""Kafka's SCRAM mechanism codes (SCRAM-SHA-256, SCRAM-SHA-512) → the salted password's length."""
UNKNOWN_MECHANISM = 7
ITERATIONS = (4096, 8192, 16384, 4095, 16385, 100)
LOWEST, HIGHEST = 4096, 16384


def is_scram_request(request: Any) -> bool:
    return api_name(request) == "AlterUserScramCredentials"


@dataclass
class ScramFacts:
    """The credentials (user, mechanism) → (salt, iterations) the deciding controller held before it
    decided, and the image its decision left."""

    before: dict[tuple[str, int], tuple[bytes, int]]
    after: MetadataImage | None = field(default=None)


def _held(image: MetadataImage) -> dict[tuple[str, int], tuple[bytes, int]]:
    return {key: (c.salt, c.iterations) for key, c in image.scram.items()}


class ScramAdmin:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.answered: Counter[str] = Counter()
        """Per-user results judged right, by error."""

    def request(self) -> AlterUserScramCredentialsRequest:
        rng = self.rng
        deletions, upsertions = [], []
        for _ in range(rng.randint(1, 3)):
            user = rng.choice(USERS[:-1]) if rng.random() < 0.93 else ""
            mech = rng.choice(list(MECHANISMS)) if rng.random() < 0.93 else UNKNOWN_MECHANISM
            if rng.random() < 0.35:
                deletions.append(ScramCredentialDeletion(name=user, mechanism=i8(mech)))
                continue
            salt = rng.randbytes(16)
            upsertions.append(ScramCredentialUpsertion(
                name=user, mechanism=i8(mech), iterations=i32(rng.choice(ITERATIONS[:3] * 3 + ITERATIONS[3:])),
                salt=salt, salted_password=rng.randbytes(MECHANISMS.get(mech, 32))))
        return AlterUserScramCredentialsRequest(deletions=tuple(deletions), upsertions=tuple(upsertions))

    @staticmethod
    def facts(image: MetadataImage) -> ScramFacts:
        return ScramFacts(_held(image))

    @staticmethod
    def _want(changes: list[tuple[str, Any]], before: dict[tuple[str, int], tuple[bytes, int]]) -> ErrorCode:
        kind, first = changes[0]
        if not first.name:
            return ErrorCode.unacceptable_credential
        if first.mechanism not in MECHANISMS:
            return ErrorCode.unsupported_sasl_mechanism
        if kind == "upsert" and not LOWEST <= first.iterations <= HIGHEST:
            return ErrorCode.unacceptable_credential
        if kind == "delete" and (first.name, first.mechanism) not in before:
            return ErrorCode.resource_not_found
        return ErrorCode.duplicate_resource if len(changes) > 1 else ErrorCode.none

    def judge(self, request: Any, facts: ScramFacts, response: Any) -> str | None:
        """Why `response` is not Kafka's answer to `request` given `facts`, or None when it is."""
        users: dict[str, list[tuple[str, Any]]] = {}
        for d in request.deletions:
            users.setdefault(d.name, []).append(("delete", d))
        for u in request.upsertions:
            users.setdefault(u.name, []).append(("upsert", u))
        answered = Counter(r.user for r in response.results)
        if answered != Counter(set(users)):
            return f"AlterUserScramCredentials answered the users {sorted(answered.elements())}, asked {sorted(users)}"
        if {r.error_code for r in response.results} == {ErrorCode.not_controller}:
            self.answered["not_controller"] += 1
            return None
        assert facts.after is not None
        after = _held(facts.after)
        for r in response.results:
            changes = users[r.user]
            want = self._want(changes, facts.before)
            if r.error_code != want:
                asked = [(kind, int(c.mechanism), getattr(c, "iterations", None)) for kind, c in changes]
                return (f"AlterUserScramCredentials of {r.user!r} {asked} answered {r.error_code.name}, "
                        f"Kafka {want.name}")
            mine = {k: v for k, v in after.items() if k[0] == r.user}
            if want != ErrorCode.none:
                if mine != {k: v for k, v in facts.before.items() if k[0] == r.user}:
                    return f"AlterUserScramCredentials of {r.user!r} refused, yet its credentials changed"
            else:
                kind, c = changes[0]
                key = (r.user, int(c.mechanism))
                if kind == "delete" and key in mine:
                    return f"AlterUserScramCredentials deleted {key}, still in the image after the decision"
                if kind == "upsert" and mine.get(key) != (bytes(c.salt), c.iterations):
                    return f"AlterUserScramCredentials upserted {key}, the image after holds {mine.get(key)}"
            self.answered[want.name] += 1
        return None
