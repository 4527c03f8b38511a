"""The controller's and brokers' journal contract (checker.controller_journal, run by check_fencing):
the cluster simulator's journals keep it, and deliberately wrong cores — a broker that does not
journal its heartbeats, one that journals its own states in the wrong order or self-fencing twice,
a controller that journals a lease's expiry in seconds — are caught; hand-built journals show each
part of each rule on its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from checker_journals import JB, line_of, only_anomaly
from kio.schema.errors import ErrorCode

import kraftlab.node.controller.cluster as cluster
import kraftlab.node.sim.kraft as kraft
from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.journal import journals_from
from kraftlab.node.broker import BrokerLifecycle, BrokerState
from kraftlab.node.controller import QuorumController
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.sim.controller_answers import ControllerAnswers
from kraftlab.node.sim.kraft import KraftSim

RULES = ("ControllerJournalFields", "BrokerStateOrder", "DecisionsFromLeader")


def _sim_anomalies(seed: int = 1) -> set[str]:
    """What the real-run checker finds in a simulated cluster's journals alone. The simulator's own
    witness of the controllers' and brokers' lines (node.sim.controller_truth) would stop a wrong
    node first — tests/controller/test_sim_journal_truth.py shows it does — so it only looks on here:
    these tests show the checker, which has nothing but the journals on a real run, catching them too."""
    sim = KraftSim(seed=seed)
    sim.truth.fail = lambda rule, detail: None
    sim.run(fault_ms=10_000, settle_ms=8_000)
    res = check_fencing(journals_from(sim.journal_dicts(), "sim"), session_timeout_ms=sim.session_timeout_ms)
    return {a["type"] for a in res["anomalies"]}


@pytest.mark.parametrize("seed", [1, 2])
def test_the_simulators_controllers_and_brokers_keep_the_contract(seed: int) -> None:
    sim = KraftSim(seed=seed)
    sim.run(fault_ms=10_000, settle_ms=8_000)
    entries = sim.journal_dicts()
    res = check_fencing(journals_from(entries, "sim"), session_timeout_ms=sim.session_timeout_ms)
    assert res["valid"] is True, res["anomalies"][:3]
    assert set(RULES) <= set(res["checked"])
    kinds = {e["ev"] for e in entries}
    assert {"broker_state", "heartbeat", "lease", "decision", "fence"} <= kinds, kinds
    assert {e["state"] for e in entries if e["ev"] == "broker_state"} >= {"STARTING", "RECOVERY", "RUNNING"}


class _SilentHeartbeats(BrokerLifecycle):
    """Journals no `heartbeat` lines: its RECOVERY and RUNNING follow no accepted heartbeat."""

    def _journal_heartbeat(self, ok: bool, now_ms: int) -> None:
        return None


class _RecoversTwice(BrokerLifecycle):
    """Journals RECOVERY again in place of RUNNING (the state it left, not the one it entered)."""

    def _journal(self, state: str) -> None:
        super()._journal("RECOVERY" if state == BrokerState.RUNNING.name else state)


class _SkipsRecovery(BrokerLifecycle):
    """Goes from STARTING straight to RUNNING once caught up (no RECOVERY until it is unfenced)."""

    def _set_state(self, state: BrokerState) -> None:
        super()._set_state(BrokerState.RUNNING if state == BrokerState.RECOVERY else state)


class _SelfFencesEveryCheck(BrokerLifecycle):
    """Journals FENCED_SELF on every self-fence check past the bound, not only when it fences itself."""

    def _check_self_fence(self, now_ms: int) -> None:
        was = self.self_fenced
        super()._check_self_fence(now_ms)
        if was and self.self_fenced:
            self._journal("FENCED_SELF")


class _LeasesInSeconds(cluster.Leases):
    """Journals a lease's expiry in seconds (a float), not the controller's milliseconds."""

    def touch(self, broker: int, now_ms: int, events: list[JournalEvent]) -> None:
        mine: list[JournalEvent] = []
        super().touch(broker, now_ms, mine)
        events += [JournalEvent(e.ev, {**e.fields, "expires_ms": e.fields["expires_ms"] / 1000}) for e in mine]


@pytest.mark.parametrize(("lifecycle", "rule"), [
    (_SilentHeartbeats, "BrokerStateOrder"), (_RecoversTwice, "BrokerStateOrder"), (_SkipsRecovery, "BrokerStateOrder"),
    (_SelfFencesEveryCheck, "BrokerStateOrder")])
def test_a_broker_journalling_its_lifecycle_wrong_is_caught(
        monkeypatch: pytest.MonkeyPatch, lifecycle: type[BrokerLifecycle], rule: str) -> None:
    monkeypatch.setattr(kraft, "BrokerLifecycle", lifecycle)
    assert rule in _sim_anomalies()


def test_a_controller_journalling_leases_off_contract_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "Leases", _LeasesInSeconds)
    assert "ControllerJournalFields" in _sim_anomalies()


# ---- hand-built journals: each part of each rule -------------------------------------------


def _check(j: JB) -> dict[str, Any]:
    return check_fencing(journals_from(j.entries, "journal.jsonl"), None, session_timeout_ms=9000, slack_ms=2000)


def _broker(*states: str, ok: bool = True) -> JB:
    """Broker 4's life: each state after an answered heartbeat (`ok`)."""
    j = JB()
    j.add(4, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    for s in states:
        j.add(4, "heartbeat", broker=4, ok=ok, self_fence_ms=4000)
        j.add(4, "broker_state", broker=4, state=s)
    return j


def test_a_lifecycle_in_order_holds_and_may_shut_down_early() -> None:
    assert _check(_broker("STARTING", "RECOVERY", "RUNNING", "PENDING_CONTROLLED_SHUTDOWN",
                          "SHUTTING_DOWN"))["valid"] is True
    assert _check(_broker("STARTING", "RECOVERY", "FENCED_SELF", "SHUTTING_DOWN"))["valid"] is True
    assert _check(_broker("STARTING", "PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN"))["valid"] is True
    restarted = _broker("STARTING", "RECOVERY", "RUNNING")
    restarted.entries += _broker("STARTING", "RECOVERY").entries
    assert _check(restarted)["valid"] is True


@pytest.mark.parametrize(("states", "why"), [
    (("RECOVERY",), "begins at STARTING"),
    (("STARTING", "RECOVERY", "RUNNING", "RECOVERY"), "only goes forward"),
    (("STARTING", "RECOVERY", "RUNNING", "RUNNING"), "only goes forward"),
    (("STARTING", "RUNNING"), "RUNNING comes only right after RECOVERY"),
    (("STARTING", "PENDING_CONTROLLED_SHUTDOWN", "RUNNING"), "only goes forward"),
    (("STARTING", "UNFENCED_SELF"), "alternate"),
    (("STARTING", "FENCED_SELF", "FENCED_SELF"), "alternate")])
def test_a_lifecycle_out_of_order_is_caught(states: tuple[str, ...], why: str) -> None:
    assert why in only_anomaly(_check(_broker(*states)), "BrokerStateOrder")["explanation"]


def test_running_without_an_accepted_heartbeat_is_caught() -> None:
    j = _broker("STARTING")
    j.add(4, "heartbeat", broker=4, ok=False, self_fence_ms=4000)
    j.add(4, "broker_state", broker=4, state="RECOVERY")
    assert "accepted heartbeat" in only_anomaly(_check(j), "BrokerStateOrder")["explanation"]


@pytest.mark.parametrize(("ev", "fields", "bad"), [
    ("lease", {"broker": 4}, "`expires_ms` is missing"),
    ("lease", {"broker": "4", "expires_ms": 9000}, "`broker` is '4'"),
    ("heartbeat", {"broker": 4, "ok": "true", "self_fence_ms": 4000}, "`ok` is 'true'"),
    ("broker_state", {"broker": 4, "state": "ONLINE"}, "`state` is 'ONLINE'"),
    ("fence", {"broker": 4, "action": "kill", "reason": "session timeout", "epoch": 3}, "`action` is 'kill'"),
    ("fence", {"broker": 4, "action": "fence", "reason": "x", "epoch": 3, "at_ms": 1.5}, "`at_ms` is 1.5"),
    ("decision", {"api": "BrokerHeartbeat", "error": "NONE", "broker": 4, "broker_epoch": 3, "fenced": False,
                  "shut_down": False}, "`metadata_offset` is missing"),
    ("decision", {"api": "BrokerRegistration", "error": "NONE", "broker": 4, "broker_epoch": 3}, "`incarnation`"),
    ("decision", {"api": "CreateTopics", "topic": "t"}, "`error` is missing")])
def test_a_line_without_its_fields_is_caught(ev: str, fields: dict[str, Any], bad: str) -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)  # (decisions come from a leader)
    j.add(1, ev, **fields)
    assert bad in only_anomaly(_check(j), "ControllerJournalFields")["explanation"]


