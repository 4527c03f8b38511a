"""The broker's request-rate quota: no throttle within the quota, Kafka's throttle time beyond it,
and none for a client without a quota."""

from __future__ import annotations

from kraftlab.node.broker.throttle import RequestQuotas


def test_within_and_beyond_the_quota() -> None:
    quotas = RequestQuotas(lambda e: {"slow": 1.0}.get(str(e)))  # 1 % of a thread: 10 ms per second
    now = 50_000
    assert quotas.record("fast", now, 500.0) == 0  # no quota for this client
    throttles = [quotas.record("slow", now + i, 1.0) for i in range(0, 1000, 100)]  # 10 ms in a second
    assert throttles == [0] * 10
    # 100 ms more in the same second: 110 ms against 100 ms allowed over the 10-s span
    t = quotas.record("slow", now + 999, 100.0)
    assert t > 0
    assert t <= 1000  # at most one window
    # the larger the excess, the longer the throttle; and it ends once the usage ages out
    assert quotas.record("slow", now + 999, 50.0) >= t
    assert quotas.record("slow", now + 12_000, 0.0) == 0


def test_throttle_time_follows_kafkas_formula() -> None:
    quotas = RequestQuotas(lambda e: 10.0, window_ms=1000, samples=11)  # 0.1 ms per ms
    # 1,500 ms of handler time at t=10.5 s, all in window 10: span 10 windows = 10,000 ms
    t = quotas.record("c", 10_500, 1_500.0)
    observed, target, span = 1_500 / 10_000, 0.1, 10_000
    assert t == min(int((observed - target) / target * span), 1000)
