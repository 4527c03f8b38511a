"""Kafka's response rules the simulators judge on the wire (node/sim/wire.py): no throttle without a
quota, and a refused request answered with the response's defaults and the error alone."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.broker_heartbeat.v1.response import BrokerHeartbeatResponse
from kio.schema.broker_registration.v1.response import BrokerRegistrationResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64

from kraftlab.node.sim.wire import WireViolation, through_the_wire

NO_WAIT = i32Timedelta.parse(datetime.timedelta(0))


def heartbeat(code: ErrorCode, **fields: bool) -> BrokerHeartbeatResponse:
    values = {"is_caught_up": False, "is_fenced": True, "should_shut_down": False, **fields}
    return BrokerHeartbeatResponse(throttle_time=NO_WAIT, error_code=code, **values)


def test_answers_kafka_gives_pass() -> None:
    ok = heartbeat(ErrorCode.none, is_caught_up=True, is_fenced=False, should_shut_down=True)
    assert through_the_wire(ok, "ok") == ok
    refused = heartbeat(ErrorCode.stale_broker_epoch)
    assert through_the_wire(refused, "refused") == refused
    registration = BrokerRegistrationResponse(throttle_time=NO_WAIT, error_code=ErrorCode.duplicate_broker_registration,
                                              broker_epoch=i64(-1))
    assert through_the_wire(registration, "registration") == registration


@pytest.mark.parametrize("field", ["is_caught_up", "should_shut_down"])
def test_a_refusal_that_says_more_is_a_violation(field: str) -> None:
    with pytest.raises(WireViolation, match=f"refuses the request .* sets {field}=True"):
        through_the_wire(heartbeat(ErrorCode.stale_broker_epoch, **{field: True}), "answer")
    with pytest.raises(WireViolation, match="sets is_fenced=False"):
        through_the_wire(heartbeat(ErrorCode.broker_id_not_registered, is_fenced=False), "answer")
    with pytest.raises(WireViolation, match="sets broker_epoch=7"):
        through_the_wire(BrokerRegistrationResponse(throttle_time=NO_WAIT, error_code=ErrorCode.invalid_request,
                                                    broker_epoch=i64(7)), "answer")


def test_a_throttle_without_a_quota_is_a_violation() -> None:
    slow = BrokerHeartbeatResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=5)),
                                   error_code=ErrorCode.none, is_caught_up=True, is_fenced=False,
                                   should_shut_down=False)
    with pytest.raises(WireViolation, match="back off"):
        through_the_wire(slow, "answer")
