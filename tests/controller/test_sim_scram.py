"""The cluster simulator's SCRAM administrator (node/sim/kraft_scram.py): users, mechanisms and
iteration counts drawn over the space Kafka allows, each answer judged against Kafka's
ScramControlManager, and controllers handling part of that space wrong — deliberately wrong handlers
put in for the test — caught in a run."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from kio.static.primitive import i8, i32

import kraftlab.node.controller.scram as scram
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.sim.kraft import KraftSim, SimViolation
from kraftlab.node.sim.kraft_scram import ScramAdmin

Handler = Callable[[Write, Any], Outcome]


def _upsert(user: str, mech: int, iterations: int) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name=user, mechanism=i8(mech), iterations=i32(iterations), salt=b"s" * 16,
                                    salted_password=b"p" * (32 if mech == 1 else 64))


class _Edges(ScramAdmin):
    """Every request an edge: one iteration below Kafka's minimum, and one user with both mechanisms."""

    def request(self) -> AlterUserScramCredentialsRequest:
        self.sent = getattr(self, "sent", 0) + 1
        if self.sent % 2:
            return AlterUserScramCredentialsRequest(deletions=(), upsertions=(_upsert("alice", 1, 4095),))
        return AlterUserScramCredentialsRequest(deletions=(), upsertions=(_upsert("bob", 1, 4096),
                                                                          _upsert("bob", 2, 4096)))


def _one_iteration_short_accepted(original: Handler) -> Handler:
    """Iterations of 4095 accepted (read as 4096): the lower bound off by one."""
    def wrong(w: Write, req: Any) -> Outcome:
        ups = tuple(dataclasses.replace(u, iterations=i32(4096)) if u.iterations == 4095 else u
                    for u in req.upsertions)
        return original(w, dataclasses.replace(req, upsertions=ups))
    return wrong


def _per_mechanism(original: Handler) -> Handler:
    """A user's changes judged per mechanism: each (user, mechanism) altered in a request of its own."""
    def wrong(w: Write, req: Any) -> Outcome:
        results: list[dict[str, Any]] = []
        decisions: list[dict[str, Any]] = []
        for u in req.upsertions:
            out = original(w, dataclasses.replace(req, deletions=(), upsertions=(u,)))
            if u.name not in {r["user"] for r in results}:  # one answer (and decision) per user
                results += out.values["results"]
                decisions += out.decisions
        return Outcome({"results": results}, decisions)
    return wrong


@pytest.mark.parametrize("wrong", [_one_iteration_short_accepted, _per_mechanism])
def test_a_controller_handling_part_of_the_space_wrong_is_caught(wrong: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scram, "alter_user_scram_credentials", wrong(scram.alter_user_scram_credentials))
    sim = KraftSim(seed=3)
    sim.scram_admin = _Edges(random.Random(3))
    with pytest.raises(SimViolation, match="AlterUserScramCredentials of"):
        sim.run(fault_ms=15_000, settle_ms=15_000)
