"""The nemesis's files as the node reads them: the clock control file through `node.clock`, and
disk damage found by `node.storage`'s log recovery when the node opens its log again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kraftlab.nemesis.clockfile import ClockSetting, write_command
from kraftlab.nemesis.disk import damage_command
from kraftlab.node.clock import ManualTime, SkewedClock
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.log import DiskLog


def sh(command: str) -> str:
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_node_clock_reads_a_bump_and_a_rate(tmp_path: Path) -> None:
    path = tmp_path / "clock.json"
    real = ManualTime()
    sh(write_command(str(path), ClockSetting(offset_ms=30_000.0)))
    clock = SkewedClock(path, real)
    assert clock.wall_ns() - real.wall_ns() == 30_000 * 1_000_000
    sh(write_command(str(path), ClockSetting(offset_ms=0.0, rate=2.0, anchor_mono_ns=real.mono_ns())))
    real.advance(1_000_000_000)  # past the 50 ms re-read interval; the file's mtime changed
    clock.wall_ns()
    before_wall, before_real = clock.wall_ns(), real.wall_ns()
    real.advance(1_000_000_000)
    assert clock.wall_ns() - before_wall == pytest.approx(2 * (real.wall_ns() - before_real), rel=0.01)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    log = DiskLog.open(tmp_path, segment_bytes=1 << 20)
    for i in range(10):
        log.append([Batch(i, 1, (Record(b"k%d" % i, b"v" * 40),))])
    log.flush()
    log.close()
    return tmp_path


@pytest.mark.parametrize(("damage", "seed", "amount"),
                         [("truncate-tail", 1, 30)] + [("flip-bits", seed, 1) for seed in range(6)])
def test_log_damage_is_found_on_reopen(log_dir: Path, damage: str, seed: int, amount: int) -> None:
    done = json.loads(sh(damage_command(damage, str(log_dir), str(log_dir), seed, amount)))
    assert done["action"] == damage
    log = DiskLog.open(log_dir, segment_bytes=1 << 20)
    try:
        found = log.recovery.damage
        assert found is not None, done
        assert found.path == done["file"]
        assert log.end_offset() < 10
    finally:
        log.close()
