"""The `drop: new-connections` partition mode: only connection-opening SYNs of the grudge are dropped.

Against fake hosts: the rules it loads and what the op records; against a real three-namespace lab:
the receiver cannot be connected to by the sender, yet its own connections to the sender work both
ways, and heal restores everything."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from nemesis_labs import namespace_lab
from nemesis_programs import write_programs

from kraftlab.control.lab import Lab
from kraftlab.nemesis.cleanup import ledger_for
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.daemon_control import DaemonNodeControl
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.netfilter import drop_rules
from kraftlab.nemesis.ports import MemoryRecorder


def test_rules_match_only_tcp_syns_in_new_connections_mode() -> None:
    assert drop_rules(["10.0.0.2", "10.0.0.1"]) == ["-s 10.0.0.1/32 -j DROP", "-s 10.0.0.2/32 -j DROP"]
    assert drop_rules(["10.0.0.1"], mode="new-connections") == ["-s 10.0.0.1/32 -p tcp --syn -j DROP"]
    with pytest.raises(ValueError, match="unknown drop mode"):
        drop_rules(["10.0.0.1"], mode="half")


def test_partition_in_new_connections_mode_loads_syn_rules_and_records_the_mode(
        nemesis: Nemesis, control: FakeNodeControl, recorded: MemoryRecorder) -> None:
    done = nemesis.invoke("start-partition", {"grudge": {"n1": ["n2", "n3"]}, "drop": "new-connections"})
    assert done.type == "ok", done
    assert done.value == {"topology": "grudge", "grudge": {"n1": ["n2", "n3"]}, "drop": "new-connections"}
    loaded = control.host("n1").commands[-1]
    assert "-s 10.9.0.2/32 -p tcp --syn -j DROP" in loaded and "-s 10.9.0.3/32 -p tcp --syn -j DROP" in loaded
    assert "-s 10.9.0.2/32 -j DROP" not in loaded
    assert "--syn" not in control.host("n2").commands[-1]
    assert nemesis.invoke("stop-partition").type == "ok"
    plain = nemesis.invoke("start-partition", {"grudge": {"n1": ["n2"]}})
    assert "drop" not in plain.value and "--syn" not in control.host("n1").commands[-1]


def test_unknown_drop_mode_fails_without_touching_a_host(nemesis: Nemesis, control: FakeNodeControl) -> None:
    done = nemesis.invoke("start-partition", {"grudge": {"n1": ["n2"]}, "drop": "half"})
    assert done.type == "fail" and "unknown drop mode" in (done.error or "")
    assert all(not control.host(n).commands for n in control.nodes())


# ---------------------------------------------------------------- a real lab

@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    with namespace_lab(tmp_path / "labs", "nwc", 3) as lab:
        yield lab


def reach(lab: Lab, programs: dict[str, str], src: str, dst: str) -> str | None:
    """What `src` gets back from the echo server on `dst` (None when it cannot connect or hear back)."""
    out = lab.host(src).run(f"python3 {programs['tcp_probe']} 1.0 0 {lab.host(dst).address}", check=True)
    return json.loads(out.stdout)[0][0]


@pytest.mark.netns
def test_receiver_refuses_new_connections_but_reaches_the_sender(lab: Lab, tmp_path: Path) -> None:
    programs = write_programs(tmp_path / "programs")
    ctl = DaemonNodeControl(lab.hosts, daemon="node", command=lambda n: f"python3 {programs['tcp_server']} {n}",
                            controllers=["n1", "n2", "n3"], brokers=[], active=lambda: "n1")
    for n in ctl.nodes():
        ctl.start(n)
    lab.run("i=0; until ss -ltn | grep -q ':7000 '; do sleep 0.02; i=$((i+1)); [ $i -le 250 ] || exit 1; done",
            check=True)
    nemesis = Nemesis(lab.name, ctl, recorder=MemoryRecorder(), ledger=ledger_for(lab.name), seed=1)
    try:
        assert reach(lab, programs, "n2", "n1") == "n1"
        done = nemesis.invoke("start-partition", {"grudge": {"n1": ["n2"]}, "drop": "new-connections"})
        assert done.type == "ok", done
        assert reach(lab, programs, "n2", "n1") is None  # n1 cannot be connected to by n2
        assert reach(lab, programs, "n1", "n2") == "n2"  # but n1's own connection to n2 works both ways
        assert reach(lab, programs, "n3", "n1") == "n1"  # and nobody else is cut
        assert nemesis.invoke("stop-partition").type == "ok"
        assert reach(lab, programs, "n2", "n1") == "n1"
    finally:
        nemesis.close()
        nemesis.heal_all()
        for n in ctl.nodes():
            if ctl.running(n):
                ctl.kill(n)
