"""The shell/python commands the nemesis sends, run for real on this machine against temporary
files: the clock control file and each disk damage."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from kraftlab.nemesis.clockfile import ClockSetting, monotonic_command, parse, write_command
from kraftlab.nemesis.disk import PARTITION_DIR, damage_command
from kraftlab.nemesis.netfilter import MAX_CHAIN, loss_chain, partition_chain


def sh(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)


def test_clock_file_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "node" / "clock.json"
    result = sh(write_command(str(path), ClockSetting(offset_ms=-30000.0, rate=1.5, anchor_mono_ns=123)))
    assert result.returncode == 0, result.stderr
    assert parse(path.read_text()) == ClockSetting(-30000.0, 1.5, 123)
    assert set(json.loads(path.read_text())) == {"offset_ms", "rate", "anchor_mono_ns"}
    assert os.listdir(path.parent) == ["clock.json"]  # no temporary file left
    sh(write_command(str(path), ClockSetting(offset_ms=5.0)))
    assert parse(path.read_text()) == ClockSetting(5.0, 1.0, 0)


def test_monotonic_command_reads_the_monotonic_clock() -> None:
    before = time.monotonic_ns()
    out = int(sh(monotonic_command()).stdout)
    assert before <= out <= time.monotonic_ns()


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    part = tmp_path / "meta" / PARTITION_DIR
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(bytes(range(256)) * 4)
    (part / f"{1024:020d}.log").write_bytes(b"\x01" * 500)
    (part / f"{1024:020d}-{3:010d}.checkpoint").write_bytes(b"\x02" * 300)
    (part / "quorum-state").write_text('{"leaderEpoch": 3}')
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("node.id=1\n")
    return tmp_path


def damage(meta: Path, action: str, seed: int = 1, amount: int = 100) -> dict:
    result = sh(damage_command(action, str(meta / "meta"), str(meta / "data"), seed, amount))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_truncate_tail_cuts_the_last_segment(meta: Path) -> None:
    done = damage(meta, "truncate-tail", amount=120)
    last = meta / "meta" / PARTITION_DIR / f"{1024:020d}.log"
    assert done == {"action": "truncate-tail", "file": str(last), "old_size": 500, "new_size": 380}
    assert last.stat().st_size == 380
    assert (meta / "meta" / PARTITION_DIR / f"{0:020d}.log").stat().st_size == 1024


def test_flip_bits_flips_exactly_the_reported_bits(meta: Path) -> None:
    part = meta / "meta" / PARTITION_DIR
    originals = {p: p.read_bytes() for p in part.iterdir()}
    done = damage(meta, "flip-bits", seed=5, amount=3)
    assert done["action"] == "flip-bits" and len(done["flips"]) == 3
    changed = Path(done["file"])
    new, old = changed.read_bytes(), originals[changed]
    expected = bytearray(old)
    for pos, bit in done["flips"]:
        expected[pos] ^= 1 << bit
    assert new == bytes(expected)
    assert new != old or len({tuple(f) for f in done["flips"]}) < 3
    assert all(p.read_bytes() == b for p, b in originals.items() if p != changed)
    again = damage(meta, "flip-bits", seed=5, amount=3)  # seeded: same file and positions
    assert again["file"] == done["file"] and again["flips"] == done["flips"]


def test_delete_quorum_state_and_wipe(meta: Path) -> None:
    assert damage(meta, "delete-quorum-state")["existed"] is True
    assert not (meta / "meta" / PARTITION_DIR / "quorum-state").exists()
    assert damage(meta, "delete-quorum-state")["existed"] is False
    done = damage(meta, "wipe")
    assert os.listdir(meta / "meta") == [] and os.listdir(meta / "data") == []
    assert len(done["removed"]) == 2


def test_wipe_metadata_keeps_the_partition_logs(meta: Path, tmp_path: Path) -> None:
    """The rebuild of a broker that refused its damaged metadata: the metadata directory goes, the
    partition logs and their directory's meta.properties (its directory id) stay — in Kafka's shared
    layout too, where the partitions sit beside `__cluster_metadata-0`."""
    (meta / "data" / "queue-0").mkdir()
    done = damage(meta, "wipe-metadata")
    assert os.listdir(meta / "meta") == [] and len(done["removed"]) == 1
    assert sorted(os.listdir(meta / "data")) == ["meta.properties", "queue-0"]
    shared = tmp_path / "shared"
    (shared / PARTITION_DIR).mkdir(parents=True)
    (shared / "queue-0").mkdir()
    (shared / "meta.properties").write_text("node.id=1\n")
    (shared / "bootstrap.checkpoint").write_text("x")
    result = sh(damage_command("wipe-metadata-log", str(shared), str(shared), 1, 0))
    assert result.returncode == 0, result.stderr  # the metadata log goes, the directory id stays (KIP-858)
    assert sorted(os.listdir(shared)) == ["meta.properties", "queue-0"]
    (shared / PARTITION_DIR).mkdir()
    result = sh(damage_command("wipe-metadata", str(shared), str(shared), 1, 0))
    assert result.returncode == 0, result.stderr  # meta.properties was the damage: it goes too
    assert os.listdir(shared) == ["queue-0"]
    # the layout on --diskfs: log.dirs is the metadata directory, the data directory (the journal's) apart
    (shared / PARTITION_DIR).mkdir()
    (shared / "meta.properties").write_text("node.id=1\n")
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    result = sh(damage_command("wipe-metadata-log", str(shared), str(journal_dir), 1, 0))
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(shared)) == ["meta.properties", "queue-0"]


def test_damage_without_segments_fails_loudly(tmp_path: Path) -> None:
    result = sh(damage_command("truncate-tail", str(tmp_path), str(tmp_path), 1, 10))
    assert result.returncode != 0 and "no log segment" in result.stderr


def test_chain_names_fit_iptables_and_differ_per_lab() -> None:
    long_a, long_b = "a-very-long-lab-name-for-tests-1", "a-very-long-lab-name-for-tests-2"
    for name in ("default", long_a, "x y"):
        assert len(loss_chain(name)) <= MAX_CHAIN and len(partition_chain(name)) <= MAX_CHAIN
    assert partition_chain(long_a) != partition_chain(long_b)
    assert partition_chain("default") == "KRAFTLAB-default"
