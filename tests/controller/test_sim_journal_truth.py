"""The controllers' and brokers' journals as witnesses in the cluster simulator
(node.sim.controller_truth): on the correct node every step's lines are true and complete (the
cluster simulator's other tests run it on every seed); each deliberately wrong controller, replay
or broker below — a line dropped, a stale epoch, a fence that did not happen, a lease, a decision or
an ISR told wrong — is caught by the rule named, in a few seeds; and so is a Raft core whose lines
lie in the cluster (node.sim.journal_truth, judged there too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import kraftlab.node.broker.lifecycle as lifecycle_module
import kraftlab.node.broker.metadata as broker_metadata
import kraftlab.node.controller.cluster as cluster
import kraftlab.node.controller.quorum_controller as quorum_controller
import kraftlab.node.sim.kraft as kraft
from kraftlab.checker.controller_journal import API_FIELDS, FIELDS
from kraftlab.node.broker.lifecycle import BrokerLifecycle, BrokerState
from kraftlab.node.controller.write import Write
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.sim.controller_truth import JUDGES, OWN_READS
from kraftlab.node.sim.kraft import KraftSim, SimViolation


def _first_violation(seeds: range = range(1, 7)) -> str | None:
    """The first violation over `seeds`, without its seed (None: none)."""
    for seed in seeds:
        try:
            KraftSim(seed=seed).run(fault_ms=15_000, settle_ms=15_000)
        except SimViolation as exc:
            return str(exc).split(": ", 1)[1]
    return None


def _first_finding(seeds: range = range(1, 7)) -> str | None:
    """The rule the first violation over `seeds` names (None: none)."""
    found = _first_violation(seeds)
    return None if found is None else found.split(": ")[0]


def test_the_correct_node_keeps_every_line_true_and_complete() -> None:
    sim = KraftSim(seed=7, lossy=True)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    kinds = {e.ev for _, _, e in sim.journal}
    assert {"apply", "image", "fence", "lease", "decision", "broker_state", "heartbeat"} <= kinds


def test_the_judges_read_every_field_the_checkers_contract_names() -> None:
    for kind, wanted in FIELDS.items():
        assert kind in JUDGES, kind
        assert set(wanted) <= set(JUDGES[kind].reads), (kind, set(wanted) - set(JUDGES[kind].reads))
    for api, wanted in API_FIELDS.items():
        assert set(wanted) <= set(OWN_READS.get(api, ())), api


# ---- the Raft core's lines, judged in the cluster too (node.sim.journal_truth) ---------------------

class _NoHighWaterMarkLines(RaftCore):
    """A core whose Fetch handling journals no `hw` line (the controllers' commits go untold)."""

    def handle(self, envelope: Any, now: int) -> Output:
        out = super().handle(envelope, now)
        out.events[:] = [e for e in out.events if e.get("ev") != "hw"]
        return out


def test_the_raft_cores_untold_high_water_mark_is_caught_in_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster's cores journal while controllers append from within their steps: each step is judged
    as the core returns it, before the controller's appends of that step."""
    monkeypatch.setattr(kraft, "RaftCore", _NoHighWaterMarkLines)
    assert _first_finding() == "JournalComplete"


# ---- wrong controllers ---------------------------------------------------------------------------

def _fence_lines(rewrite: Callable[[Write, int, str, str, int, dict[str, int]], None]) -> Callable[..., None]:
    def fence_event(w: Write, broker: int, action: str, reason: str, epoch: int, **extra: int) -> None:
        rewrite(w, broker, action, reason, epoch, extra)
    return fence_event


_real_fence_event = Write.fence_event


def _no_unfence(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    if action != "unfence":
        _real_fence_event(w, broker, action, reason, epoch, **extra)


def _stale_epoch(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    _real_fence_event(w, broker, action, reason, epoch - 1, **extra)


def _twice(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    _real_fence_event(w, broker, action, reason, epoch, **extra)
    _real_fence_event(w, broker, action, reason, epoch, **extra)  # a second fence that did not happen


def _unfence_requested(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    _real_fence_event(w, broker, action, "requested" if action == "unfence" else reason, epoch, **extra)


def _timeout_as_shutdown(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    _real_fence_event(w, broker, action, "controlled shutdown" if reason == "session timeout" else reason, epoch,
                      **extra)


def _unfenced_behind(w: Write, broker: int, action: str, reason: str, epoch: int, extra: dict[str, int]) -> None:
    if "metadata_offset" in extra:
        extra = {**extra, "metadata_offset": extra["metadata_offset"] - 1}
    _real_fence_event(w, broker, action, reason, epoch, **extra)


@pytest.mark.parametrize(("what", "rewrite", "rule"), [
    ("an unfence not journalled", _no_unfence, "ControllerJournalComplete"),
    ("an unfence told as asked for by WantFence", _unfence_requested, "ControllerJournalTrue"),
    ("a session timeout told as a controlled shutdown", _timeout_as_shutdown, "ControllerJournalTrue"),
    ("an unfence naming another metadata offset than its heartbeat's", _unfenced_behind, "ControllerJournalTrue"),
    ("a fence line naming a stale epoch", _stale_epoch, "ControllerJournalTrue"),
    ("a fence journalled that did not happen", _twice, "ControllerJournalTrue"),
])
def test_a_controller_whose_fence_lines_lie_is_caught(what: str, rewrite: Any, rule: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Write, "fence_event", _fence_lines(rewrite))
    assert _first_finding() == rule


class _LateLeases(cluster.Leases):
    """Lease lines one millisecond later than the leases it holds."""

    def touch(self, broker: int, now_ms: int, events: list[JournalEvent]) -> None:
        super().touch(broker, now_ms, events)
        if events and events[-1].ev == "lease" and events[-1].fields["broker"] == broker:
            events[-1] = JournalEvent("lease", {**events[-1].fields, "expires_ms": events[-1].fields["expires_ms"] + 1})


class _SilentLeases(cluster.Leases):
    """Only a term's first lease of each broker journalled (the renewals never are)."""

    def touch(self, broker: int, now_ms: int, events: list[JournalEvent]) -> None:
        told: list[JournalEvent] = []
        first = broker not in self.last_contact
        super().touch(broker, now_ms, told)
        if first:
            events += told


@pytest.mark.parametrize(("what", "leases", "rule"), [
    ("a lease told a millisecond late", _LateLeases, "ControllerJournalTrue"),
    ("renewals never journalled", _SilentLeases, "ControllerJournalComplete"),
])
def test_a_controller_whose_lease_lines_lie_is_caught(what: str, leases: type[cluster.Leases], rule: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "Leases", leases)
    monkeypatch.setattr(quorum_controller.cluster, "Leases", leases)
    assert _first_finding() == rule


def test_a_standby_controller_that_activates_and_renews_leases_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller that claims every epoch as its own (activating on another leader's batches) renews
    leases while its Raft core follows: its lease lines are not the active controller's."""
    real = quorum_controller.QuorumController.handle_leader_change

    def claims_all(self: quorum_controller.QuorumController, leader_id: int | None, epoch: int, _: bool) -> None:
        real(self, leader_id, epoch, True)
    monkeypatch.setattr(quorum_controller.QuorumController, "handle_leader_change", claims_all)
    found = _first_violation()
    assert found is not None and found.startswith("ControllerJournalTrue") and "not the active one" in found, found


def test_a_controller_that_answers_a_registration_with_another_epoch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker epoch is the offset of the broker's RegisterBrokerRecord: an answer and decision naming the
    next offset agree with each other, not with the log."""
    real = cluster.register

    def register(w: Write, req: Any, leases: cluster.Leases) -> Any:
        outcome = real(w, req, leases)
        if outcome.values["error_code"] == 0:
            outcome.values = {**outcome.values, "broker_epoch": outcome.values["broker_epoch"] + 1}
            outcome.decisions = [{**d, "broker_epoch": d["broker_epoch"] + 1} for d in outcome.decisions]
        return outcome
    monkeypatch.setattr(cluster, "register", register)
    found = _first_violation()
    assert found is not None and found.startswith("ControllerJournalTrue") and "a registration of" in found, found


@pytest.mark.parametrize(("what", "handler", "rewrite"), [
    ("a heartbeat's answer told with the other fencing", "heartbeat", lambda d: {**d, "fenced": not d["fenced"]}),
    ("a heartbeat told with another metadata offset", "heartbeat",
     lambda d: {**d, "metadata_offset": d["metadata_offset"] + 1}),
    ("a registration told a millisecond late", "register", lambda d: {**d, "at_ms": d["at_ms"] + 1}),
    ("a registration told with another previous broker epoch", "register",
     lambda d: {**d, "previous_broker_epoch": d["previous_broker_epoch"] + 1}),
])
def test_a_controller_whose_decisions_tell_another_request_or_answer_is_caught(
        what: str, handler: str, rewrite: Callable[[dict[str, Any]], dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = getattr(cluster, handler)

    def rewritten(w: Write, req: Any, leases: cluster.Leases) -> Any:
        outcome = real(w, req, leases)
        outcome.decisions = [rewrite(d) for d in outcome.decisions]
        return outcome
    monkeypatch.setattr(cluster, handler, rewritten)
    found = _first_violation()
    assert found is not None and "journals a decision telling" in found, found  # (node.sim.controller_answers)


# ---- wrong replays (controllers' and brokers') -----------------------------------------------------

class _ShortIsrReplay(CommittedReplay):
    """`apply` lines of partition records telling an ISR without its last member."""

    def take_events(self) -> list[JournalEvent]:
        return [JournalEvent(e.ev, {**e.fields, "isr": e.fields["isr"][:-1]})
                if e.ev == "apply" and len(e.fields.get("isr", ())) > 1 else e for e in super().take_events()]


class _NoConfigAppliedReplay(CommittedReplay):
    """No `apply` line for a ConfigRecord."""

    def take_events(self) -> list[JournalEvent]:
        return [e for e in super().take_events() if not (e.ev == "apply" and e.fields["type"] == "ConfigRecord")]


class _OtherCrcReplay(CommittedReplay):
    """`apply` lines naming a CRC that is not the record's."""

    def take_events(self) -> list[JournalEvent]:
        return [JournalEvent(e.ev, {**e.fields, "crc": e.fields["crc"] ^ 1}) if e.ev == "apply" else e
                for e in super().take_events()]


class _EarlyImageReplay(CommittedReplay):
    """Periodic `image` lines one offset short of the batch they follow."""

    def take_events(self) -> list[JournalEvent]:
        return [JournalEvent(e.ev, {**e.fields, "offset": e.fields["offset"] - 1})
                if e.ev == "image" and e.fields["reason"] == "periodic" else e for e in super().take_events()]


class _OtherDigestReplay(CommittedReplay):
    """`image` lines naming the digest of an empty image."""

    def take_events(self) -> list[JournalEvent]:
        empty = MetadataImage().image_digests()[0]
        return [JournalEvent(e.ev, {**e.fields, "digest": empty}) if e.ev == "image" else e
                for e in super().take_events()]


@contextmanager
def _replays(replay: type[CommittedReplay], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(quorum_controller, "CommittedReplay", replay)
    monkeypatch.setattr(broker_metadata, "CommittedReplay", replay)
    yield


@pytest.mark.parametrize(("what", "replay", "rule"), [
    ("an ISR told short", _ShortIsrReplay, "JournalTrue"),
    ("a config change applied untold", _NoConfigAppliedReplay, "JournalComplete"),
    ("another record's CRC", _OtherCrcReplay, "JournalTrue"),
    ("an image line before its batch's end", _EarlyImageReplay, "JournalTrue"),
    ("an image line with another image's digest", _OtherDigestReplay, "JournalTrue"),
])
def test_a_replay_whose_lines_lie_is_caught(what: str, replay: type[CommittedReplay], rule: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with _replays(replay, monkeypatch):
        found = _first_finding()
    assert found is not None and found.endswith(rule) and found[:-len(rule)] in ("Controller", "Broker"), found


# ---- wrong brokers --------------------------------------------------------------------------------

class _QuietRecovery(BrokerLifecycle):
    """A lifecycle that never journals RECOVERY."""

    def _journal(self, state: str) -> None:
        if state != BrokerState.RECOVERY.name:
            super()._journal(state)


class _AlwaysOk(BrokerLifecycle):
    """Every heartbeat line `ok`, failures too."""

    def _journal_heartbeat(self, ok: bool, now_ms: int) -> None:
        super()._journal_heartbeat(True, now_ms)


class _StatesTwice(BrokerLifecycle):
    """Each lifecycle state journalled twice."""

    def _journal(self, state: str) -> None:
        super()._journal(state)
        if state not in ("FENCED_SELF", "UNFENCED_SELF"):
            super()._journal(state)


class _OtherSelfFenceTimeout(BrokerLifecycle):
    """Heartbeat lines naming a self-fence timeout a millisecond longer than the broker's."""

    def _journal_heartbeat(self, ok: bool, now_ms: int) -> None:
        super()._journal_heartbeat(ok, now_ms)
        if self._outbox and isinstance(last := self._outbox[-1], JournalEvent) and last.ev == "heartbeat":
            longer = last.fields["self_fence_ms"] + 1
            self._outbox[-1] = JournalEvent("heartbeat", {**last.fields, "self_fence_ms": longer})


@pytest.mark.parametrize(("what", "lifecycle", "rule"), [
    ("each state told twice", _StatesTwice, "BrokerJournalTrue"),
    ("another self-fence timeout", _OtherSelfFenceTimeout, "BrokerJournalTrue"),
    ("RECOVERY untold", _QuietRecovery, "BrokerJournalComplete"),
    ("failures told as accepted answers", _AlwaysOk, "BrokerJournalComplete"),
])
def test_a_broker_whose_lifecycle_lines_lie_is_caught(what: str, lifecycle: type[BrokerLifecycle], rule: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kraft, "BrokerLifecycle", lifecycle)
    assert _first_finding() == rule


def test_a_broker_that_journals_a_log_directory_failure_twice_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = BrokerLifecycle.report_offline_log_dirs

    def twice(self: BrokerLifecycle, dirs: Any) -> None:
        dirs = list(dirs)
        real(self, dirs)
        self._outbox += [JournalEvent("log_dir_failed", {"broker": self.config.node_id, "directory": str(d)})
                         for d in dirs]
    monkeypatch.setattr(lifecycle_module.BrokerLifecycle, "report_offline_log_dirs", twice)
    assert _first_finding() == "BrokerJournalTrue"

