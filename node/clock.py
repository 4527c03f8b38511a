"""The one place the node reads wall and monotonic time, with per-node skew from a control file.

Everything in `node/` that needs the time takes a `Clock`; only `SystemTime` below calls the
host's clocks. `SkewedClock` applies the clock control file of docs/contracts.md:

    node time = anchor + (real - anchor) × rate + offset

for both clocks (the wall clock uses the same elapsed monotonic time since the anchor). The file
is re-read when its mtime (or inode/size) changes, checked at most every 50 ms of real time; an
absent file means no skew, a malformed one keeps the previous settings and is logged once.

The node's monotonic clock never goes backwards: when a change to the file would move it back
(a negative bump, a lower rate), it keeps advancing at `SLEW` × the configured rate until the
formula catches up — it slows instead of stepping back. The wall clock steps freely (that is
the fault being injected).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

CHECK_INTERVAL_NS = 50_000_000
SLEW = 0.5


class RealTime(Protocol):
    """The host's clocks (the only seam that touches them)."""

    def wall_ns(self) -> int: ...

    def mono_ns(self) -> int: ...


class SystemTime:
    """The host's CLOCK_REALTIME and CLOCK_MONOTONIC."""

    def wall_ns(self) -> int:
        return time.time_ns()

    def mono_ns(self) -> int:
        return time.monotonic_ns()


class ManualTime:
    """A settable `RealTime` for tests."""

    def __init__(self, wall_ns: int = 1_700_000_000_000_000_000, mono_ns: int = 1_000_000_000) -> None:
        self.wall = wall_ns
        self.mono = mono_ns

    def advance(self, ns: int) -> None:
        self.wall += ns
        self.mono += ns

    def wall_ns(self) -> int:
        return self.wall

    def mono_ns(self) -> int:
        return self.mono


class Clock(Protocol):
    """The node's view of time, skew applied."""

    def wall_ns(self) -> int: ...

    def mono_ns(self) -> int: ...

    def wall_ms(self) -> int: ...

    def mono_ms(self) -> float: ...

    def real_mono_ns(self) -> int:
        """The host's own monotonic clock, no skew applied (journals use it to order events of
        nodes that share one kernel; the node never decides anything by it)."""
        ...


@dataclass(frozen=True, slots=True)
class Skew:
    """The contents of the clock control file."""

    offset_ms: float = 0.0
    rate: float = 1.0
    anchor_mono_ns: int = 0

    @staticmethod
    def parse(text: str) -> Skew:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("clock control file must hold a JSON object")
        offset = float(data.get("offset_ms", 0.0))
        rate = float(data.get("rate", 1.0))
        anchor = int(data.get("anchor_mono_ns", 0))
        if not math.isfinite(offset) or not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"bad clock skew: offset_ms={offset} rate={rate} (rate must be > 0)")
        return Skew(offset, rate, anchor)

    def render(self) -> str:
        return json.dumps({"offset_ms": self.offset_ms, "rate": self.rate, "anchor_mono_ns": self.anchor_mono_ns})

    def extra_ns(self, real_mono_ns: int) -> int:
        """How far node time is ahead of real time at `real_mono_ns` (same for both clocks)."""
        return round((real_mono_ns - self.anchor_mono_ns) * (self.rate - 1.0) + self.offset_ms * 1e6)


NO_SKEW = Skew()


def write_skew(path: str | Path, skew: Skew) -> None:
    """Replace the control file atomically (tmp + rename), as the clock nemesis does."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(skew.render())
    os.replace(tmp, p)


class SkewedClock:
    """Real time plus the skew of a control file (or none when `control_file` is None)."""

    def __init__(self, control_file: str | Path | None = None, real: RealTime | None = None) -> None:
        self._real = real or SystemTime()
        self._path = Path(control_file) if control_file else None
        self._skew = NO_SKEW
        self._file_key: tuple[int, int, int] | None = None
        self._next_check_ns: int | None = None
        self._last_real_mono = self._real.mono_ns()
        self._last_mono = self._last_real_mono
        self._refresh(self._last_real_mono, force=True)
        self._last_mono = self._last_real_mono + self._skew.extra_ns(self._last_real_mono)

    @property
    def skew(self) -> Skew:
        return self._skew

    def _refresh(self, real_mono: int, force: bool = False) -> None:
        if self._path is None:
            return
        if not force and self._next_check_ns is not None and real_mono < self._next_check_ns:
            return
        self._next_check_ns = real_mono + CHECK_INTERVAL_NS
        try:
            st = self._path.stat()
        except FileNotFoundError:
            if self._file_key is not None:
                log.info("clock control file %s removed: no skew", self._path)
            self._file_key, self._skew = None, NO_SKEW
            return
        except OSError as e:
            log.warning("clock control file %s: %s", self._path, e)
            return
        key = (st.st_mtime_ns, st.st_ino, st.st_size)
        if key == self._file_key:
            return
        self._file_key = key
        try:
            self._skew = Skew.parse(self._path.read_text())
            log.info("clock skew from %s: %s", self._path, self._skew)
        except (OSError, ValueError, TypeError) as e:
            log.warning("clock control file %s unreadable, keeping %s: %s", self._path, self._skew, e)

    def mono_ns(self) -> int:
        real = self._real.mono_ns()
        self._refresh(real)
        target = real + self._skew.extra_ns(real)
        elapsed = max(0, real - self._last_real_mono)
        if target < self._last_mono:
            target = self._last_mono + int(elapsed * self._skew.rate * SLEW)
        self._last_real_mono = real
        self._last_mono = target
        return target

    def wall_ns(self) -> int:
        real_mono = self._real.mono_ns()
        real_wall = self._real.wall_ns()
        self._refresh(real_mono)
        return real_wall + self._skew.extra_ns(real_mono)

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000

    def mono_ms(self) -> float:
        return self.mono_ns() / 1e6

    def real_mono_ns(self) -> int:
        return self._real.mono_ns()
