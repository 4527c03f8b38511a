"""Broker lifecycle against real controllers on a fake quorum: startup, fencing on silence,
self-fencing, controlled shutdown, failover, registration retries."""

from __future__ import annotations

import uuid

from broker_harness import MiniCluster
from kio.schema.broker_heartbeat.v1.response import BrokerHeartbeatResponse
from kio.schema.broker_registration.v4.response import BrokerRegistrationResponse
from kio.schema.errors import ErrorCode

from kraftlab.node.broker.lifecycle import BrokerConfig, BrokerEndpoint, BrokerLifecycle, BrokerState, SendToController


def _running(mc: MiniCluster) -> bool:
    return all(b.lifecycle.state == BrokerState.RUNNING for b in mc.brokers.values())


def test_startup_states_and_unfencing(mc: MiniCluster) -> None:
    took = mc.run_until(lambda: _running(mc), max_ms=5_000)
    assert took <= 1_000
    for bid in mc.brokers:
        assert mc.states(bid) == ["STARTING", "RECOVERY", "RUNNING"]
        assert not mc.active().future_image.brokers[bid].fenced
    # every broker's image equals the controllers' at the same offset
    c = mc.active()
    for b in mc.brokers.values():
        assert b.metadata.replay.next_offset == c.committed_offset
        assert b.metadata.image.digest() == c.committed_image.digest()


def test_silent_broker_fenced_within_session_timeout_and_fences_itself_later(mc: MiniCluster) -> None:
    mc.run_until(lambda: _running(mc))
    mc.cut.add(102)
    cut_at = mc.now
    fenced_after = mc.run_until(lambda: mc.active().future_image.brokers[102].fenced, max_ms=20_000)
    # last successful heartbeat was at most one interval before the cut
    assert 9_000 - 2_000 <= fenced_after <= 9_000 + 200
    assert not mc.brokers[102].lifecycle.self_fenced  # the controller fences first
    mc.run_until(lambda: mc.brokers[102].lifecycle.self_fenced, max_ms=20_000)
    self_fenced_after = mc.now - cut_at
    assert self_fenced_after > fenced_after
    assert "FENCED_SELF" in mc.states(102)
    assert not mc.brokers[102].lifecycle.accepting_client_requests()
    # fenced: in no ISR, never a leader, not in client metadata (checked in test_apis); heal
    mc.cut.clear()
    mc.run_until(lambda: not mc.active().future_image.brokers[102].fenced, max_ms=10_000)
    assert mc.states(102)[-1] == "UNFENCED_SELF"
    assert mc.brokers[102].lifecycle.accepting_client_requests()


def test_controlled_shutdown(mc: MiniCluster) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    mc.run_until(lambda: _running(mc))
    req = CreateTopicsRequest(
        topics=(CreatableTopic(name="t", num_partitions=6, replication_factor=2, assignments=(), configs=()),),
        timeout=5_000,
    )
    reply = mc.client(101, "c1", req)
    assert reply.response.topics[0].error_code == ErrorCode.none
    assert any(p.leader == 103 for _, _, p in mc.active().future_image.partitions())
    mc.brokers[103].lifecycle.begin_controlled_shutdown(mc.now)
    mc.run_until(lambda: mc.brokers[103].lifecycle.state == BrokerState.SHUTTING_DOWN, max_ms=5_000)
    assert mc.states(103)[-2:] == ["PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN"]
    img = mc.active().committed_image
    assert all(p.leader != 103 and 103 not in p.isr for _, _, p in img.partitions())


def test_controller_failover_keeps_brokers_unfenced(mc: MiniCluster) -> None:
    mc.run_until(lambda: _running(mc))
    mc.run(1_000)
    mc.q.elect(2)
    mc.q.commit()
    mc.run(20_000)
    img = mc.active().future_image
    assert mc.active() is mc.ctrls[2]
    assert all(not img.brokers[b].fenced for b in mc.brokers)
    assert not any(e.ev == "fence" and e.fields["action"] == "fence" for _, e in mc.events)


def test_leaderless_quorum_then_recovery(mc: MiniCluster) -> None:
    mc.run_until(lambda: _running(mc))
    mc.q.depose()
    mc.run(3_000)
    assert all(b.lifecycle.state == BrokerState.RUNNING for b in mc.brokers.values())
    mc.q.elect(3)
    mc.q.commit()
    mc.run(12_000)
    assert all(not mc.active().future_image.brokers[b].fenced for b in mc.brokers)
    assert not any(b.lifecycle.self_fenced for b in mc.brokers.values())


def test_lost_registration_reply_retried_with_same_epoch() -> None:
    mc = MiniCluster(brokers=1)
    mc.drop_replies.add(101)
    mc.run(500)
    epochs = {
        e.fields["broker_epoch"] for _, e in mc.events if e.ev == "decision" and e.fields["api"] == "BrokerRegistration"
    }
    assert len(epochs) == 1  # several registrations decided, one epoch
    regs = [e for _, e in mc.events if e.ev == "decision" and e.fields["api"] == "BrokerRegistration"]
    assert len(regs) >= 2
    mc.drop_replies.clear()
    mc.run_until(lambda: mc.brokers[101].lifecycle.state == BrokerState.RUNNING)
    assert mc.brokers[101].lifecycle.broker_epoch == epochs.pop()


