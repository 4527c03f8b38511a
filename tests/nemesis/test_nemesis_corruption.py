"""File corruption by KRaft zone (nemesis/corruption_script.py), run on a metadata directory laid
out as the node lays it out, as the disk fault runs it on a host (`python3 -c`), and drawn by the
disk package."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from kraftlab.nemesis.corruption_script import MODES, ZONES, damage, region, zone_files
from kraftlab.nemesis.disk import corruption_command, draw_disk
from kraftlab.nemesis.package import Cluster, Timing

SEG0, SEG1 = "00000000000000000000.log", "00000000000000000042.log"


def layout(meta: Path) -> Path:
    part = meta / "__cluster_metadata-0"
    part.mkdir(parents=True)
    (part / SEG0).write_bytes(bytes(range(256)) * 4)
    (part / SEG1).write_bytes(bytes((i * 7 + 3) % 251 for i in range(600)))
    (part / "00000000000000000040-0000000003.checkpoint").write_bytes(bytes((i * 13 + 5) % 253 for i in range(300)))
    (part / "quorum-state").write_bytes(b'{"leaderEpoch": 3, "votedId": 2}')
    (part / "hw-checkpoint").write_bytes(b"0\n1\n__cluster_metadata 0 40\n")
    (meta / "meta.properties").write_bytes(b"version=1\nnode.id=1\n")
    return part


def test_zones_name_the_files_kraft_keeps_there(tmp_path: Path) -> None:
    part = layout(tmp_path)
    assert zone_files("active-segment", str(tmp_path)) == [str(part / SEG1)]
    assert zone_files("older-segment", str(tmp_path)) == [str(part / SEG0)]
    snaps = zone_files("snapshot", str(tmp_path))
    assert [Path(f).name for f in snaps] == ["00000000000000000040-0000000003.checkpoint"]
    assert zone_files("meta.properties", str(tmp_path)) == [str(tmp_path / "meta.properties")]


@pytest.mark.parametrize("mode", ["flip-bits", "truncate", "zero", "copy-chunk"])
@pytest.mark.parametrize("zone", ZONES)
def test_each_mode_damages_only_its_region(tmp_path: Path, mode: str, zone: str) -> None:
    meta = tmp_path / "meta"
    layout(meta)
    before = {p: p.read_bytes() for p in meta.rglob("*") if p.is_file()}
    out = damage(mode, zone, str(meta), str(tmp_path / "stash"), 7, 1, 3, 16)
    path = meta / str(out["file"])
    start, end = out["range"]  # type: ignore[misc]
    old, new = before[path], path.read_bytes()
    assert new != old, out
    assert new[:start] == old[:start]
    if mode != "truncate":
        assert len(new) == len(old) and new[end:] == old[end:]
    else:
        assert start <= len(new) < end
    assert all(p.read_bytes() == b for p, b in before.items() if p != path)  # one file only


def test_helix_regions_are_disjoint_and_cover_the_file() -> None:
    spans = [region(1000, k, 3) for k in range(3)]
    assert spans == [(0, 333), (333, 666), (666, 1000)]


def test_snapshot_then_rollback_brings_back_the_old_content(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    part = layout(meta)
    stash = str(tmp_path / "stash")
    damage("snapshot", "quorum-state", str(meta), stash, 1, 0, 1, 0)
    (part / "quorum-state").write_bytes(b'{"leaderEpoch": 9, "votedId": 3}')
    out = damage("rollback", "quorum-state", str(meta), stash, 1, 0, 1, 0)
    assert out["files"] == ["__cluster_metadata-0/quorum-state"]
    assert (part / "quorum-state").read_bytes() == b'{"leaderEpoch": 3, "votedId": 2}'


def test_bad_requests_say_why(tmp_path: Path) -> None:
    layout(tmp_path)
    for args, says in [(("melt", "snapshot"), "unknown mode"), (("zero", "nowhere"), "unknown zone"),
                       (("rollback", "snapshot"), "no snapshot of zone snapshot")]:
        with pytest.raises(ValueError, match=says):
            damage(*args, str(tmp_path), str(tmp_path / "stash"), 1, 0, 1, 8)


def test_the_host_command_runs_the_script_and_reports_as_json(tmp_path: Path) -> None:
    layout(tmp_path)
    cmd = corruption_command("zero", "active-segment", str(tmp_path), str(tmp_path / "s"), 3, 0, 1, 8)
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["zeroed"][1] - json.loads(r.stdout)["zeroed"][0] == 8
    bad = subprocess.run(["sh", "-c", corruption_command("zero", "snapshot", str(tmp_path / "none"), "s", 1, 0, 1, 8)],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and "no file in zone snapshot" in bad.stderr


def test_the_package_draws_zone_and_helix_corruption_on_brokers_only() -> None:
    cluster = Cluster(("n1", "n2", "n3", "n4", "n5"), ("n1", "n2", "n3"), ("n1", "n2", "n3", "n4", "n5"))
    rng = random.Random(5)
    seen = set()
    for _ in range(60):
        for mode in ("zone", "helix"):
            d = draw_disk(rng, cluster, Timing(), [mode])
            assert d.value["damage"] in MODES and d.value["zone"] in ZONES
            assert set(d.value["nodes"]) <= {"n4", "n5"}
            assert d.value["helix"] == (mode == "helix") and (mode != "helix" or d.value["nodes"] == ["n4", "n5"])
            seen.add(d.value["zone"])
    assert seen == set(ZONES)