def test_one_finding_per_node_and_kind_of_line() -> None:
    j = JB()
    for _ in range(3):
        j.add(1, "lease", broker=4)
    assert len(_check(j)["anomalies"]) == 1


class _ShortLeases(cluster.Leases):
    """Leases running out after a tenth of the session timeout."""

    def __init__(self, session_timeout_ms: int, journal_interval_ms: int) -> None:
        super().__init__(session_timeout_ms // 10, journal_interval_ms)


class _LeasesFromTheLastJournalling(cluster.Leases):
    """Journals the expiry of the lease it journalled last (not the one it just renewed)."""

    def touch(self, broker: int, now_ms: int, events: list[JournalEvent]) -> None:
        last = self._journaled.get(broker)
        mine: list[JournalEvent] = []
        super().touch(broker, now_ms, mine)
        events += [JournalEvent(e.ev, {**e.fields, "expires_ms": (last or now_ms) + self.session_timeout_ms})
                   for e in mine]


@pytest.mark.parametrize("leases", [_ShortLeases, _LeasesFromTheLastJournalling])
def test_a_controller_journalling_leases_off_the_session_is_caught(
        monkeypatch: pytest.MonkeyPatch, leases: type[cluster.Leases]) -> None:
    monkeypatch.setattr(cluster, "Leases", leases)
    assert "LeaseBound" in _sim_anomalies()


def _term(j: JB) -> None:
    j.add(1, "start", roles=["controller"], voters=[1], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "lease", broker=4, expires_ms=9_500)  # activation: every broker of the image at once
    j.add(1, "lease", broker=5, expires_ms=9_500)


def _renewed(j: JB, at_ms: int, expires_ms: int) -> dict[str, Any]:
    lease = j.add(1, "lease", broker=4, expires_ms=expires_ms)
    j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, error="NONE", fenced=False,
          shut_down=False, metadata_offset=9, at_ms=at_ms)
    return lease