def test_restart_as_new_incarnation() -> None:
    mc = MiniCluster(brokers=1)
    mc.run_until(lambda: _running(mc))
    old_epoch = mc.brokers[101].lifecycle.broker_epoch
    # the process dies; a new one starts at once: duplicate until the old lease expires
    new = mc.add_broker(101, incarnation=uuid.UUID(int=777))
    mc.run(2_000)
    assert new.lifecycle.state == BrokerState.STARTING
    assert any(e.ev == "decision" and e.fields["error"] == "DUPLICATE_BROKER_REGISTRATION" for _, e in mc.events)
    mc.run_until(lambda: new.lifecycle.state == BrokerState.RUNNING, max_ms=15_000)
    assert new.lifecycle.broker_epoch > old_epoch


def _unit() -> BrokerLifecycle:
    cfg = BrokerConfig(
        node_id=5, cluster_id="c", incarnation_id=uuid.UUID(int=5), listeners=(BrokerEndpoint("PLAINTEXT", "h", 1),)
    )
    lc = BrokerLifecycle(cfg)
    lc.start(0)
    return lc


def test_unit_fatal_registration_error() -> None:
    lc = _unit()
    lc.tick(0, -1)
    (send,) = [o for o in lc.take_outputs() if isinstance(o, SendToController)]
    lc.on_response(
        send.token, BrokerRegistrationResponse(throttle_time=0, error_code=ErrorCode.inconsistent_cluster_id), 1
    )
    assert lc.state == BrokerState.SHUTTING_DOWN and lc.fatal_error == "INCONSISTENT_CLUSTER_ID"


def test_unit_stale_epoch_reregisters_and_one_request_in_flight() -> None:
    lc = _unit()
    lc.tick(0, -1)
    (send,) = [o for o in lc.take_outputs() if isinstance(o, SendToController)]
    lc.tick(10, -1)
    assert lc.take_outputs() == []  # still in flight
    lc.on_response(
        send.token, BrokerRegistrationResponse(throttle_time=0, error_code=ErrorCode.none, broker_epoch=42), 20
    )
    lc.tick(20, 41)
    (hb,) = [o for o in lc.take_outputs() if isinstance(o, SendToController)]
    assert hb.request.broker_epoch == 42 and hb.request.want_fence and hb.request.current_metadata_offset == 41
    lc.on_response(
        hb.token,
        BrokerHeartbeatResponse(throttle_time=0, error_code=ErrorCode.stale_broker_epoch, should_shut_down=False),
        30,
    )
    lc.tick(30, 41)
    (again,) = lc.take_outputs()
    assert type(again.request).__name__ == "BrokerRegistrationRequest"


def test_unit_self_fence_timeout_must_exceed_session_timeout() -> None:
    import pytest

    cfg = BrokerConfig(
        node_id=5,
        cluster_id="c",
        incarnation_id=uuid.UUID(int=5),
        listeners=(),
        session_timeout_ms=9000,
        self_fence_timeout_ms=9000,
    )
    with pytest.raises(ValueError):
        _ = cfg.effective_self_fence_timeout_ms


def test_a_broker_fenced_itself_answers_no_reads_unless_the_zoo_bug_is_on() -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource

    from kraftlab.node.bugs import NO_BUGS, BugSet

    read = DescribeConfigsRequest(resources=(DescribeConfigsResource(resource_type=2, resource_name="t",
                                                                     configuration_keys=None),), include_synonyms=False)
    write = CreateTopicsRequest(topics=(CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=(),
                                                       configs=()),), timeout=5_000, validate_only=False)
    for bugs, reads_while_fenced in ((NO_BUGS, False), (BugSet.of("stale-acls-while-fenced"), True)):
        mc = MiniCluster(bugs=bugs)
        mc.run_until(lambda m=mc: _running(m))  # type: ignore[misc]
        apis = mc.brokers[102].apis
        assert apis.serves(read, mc.now) and apis.serves(write, mc.now)
        mc.cut.add(102)
        mc.run_until(lambda m=mc: m.brokers[102].lifecycle.self_fenced, max_ms=20_000)  # type: ignore[misc]
        assert apis.serves(read, mc.now) is reads_while_fenced and not apis.serves(write, mc.now)
        assert not mc.brokers[102].lifecycle.accepting_client_requests()
        apis.handle("probe", read, mc.now)
        refused = [o for o in apis.take_outputs() if type(o).__name__ == "Refused"]
        assert bool(refused) is not reads_while_fenced


def test_a_request_after_a_long_pause_is_refused_before_any_tick(mc: MiniCluster) -> None:
    """A process paused past its self-fencing bound fences itself on the first request it reads,
    before its next tick: nothing is served (or authorized) from the image it had when it stopped."""
    from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource

    mc.run_until(lambda: _running(mc))
    life = mc.brokers[102].lifecycle
    read = DescribeConfigsRequest(resources=(DescribeConfigsResource(resource_type=2, resource_name="t",
                                                                     configuration_keys=None),), include_synonyms=False)
    late = mc.now + life.config.effective_self_fence_timeout_ms + 1
    assert mc.brokers[102].apis.serves(read, mc.now)
    assert not mc.brokers[102].apis.serves(read, late) and life.self_fenced
