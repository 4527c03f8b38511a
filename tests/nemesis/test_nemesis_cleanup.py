"""clean_lab after a run that died with faults in force: every host restored from the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlab.control.lab import Lab
from kraftlab.nemesis.cleanup import clean_lab, cleanup_scripts, ledger_for, ledger_path
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KRAFTLAB_STATE_DIR", str(tmp_path))
    return tmp_path


def test_clean_undoes_what_a_dead_run_left(state_dir: Path) -> None:
    control = FakeNodeControl()
    nemesis = Nemesis("dead", control, ledger=ledger_for("dead"), local_boot_id="me")
    nemesis.invoke("start-partition", {"topology": "halves"})
    nemesis.invoke("pause", {"nodes": ["n2"]})
    nemesis.invoke("clock-bump", {"nodes": ["n4"], "delta_ms": 9000})
    nemesis.invoke("start-packet", {"kind": "bandwidth", "rate": "1mbit", "nodes": ["n5"]})
    nemesis.invoke("kill", {"nodes": ["n3"]})
    assert ledger_path("dead").exists()
    # the run is SIGKILLed here: nothing healed; a later `kraftlab clean` opens the lab again
    lab = Lab("dead", "fake", list(control.hosts().values()))
    before = {n: len(control.host(n).commands) for n in control.nodes()}
    report = clean_lab(lab)
    new = {n: control.host(n).commands[before[n]:] for n in control.nodes()}
    assert report["failed"] == {} and report["nodes_left_down"] == ["n3"]
    assert set(report["was_in_force"]) == {"partition", "process", "clock", "qdisc"}
    for node in control.nodes():
        assert any("-X KRAFTLAB-dead " in c and "-X KRAFTLAB-dead-LOSS" in c for c in new[node])
    assert new["n2"][0] == "kill -CONT -- -4002 2>/dev/null || kill -CONT 4002 2>/dev/null; true"
    assert any("/var/lib/kraftlab/n4/clock.json" in c and '"offset_ms": 0.0, "rate": 1.0' in c for c in new["n4"])
    assert any("tc qdisc del" in c and "10.9.0.5" in c for c in new["n5"])
    assert not ledger_path("dead").exists()
    assert clean_lab(lab)["was_in_force"] == {}  # idempotent


def test_clean_keeps_the_ledger_when_a_host_fails(state_dir: Path) -> None:
    control = FakeNodeControl()
    Nemesis("sick", control, ledger=ledger_for("sick")).invoke("start-partition", {"topology": "halves"})
    control.host("n1").unreachable = True
    report = clean_lab(Lab("sick", "fake", list(control.hosts().values())))
    assert "n1" in report["failed"]
    assert ledger_path("sick").exists()


def test_cleanup_without_a_ledger_still_removes_chains() -> None:
    scripts = cleanup_scripts("x", {}, ["n1", "n2"])
    assert set(scripts) == {"n1", "n2"}
    assert all(len(s) == 1 and "-D INPUT -j KRAFTLAB-x" in s[0] for s in scripts.values())

