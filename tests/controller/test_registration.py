"""BrokerRegistration and BrokerHeartbeat on the active controller (pure state machine + fake Raft)."""

from __future__ import annotations

import uuid

from controller_harness import CLUSTER_ID, Harness
from kio.schema.errors import ErrorCode

from kraftlab.node.metadata.records import decode


def test_epoch_is_offset_of_register_record(h: Harness) -> None:
    epoch = h.register(1)
    # find the RegisterBrokerRecord in the log: its offset is the epoch
    found = [
        b.base_offset + i
        for b in h.q.batches
        if not b.control
        for i, r in enumerate(b.records)
        if type(decode(r.value)).__name__ == "RegisterBrokerRecord"
    ]
    assert found == [epoch]
    b = h.image().brokers[1]
    assert b.fenced and b.epoch == epoch and b.incarnation_id == h.incarnations[1]


def test_epoch_is_the_offset_even_after_a_control_record_raft_wrote_itself(h: Harness) -> None:
    """Raft appends control records of its own (KIP-853's VotersRecord when a voter is added): a
    registration decided after one must name the offset its record really gets (a membership run:
    the voter change took offset 232, the RegisterBrokerRecord landed at 233 with broker epoch 232)."""
    from kraftlab.node.controller.fake_quorum import LEADER_CHANGE_KEY
    from kraftlab.node.raft.ports import Record

    h.register(1)
    h.q.append_batch((Record(LEADER_CHANGE_KEY, b""),), control=True)  # the controller never wrote it
    epoch = h.register(2)
    found = [b.base_offset + i for b in h.q.batches if not b.control for i, r in enumerate(b.records)
             if type(decode(r.value)).__name__ == "RegisterBrokerRecord" and decode(r.value).broker_id == 2]
    assert found == [epoch]


def test_retry_from_same_incarnation_gets_same_epoch_and_writes_nothing(h: Harness) -> None:
    e1 = h.register(1)
    end = h.q.end_offset
    e2 = h.register(1)
    assert e1 == e2
    assert h.q.end_offset == end


def test_duplicate_registration_while_lease_alive(h: Harness) -> None:
    h.register(1)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=99)))
    assert resp.error_code == ErrorCode.duplicate_broker_registration
    assert resp.broker_epoch == -1


def test_new_incarnation_after_lease_expired_gets_higher_epoch(h: Harness) -> None:
    e1 = h.register(1)
    h.tick(9_001)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=99)))
    assert resp.error_code == ErrorCode.none
    assert resp.broker_epoch > e1
    assert h.image().brokers[1].incarnation_id == uuid.UUID(int=99)


def test_wrong_cluster_id(h: Harness) -> None:
    resp = h.run(h.registration(1, cluster_id="other"))
    assert resp.error_code == ErrorCode.inconsistent_cluster_id
    assert 1 not in h.image().brokers
    assert h.evs("decision")[-1]["error"] == "INCONSISTENT_CLUSTER_ID"


def test_unsupported_feature_level_refused(h: Harness) -> None:
    resp = h.run(h.registration(1, features=(("metadata.version", 2, 5),)))
    assert resp.error_code == ErrorCode.unsupported_version
    resp = h.run(h.registration(2, features=()))
    assert resp.error_code == ErrorCode.unsupported_version


def test_heartbeat_errors(h: Harness) -> None:
    assert h.heartbeat(7, 0).error_code == ErrorCode.broker_id_not_registered
    epoch = h.register(1)
    assert h.heartbeat(1, epoch - 1).error_code == ErrorCode.stale_broker_epoch
    assert h.heartbeat(1, epoch).error_code == ErrorCode.none


def test_unfenced_only_when_asked_and_caught_up(h: Harness) -> None:
    epoch = h.register(1)
    r = h.heartbeat(1, epoch, offset=epoch - 1)
    assert r.is_fenced and not r.is_caught_up
    r = h.heartbeat(1, epoch, want_fence=True)
    assert r.is_fenced and r.is_caught_up
    r = h.heartbeat(1, epoch)
    assert not r.is_fenced
    assert not h.image().brokers[1].fenced
    unfence = h.evs("fence")[-1]
    assert {k: v for k, v in unfence.items() if k not in ("offset", "at_ms", "metadata_offset")} == {
        "broker": 1, "action": "unfence", "reason": "heartbeat", "epoch": epoch}
    assert unfence["metadata_offset"] >= epoch  # the heartbeat's offset: caught up (UnfencedBeforeCaughtUp)
    assert isinstance(unfence["at_ms"], int)  # the controller's clock (FencedWithLiveSession reads it)
    # in effect from the UnfenceBrokerRecord's position, which follows the registration
    assert unfence["offset"] > epoch


