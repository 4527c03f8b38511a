"""The request-rate quota (`request_percentage`) on a broker, with Kafka's throttle time (sans-IO).

Kafka meters, per quota entity, the time its requests keep a request-handler thread busy, as a
rate over `samples` windows of `window_ms` each (quota.window.num = 11, quota.window.size.seconds
= 1); `request_percentage` P allows P/100 ms of handler time per ms (P = 100: one whole thread).
When the measured rate O exceeds the quota T, the request is throttled for
(O - T) / T × (the measured span), at most one window, as Kafka's ClientRequestQuotaManager
computes it; the response then
carries `throttle_time_ms` and the broker holds the response that long (the client is muted).
A request that is not throttled answers `throttle_time_ms` 0. Time comes in as `now_ms` and the
handler time as `cost_ms`: no clock inside.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

QUOTA_WINDOW_NUM = 11
QUOTA_WINDOW_SIZE_MS = 1000


@dataclass
class _Sampled:
    """Usage in fixed windows, the oldest dropped once `samples` windows are kept."""

    window_ms: int
    samples: int
    windows: dict[int, float] = field(default_factory=dict)

    def record(self, now_ms: int, amount: float) -> None:
        w = now_ms // self.window_ms
        self.windows[w] = self.windows.get(w, 0.0) + amount
        for old in [k for k in self.windows if k <= w - self.samples]:
            del self.windows[old]

    def rate_per_ms(self, now_ms: int) -> tuple[float, int]:
        """(usage per ms over the kept windows, the span measured in ms) — Kafka's Rate: the span
        runs from the oldest kept window's start to now, at least (samples - 1) windows long."""
        current = now_ms // self.window_ms
        kept = {k: v for k, v in self.windows.items() if k > current - self.samples}
        if not kept:
            return 0.0, self.window_ms * (self.samples - 1)
        oldest = min(kept)
        span = max(now_ms - oldest * self.window_ms, self.window_ms * (self.samples - 1))
        return sum(kept.values()) / span, span


@dataclass
class RequestQuotas:
    """Per-entity request-time meters; `quota_of(entity)` gives its `request_percentage` or None."""

    quota_of: Callable[[Hashable], float | None]
    window_ms: int = QUOTA_WINDOW_SIZE_MS
    samples: int = QUOTA_WINDOW_NUM
    _meters: dict[Hashable, _Sampled] = field(default_factory=dict)

    def record(self, entity: Hashable, now_ms: int, cost_ms: float) -> int:
        """Account `cost_ms` of handler time to `entity`; the throttle time (ms) to answer with."""
        percentage = self.quota_of(entity)
        if percentage is None:
            self._meters.pop(entity, None)
            return 0
        meter = self._meters.setdefault(entity, _Sampled(self.window_ms, self.samples))
        meter.record(now_ms, cost_ms)
        observed, span = meter.rate_per_ms(now_ms)
        target = percentage / 100.0
        if observed <= target:
            return 0
        return min(int((observed - target) / target * span), self.window_ms)  # Kafka caps it at one window
