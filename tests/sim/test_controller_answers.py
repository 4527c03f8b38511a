"""The cluster simulator judges every controller answer against the request it delivered
(node.sim.controller_answers): the correct controllers keep the contract on seeds with failovers
and a lossy network, and deliberately wrong controllers — one that answers before its write
commits, one that holds answers for a later event, one that journals only what it accepted, one
that journals a refusal as accepted, one that journals a heartbeat's epoch as its broker, a standby
that journals decisions, one that forgets its held requests when it resigns, one that drops a
request that wrote nothing — are caught."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

import kraftlab.node.controller.cluster as cluster
import kraftlab.node.controller.topics as topics
import kraftlab.node.sim.kraft as kraft
from kraftlab.node.controller import QuorumController
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.raft.ports import Batch
from kraftlab.node.sim.kraft import KraftSim, SimViolation


def _run(seed: int, lossy: bool = False) -> KraftSim:
    sim = KraftSim(seed=seed, lossy=lossy)
    sim.run(fault_ms=10_000, settle_ms=8_000)
    return sim


@pytest.mark.parametrize(("seed", "lossy"), [(1, False), (3, True)])
def test_the_simulators_controllers_answer_as_kafkas_do(seed: int, lossy: bool) -> None:
    sim = _run(seed, lossy)
    judged = sim.answers.judged
    assert judged["accepted"] > 50 and judged["refused"] > 0, judged
    assert judged["refused by a standby"] > 0, judged


class _AnswersBeforeCommit(QuorumController):
    """Releases a held write once its records are appended, one offset before they commit."""

    def _release_committed(self, batch: Batch | None = None) -> None:
        self.replay.next_offset += 1
        try:
            super()._release_committed(batch)
        finally:
            self.replay.next_offset -= 1


class _AnswersOnTheNextRequest(QuorumController):
    """Releases nothing when records commit: held answers go out with the next request's."""

    _committing = False

    def handle_commit(self, batches: Any) -> None:
        self._committing = True
        try:
            super().handle_commit(batches)
        finally:
            self._committing = False

    def _release_committed(self, batch: Batch | None = None) -> None:
        if not self._committing:
            super()._release_committed(batch)


class _StandbyJournals(QuorumController):
    """A standby journals a decision for the NOT_CONTROLLER it answers."""

    def handle_request(self, token: Any, request: Any, now_ms: int, **kw: Any) -> None:
        active = self.active
        super().handle_request(token, request, now_ms, **kw)
        if not active:
            self._outbox.append(JournalEvent("decision", {"api": kraft.api_name(request), "error": "NOT_CONTROLLER"}))


class _ForgetsOnResign(QuorumController):
    """Drops its held requests when it stops being active, answering none of them."""

    def _renounce(self) -> None:
        self._held.clear()
        super()._renounce()


class _LosesWhatWroteNothing(QuorumController):
    """Drops a held request that wrote no records (a refusal, a no-op) instead of answering it."""

    def _release_committed(self, batch: Batch | None = None) -> None:
        while self._held and self._held[0].epoch is None and self._held[0].last_offset < self.replay.next_offset:
            self._held.popleft()
        super()._release_committed(batch)


@pytest.mark.parametrize(("controller", "seed", "finding"), [
    (_LosesWhatWroteNothing, 1, "committed all it wrote"),
    (_AnswersBeforeCommit, 1, "before its write is committed"),
    (_AnswersOnTheNextRequest, 1, "held past the step that committed it|committed all it wrote"),
    (_StandbyJournals, 1, "asked while not active"),
    (_ForgetsOnResign, 1, "still holds"),
])
def test_a_controller_answering_off_kafkas_contract_is_caught(
        monkeypatch: pytest.MonkeyPatch, controller: type[QuorumController], seed: int, finding: str) -> None:
    monkeypatch.setattr(kraft, "QuorumController", controller)
    with pytest.raises(SimViolation, match=finding):
        _run(seed)


_CREATE_TOPICS = topics.create_topics


def _journals_only_accepted(w: Write, request: Any) -> Outcome:
    out = _CREATE_TOPICS(w, request)
    return Outcome(out.values, [d for d in out.decisions if d["error"] == "NONE"])


def _journals_refusals_as_accepted(w: Write, request: Any) -> Outcome:
    out = _CREATE_TOPICS(w, request)
    return Outcome(out.values, [{**d, "error": "NONE"} for d in out.decisions])


@pytest.mark.parametrize(("handler", "finding"), [
    (_journals_only_accepted, "journalled"),
    (_journals_refusals_as_accepted, "its decisions say"),
])
def test_a_controller_journalling_refusals_wrongly_is_caught(
        monkeypatch: pytest.MonkeyPatch, handler: Any, finding: str) -> None:
    monkeypatch.setattr(topics, "create_topics", handler)
    with pytest.raises(SimViolation, match=finding):
        _run(1)


_DECISION = cluster._decision


def _epoch_for_broker(api: str, broker: int, epoch: int, code: ErrorCode, **extra: Any) -> dict[str, Any]:
    return _DECISION(api, epoch, broker, code, **extra)


def test_a_decision_naming_what_the_request_did_not_ask_about_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "_decision", _epoch_for_broker)
    with pytest.raises(SimViolation, match="which the request does not name"):
        _run(1)
