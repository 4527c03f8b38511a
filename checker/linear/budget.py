"""A time and memory budget for one check, polled by the search every few thousand steps."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """This process's resident set size (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except OSError:
        return 0


@dataclass(frozen=True)
class Budget:
    """Limits for one check: wall seconds, resident memory the check adds (above what its
    process held when it began: a forked checker starts with its parent's pages), memoised
    configurations."""

    seconds: float = 60.0
    max_rss_bytes: int = 1_500_000_000
    max_configs: int = 20_000_000

    def to_json(self) -> dict[str, float | int]:
        return {"seconds": self.seconds, "max_rss_bytes": self.max_rss_bytes, "max_configs": self.max_configs}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Budget:
        return cls(**d) if d else cls()


class Meter:
    """Turns a Budget into a deadline; `exceeded` returns the reason, or None."""

    RSS_EVERY = 0.05
    """Seconds between two reads of the resident memory (a /proc read is not free)."""

    def __init__(self, budget: Budget, deadline: float | None = None) -> None:
        self.budget = budget
        self.deadline = deadline if deadline is not None else time.monotonic() + budget.seconds
        self._rss_at = 0.0
        self.baseline = rss_bytes()

    def exceeded(self, configs: int) -> str | None:
        now = time.monotonic()
        if now > self.deadline:
            return f"time budget of {self.budget.seconds:g} s exhausted after {configs} configurations"
        if configs > self.budget.max_configs:
            return f"configuration budget of {self.budget.max_configs} exhausted"
        if now - self._rss_at < self.RSS_EVERY:
            return None
        self._rss_at = now
        rss = rss_bytes()
        if rss - self.baseline > self.budget.max_rss_bytes:
            limit = self.budget.max_rss_bytes // 1_000_000
            return (f"memory budget of {limit} MB exhausted ({(rss - self.baseline) // 1_000_000} MB more than "
                    f"the {self.baseline // 1_000_000} MB resident when the check began)")
        return None