def test_leases_a_session_after_the_heartbeat_or_the_activation_hold() -> None:
    j = JB()
    _term(j)
    _renewed(j, 2_000, 11_000)
    _renewed(j, 4_000, 13_000)
    j.add(1, "lease", broker=4, expires_ms=16_000)  # its heartbeat not answered when the journal ends
    assert _check(j)["valid"] is True


def test_a_lease_off_the_session_is_caught() -> None:
    j = JB()
    _term(j)
    _renewed(j, 2_000, 11_000)
    bad = _renewed(j, 4_000, 12_100)  # a tenth of the session short
    _renewed(j, 6_000, 15_000)
    a = only_anomaly(_check(j), "LeaseBound")
    assert a["entries"][0]["where"] == f"journal.jsonl:{j.entries.index(bad) + 1}"
    assert "at 3100 ms" in a["explanation"]


def test_a_renewal_that_does_not_move_the_expiry_on_is_caught() -> None:
    j = JB()
    _term(j)
    first = _renewed(j, 2_000, 11_000)
    again = _renewed(j, 4_000, 11_000)
    a = only_anomaly(_check(j), "LeaseBound")
    assert [x["where"] for x in a["entries"]] == [f"journal.jsonl:{j.entries.index(x) + 1}" for x in (first, again)]


