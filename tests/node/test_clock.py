"""node.clock: skew math, the control-file protocol, and the monotonic guarantee."""

from __future__ import annotations

import os
from pathlib import Path

from kraftlab.node.clock import CHECK_INTERVAL_NS, SLEW, ManualTime, Skew, SkewedClock, write_skew

MS = 1_000_000
S = 1_000_000_000


def test_no_file_is_real_time() -> None:
    real = ManualTime()
    clock = SkewedClock(None, real)
    assert clock.mono_ns() == real.mono and clock.wall_ns() == real.wall
    real.advance(5 * S)
    assert clock.mono_ns() == real.mono and clock.wall_ms() == real.wall // MS


def test_offset_and_rate(tmp_path: Path) -> None:
    real = ManualTime()
    f = tmp_path / "clock.json"
    write_skew(f, Skew(offset_ms=30_000.0, rate=2.0, anchor_mono_ns=real.mono))
    clock = SkewedClock(f, real)
    assert clock.wall_ns() == real.wall + 30 * S
    assert clock.mono_ns() == real.mono + 30 * S
    real.advance(10 * S)
    # anchor + (real - anchor) * 2 + offset: 10 s elapsed count double
    assert clock.mono_ns() == real.mono + 10 * S + 30 * S
    assert clock.wall_ns() == real.wall + 10 * S + 30 * S


def test_file_change_seen_only_after_check_interval(tmp_path: Path) -> None:
    real = ManualTime()
    f = tmp_path / "clock.json"
    clock = SkewedClock(f, real)  # absent file: no skew
    assert clock.wall_ns() == real.wall
    write_skew(f, Skew(offset_ms=1000.0, anchor_mono_ns=real.mono))
    real.advance(CHECK_INTERVAL_NS // 2)
    assert clock.wall_ns() == real.wall  # not re-checked yet
    real.advance(CHECK_INTERVAL_NS)
    assert clock.wall_ns() == real.wall + S
    os.unlink(f)
    real.advance(CHECK_INTERVAL_NS)
    assert clock.wall_ns() == real.wall  # file removed: skew gone


def test_malformed_file_keeps_previous_skew(tmp_path: Path) -> None:
    real = ManualTime()
    f = tmp_path / "clock.json"
    write_skew(f, Skew(offset_ms=500.0))
    clock = SkewedClock(f, real)
    assert clock.wall_ns() == real.wall + 500 * MS
    f.write_text("{not json")
    real.advance(CHECK_INTERVAL_NS)
    assert clock.wall_ns() == real.wall + 500 * MS
    f.write_text('{"rate": 0}')
    real.advance(CHECK_INTERVAL_NS)
    assert clock.skew.offset_ms == 500.0


def test_negative_bump_slows_monotonic_never_backwards(tmp_path: Path) -> None:
    real = ManualTime()
    f = tmp_path / "clock.json"
    clock = SkewedClock(f, real)
    start = clock.mono_ns()
    write_skew(f, Skew(offset_ms=-1000.0))
    real.advance(CHECK_INTERVAL_NS)
    wall_before = real.wall
    assert clock.wall_ns() == wall_before - S  # the wall clock steps back
    readings = []
    for _ in range(100):
        readings.append(clock.mono_ns())
        real.advance(10 * MS)
    assert readings == sorted(readings)
    assert readings[0] >= start
    # while behind, it advances at SLEW x real speed
    assert readings[1] - readings[0] == int(10 * MS * SLEW)
    # after enough time the formula catches up and it runs at real speed again
    real.advance(3 * S)
    a = clock.mono_ns()
    real.advance(10 * MS)
    assert clock.mono_ns() - a == 10 * MS
    assert clock.mono_ns() == real.mono - S


def test_rate_change_is_continuous_enough(tmp_path: Path) -> None:
    real = ManualTime()
    f = tmp_path / "clock.json"
    write_skew(f, Skew(rate=3.0, anchor_mono_ns=real.mono))
    clock = SkewedClock(f, real)
    real.advance(S)
    fast = clock.mono_ns()
    write_skew(f, Skew(rate=1.0, anchor_mono_ns=real.mono))
    real.advance(CHECK_INTERVAL_NS)
    assert clock.mono_ns() >= fast  # back to rate 1 would step back by 2 s: it does not