def test_fenced_after_session_timeout_not_before(h: Harness) -> None:
    epochs = h.start_brokers(1, 2)
    h.tick(8_999)
    assert not h.image().brokers[1].fenced
    h.heartbeat(2, epochs[2])
    h.tick(2)
    assert h.image().brokers[1].fenced
    assert not h.image().brokers[2].fenced
    assert any(e["broker"] == 1 and e["action"] == "fence" and e["reason"] == "session timeout" for e in h.evs("fence"))
    # a fenced broker heartbeating again is unfenced
    assert not h.heartbeat(1, epochs[1]).is_fenced


def test_responses_held_until_commit(h: Harness) -> None:
    token = h.send(h.registration(1))
    assert token not in h.replies
    assert h.active().held_requests() == 1
    h.commit()
    assert h.replies[token].error_code == ErrorCode.none


def test_lease_events_sampled(h: Harness) -> None:
    epoch = h.register(1)
    for _ in range(5):
        h.now += 100
        h.heartbeat(1, epoch)
    leases = [e for e in h.evs("lease") if e["broker"] == 1]
    assert len(leases) == 1
    h.now += 1000
    h.heartbeat(1, epoch)
    assert len([e for e in h.evs("lease") if e["broker"] == 1]) == 2


def test_decision_journal_fields(h: Harness) -> None:
    epoch = h.register(1)
    d = [e for e in h.evs("decision") if e["api"] == "BrokerRegistration"][-1]
    assert d == {
        "api": "BrokerRegistration",
        "broker": 1,
        "broker_epoch": epoch,
        "error": "NONE",
        "incarnation": str(h.incarnations[1]),
        "offset": epoch,  # the RegisterBrokerRecord's own position
        "at_ms": d["at_ms"],  # the controller's clock when it decided (RegisteredOverLiveSession)
        "previous_broker_epoch": -1,  # KIP-966: no proof of a clean stop
    }
    assert isinstance(d["at_ms"], int)


def test_standby_answers_not_controller() -> None:
    h = Harness(controllers=3)
    token = h.send(h.registration(1), to=2)
    assert h.replies[token].error_code == ErrorCode.not_controller
    assert CLUSTER_ID


def test_replaced_incarnation_never_accepted_again(h: Harness) -> None:
    a, b = uuid.UUID(int=10), uuid.UUID(int=11)
    assert h.run(h.registration(1, incarnation=a)).error_code == ErrorCode.none
    h.tick(9_001)
    assert h.run(h.registration(1, incarnation=b)).error_code == ErrorCode.none
    h.tick(9_001)  # b silent too: its lease is over, yet the zombie a may not come back
    assert h.run(h.registration(1, incarnation=a)).error_code == ErrorCode.duplicate_broker_registration
    assert h.image().brokers[1].incarnation_id == b


def test_next_deadline_is_the_first_unfenced_lease_expiry(h: Harness) -> None:
    assert h.active().next_deadline_ms() is None
    e = h.start_brokers(1, 2)
    h.now += 1_000
    h.heartbeat(2, e[2])
    first = h.active().next_deadline_ms()
    assert first == h.active().leases.last_contact[1] + 9_000
    h.tick(first - h.now)
    assert h.image().brokers[1].fenced
    assert h.active().next_deadline_ms() == h.active().leases.last_contact[2] + 9_000


def test_restart_after_controlled_shutdown_need_not_wait_for_the_lease(h: Harness) -> None:
    e = h.start_brokers(1)
    assert h.heartbeat(1, e[1], want_shut_down=True).should_shut_down
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=555)))
    assert resp.error_code == ErrorCode.none and resp.broker_epoch > e[1]
    assert h.heartbeat(1, e[1]).error_code == ErrorCode.stale_broker_epoch  # the old process is gone


def test_a_controller_that_loaded_a_snapshot_refuses_the_same_zombie() -> None:
    """The incarnations a newer registration replaced travel in snapshots (RegisterBrokerRecord's
    kraftlab tagged field): before, a controller that loaded a snapshot forgot them and accepted a
    zombie's registration that log replay refuses."""
    h = Harness(controllers=2)
    a, b = uuid.UUID(int=10), uuid.UUID(int=11)
    assert h.run(h.registration(1, incarnation=a)).error_code == ErrorCode.none
    h.tick(9_001)
    assert h.run(h.registration(1, incarnation=b)).error_code == ErrorCode.none
    snapshot = h.ctrls[1].replay.snapshot_records()
    assert snapshot is not None
    h.ctrls[2].handle_load_snapshot(*snapshot)
    assert h.ctrls[2].replay.image.retired == {1: {a}}
    h.elect(2)
    h.tick(9_001)
    assert h.run(h.registration(1, incarnation=a)).error_code == ErrorCode.duplicate_broker_registration