_heartbeat = cluster.heartbeat


def _unfences_every_heartbeat(w: Any, req: Any, leases: cluster.Leases) -> Any:
    """A heartbeat handler that unfences a caught-up broker whether or not it was fenced."""
    b = w.image.brokers.get(req.broker_id)
    was_unfenced = b is not None and not b.fenced and b.epoch == req.broker_epoch
    out = _heartbeat(w, req, leases)
    if was_unfenced and not req.want_fence and not req.want_shut_down:
        w.fence_event(req.broker_id, "unfence", "heartbeat", req.broker_epoch,
                      metadata_offset=int(req.current_metadata_offset))
    return out


def test_a_controller_unfencing_an_unfenced_broker_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "heartbeat", _unfences_every_heartbeat)
    assert "FenceAlternates" in _sim_anomalies()


def _fence(j: JB, action: str, reason: str = "heartbeat", epoch: int = 5) -> dict[str, Any]:
    return j.add(1, "fence", broker=4, action=action, reason=reason, epoch=epoch, at_ms=1)


def test_fencing_lines_that_alternate_hold() -> None:
    j = JB()
    _term(j)
    _fence(j, "unfence")
    _fence(j, "shutdown", "controlled shutdown")
    _fence(j, "fence", "session timeout")
    _fence(j, "fence", "unregistered")  # an unregistration removes it, fenced or not
    _fence(j, "fence", "session timeout", epoch=9)  # another registration
    _term(j)  # a new term: what it inherited is not journalled
    _fence(j, "fence", "session timeout", epoch=9)
    assert _check(j)["valid"] is True


@pytest.mark.parametrize("action", ["fence", "unfence"])
def test_fencing_a_fenced_or_unfencing_an_unfenced_broker_is_caught(action: str) -> None:
    j = JB()
    _term(j)
    first = _fence(j, action, "session timeout")
    again = _fence(j, action, "requested")
    a = only_anomaly(_check(j), "FenceAlternates")
    assert [x["where"] for x in a["entries"]] == [f"journal.jsonl:{j.entries.index(x) + 1}" for x in (first, again)]


def _decide(j: JB, error: str = "NONE") -> dict[str, Any]:
    return j.add(1, "decision", api="CreateTopics", topic="t1", error=error, offset=3)


def test_decisions_of_the_leader_and_failures_after_it_resigned_hold() -> None:
    j = JB()
    _term(j)
    _decide(j)
    _decide(j, "TOPIC_ALREADY_EXISTS")  # a refusal is a decision of the leader too
    j.add(1, "role", role="resigned", epoch=1, leader=1)
    _decide(j, "NOT_CONTROLLER")  # what it held, failed as it renounced
    _term(j)
    _decide(j)
    assert _check(j)["valid"] is True


@pytest.mark.parametrize(("role", "error"), [
    ("unattached", "NONE"), ("follower", "NONE"), ("resigned", "INVALID_REPLICATION_FACTOR"),
    ("leader", "NOT_CONTROLLER"),
])
def test_a_decision_off_the_leader_or_a_failure_while_leading_is_caught(role: str, error: str) -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "start", roles=["controller"], voters=[1], log_start=0, log_end=0, hw=0)  # a new life: not leading
    if role != "unattached":
        j.add(1, "role", role=role, epoch=2, leader=1 if role in ("leader", "resigned") else 2)
    bad = _decide(j, error)
    _decide(j, error)  # one finding per node and kind
    a = only_anomaly(_check(j), "DecisionsFromLeader")
    assert a["entries"][-1]["where"] == line_of(j, bad), a


class _JournalsHeldAsDecided(QuorumController):
    """Fails its held requests NOT_CONTROLLER when it renounces but journals them as it decided them."""

    def _fail(self, token: Any, request: Any, decisions: Sequence[dict[str, Any]]) -> None:
        self._reply_error(token, request, ErrorCode.not_controller)
        self._outbox.extend(JournalEvent("decision", dict(d)) for d in decisions)


class _FailsHeldOnTick(QuorumController):
    """Gives up on what it holds at every tick, NOT_CONTROLLER, while still leading."""

    def tick(self, now_ms: int, wall_ms: int | None = None) -> None:
        while self._held:
            held = self._held.popleft()
            self._fail(held.token, held.request, held.decisions)
        super().tick(now_ms, wall_ms)


@pytest.mark.parametrize("controller", [_JournalsHeldAsDecided, _FailsHeldOnTick])
def test_a_controller_deciding_off_its_leadership_is_caught_from_its_journal(
        monkeypatch: pytest.MonkeyPatch, controller: type[QuorumController]) -> None:
    # the journal alone (as on a real run): the simulator's own judge of answers is silenced
    monkeypatch.setattr(kraft, "QuorumController", controller)
    monkeypatch.setattr(ControllerAnswers, "observe", lambda *a: [])
    monkeypatch.setattr(ControllerAnswers, "settle", lambda *a: [])
    assert "DecisionsFromLeader" in _sim_anomalies()


def _inherit(j: JB, fenced_last: bool) -> None:
    """Node 1's committed replay: broker 4 registered (epoch 5, fenced), unfenced, then maybe fenced again."""
    j.add(1, "apply", offset=5, type="RegisterBrokerRecord", broker=4, fenced=True, batch_end=6)
    j.add(1, "apply", offset=6, type="UnfenceBrokerRecord", broker=4, batch_end=7)
    if fenced_last:
        j.add(1, "apply", offset=7, type="FenceBrokerRecord", broker=4, batch_end=8)


@pytest.mark.parametrize(("fenced_last", "action"), [(True, "unfence"), (False, "fence")])
def test_a_terms_first_fencing_line_that_changes_the_committed_state_holds(fenced_last: bool, action: str) -> None:
    j = JB()
    _term(j)
    _inherit(j, fenced_last)
    _fence(j, action, "session timeout")
    _fence(j, action, "session timeout", epoch=9)  # a registration the replay never showed: judged by nothing
    assert _check(j)["valid"] is True


@pytest.mark.parametrize(("fenced_last", "action"), [(True, "fence"), (False, "unfence")])
def test_a_terms_first_fencing_line_on_a_broker_already_in_that_state_is_caught(fenced_last: bool, action: str) -> None:
    j = JB()
    _term(j)
    _inherit(j, fenced_last)
    bad = _fence(j, action, "session timeout")
    a = only_anomaly(_check(j), "FenceAlternates")
    assert "committed state it took over" in a["explanation"]
    assert a["entries"][-1]["where"] == line_of(j, bad)


def test_after_a_snapshot_load_the_committed_state_is_unknown() -> None:
    j = JB()
    _term(j)
    _inherit(j, True)
    j.add(1, "image", offset=8, digest="d", sections={}, entries={}, reason="snapshot-load")
    _fence(j, "fence", "session timeout")
    assert _check(j)["valid"] is True


class _ForgetsFencingOnActivation(QuorumController):
    """Takes over every broker as fenced (its uncommitted image says so, no record does): it then
    unfences brokers the committed log has unfenced already."""

    def _activate(self) -> None:
        super()._activate()
        assert self._future is not None
        for b, reg in list(self._future.brokers.items()):
            self._future.brokers[b] = dataclasses.replace(reg, fenced=True)


def test_a_controller_unfencing_what_it_inherited_unfenced_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kraft, "QuorumController", _ForgetsFencingOnActivation)
    assert "FenceAlternates" in _sim_anomalies()
