"""Rules on running nodes' disks: a slow disk generated around each kill when the nodes are on the
disk-fault filesystem (so the power loss catches un-fsynced writes), a failing disk (EIO, ENOSPC)
whose stop collects the errors the filesystem returned and starts the nodes that stopped on them;
both applied as filesystem rules and cleared exactly."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kraftlab.control.host import CommandResult
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeDiskControl, FakeNodeControl
from kraftlab.nemesis.ports import MemoryLedger
from kraftlab.nemesis.schedule import Schedule, Step, generate

NODES = ["n1", "n2", "n3", "n4", "n5"]
KW: dict[str, Any] = {"nodes": NODES, "controllers": NODES[:3], "brokers": NODES}


def _windows(sched: Schedule, package: str) -> list[tuple[Step, Step | None]]:
    return [(a, b) for a, b in sched.windows() if a.package == package]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_kill_is_enclosed_by_a_slow_disk(seed: int) -> None:
    sched = generate(["kill", "slow-disk"], seed=seed, duration=300, use_swarm=False, diskfs=True, **KW)
    kills, slows = _windows(sched, "kill"), _windows(sched, "slow-disk")
    assert len(kills) > 10 and len(slows) == len(kills)
    for (kill, restart), (slow, fast) in zip(kills, slows, strict=True):
        assert kill.at - 1.5 <= slow.at < kill.at
        assert (fast is None) == (restart is None)
        if fast is not None and restart is not None:
            assert fast.at == restart.at and fast.f == "stop-slow-disk"
        assert 100 <= slow.value["ms"] <= 600
        named = {k: v for k, v in slow.value.items() if k in ("nodes", "target")}
        assert named in ({k: v for k, v in kill.value.items() if k in ("nodes", "target")}, {"nodes": NODES})
    ends = [(s.at, e.at if e else 1e9) for s, e in slows]
    assert all(a_end < b_start for (_, a_end), (b_start, _) in itertools.pairwise(ends))  # never two at once


def test_without_the_filesystem_no_slow_disk_is_generated() -> None:
    for swarm in (True, False):
        sched = generate(["kill", "slow-disk"], seed=4, duration=300, use_swarm=swarm, **KW)
        assert not _windows(sched, "slow-disk") and _windows(sched, "kill")


def test_without_kills_a_slow_disk_has_a_lane_of_its_own() -> None:
    sched = generate(["partition", "slow-disk"], seed=5, duration=300, use_swarm=False, diskfs=True, **KW)
    slows = _windows(sched, "slow-disk")
    assert len(slows) > 3
    assert all(e is None or e.at - s.at >= 5.5 for s, e in slows)  # a failover's length at least


def test_a_slow_disk_delays_fsyncs_and_its_stop_clears_only_delays() -> None:
    control = FakeDiskControl()
    nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
    done = nemesis.invoke("start-slow-disk", {"nodes": ["n1", "n4"], "ms": 250})
    assert done.type == "ok" and done.value == {"nodes": ["n1", "n4"], "ms": 250, "glob": "*"}
    assert sorted(control.requests) == [("n1", {"cmd": "delay", "glob": "*", "ms": 250}),
                                        ("n4", {"cmd": "delay", "glob": "*", "ms": 250})]
    assert set(nemesis.status()["disk_rules"]) == {"n1", "n4"}
    control.requests.clear()
    assert [c.f for c in nemesis.heal_all()] == ["stop-slow-disk"]
    assert sorted(control.requests) == [("n1", {"cmd": "clear", "rules": "delay"}),
                                        ("n4", {"cmd": "clear", "rules": "delay"})]
    assert "disk_rules" not in nemesis.status() and nemesis.heal_all() == []


def test_the_active_controller_is_resolved_when_the_slow_disk_starts() -> None:
    control = FakeDiskControl()
    control.leader = "n2"
    done = Nemesis("t", control, ledger=MemoryLedger(), seed=1).invoke("start-slow-disk",
                                                                       {"target": "controller", "ms": 100})
    assert done.value["nodes"] == ["n2"] and control.requests == [("n2", {"cmd": "delay", "glob": "*", "ms": 100})]


def test_off_the_filesystem_a_slow_disk_is_unsupported_and_nothing_is_in_force() -> None:
    for control in (FakeDiskControl(diskfs=False), FakeNodeControl()):
        nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
        done = nemesis.invoke("start-slow-disk", {"nodes": ["n1"], "ms": 100})
        assert done.type == "fail" and "unsupported here" in str(done.error) and "--diskfs" in str(done.error)
        assert "disk_rules" not in nemesis.status()


def test_a_refused_rule_is_a_failed_fault() -> None:
    class Refusing(FakeDiskControl):
        def disk_request(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
            return {"ok": False, "error": "no such mount"}

    done = Nemesis("t", Refusing(), ledger=MemoryLedger(), seed=1).invoke("start-slow-disk", {"nodes": ["n1"]})
    assert done.type == "fail" and "no such mount" in str(done.error)


# ---- a failing disk -------------------------------------------------------------------------------

def test_generated_disk_errors_need_the_filesystem_and_name_their_rule() -> None:
    assert not _windows(generate(["disk-errors"], seed=6, duration=300, use_swarm=False, **KW), "disk-errors")
    sched = generate(["disk-errors"], seed=6, duration=600, use_swarm=False, diskfs=True, **KW)
    starts = [s.value for s, _ in _windows(sched, "disk-errors")]
    assert len(starts) > 10
    assert {v["errno"] for v in starts} == {"EIO", "ENOSPC"}
    assert {tuple(v["ops"]) for v in starts} == {("write",), ("fsync",), ("write", "fsync", "create"), ("read",)}
    assert {v["errno"] for v in starts if v["ops"] == ["read"]} == {"EIO"}  # a full disk fails no read
    assert all(v.get("restart") is (True if v["ops"] == ["read"] else None) for v in starts)  # recovery reads
    assert any(v.get("target") == "controller" for v in starts) and any("nodes" in v for v in starts)
    assert all(0 < v["probability"] <= 1 for v in starts)


def test_disk_errors_start_stop_and_restart_the_nodes_that_stopped_on_them() -> None:
    control = FakeDiskControl()
    nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
    done = nemesis.invoke("start-disk-errors", {"nodes": ["n2", "n4"], "ops": ["fsync"], "errno": "ENOSPC",
                                                "probability": 0.3, "glob": "*.log"})
    rule = {"ops": ["fsync"], "glob": "*.log", "errno": "ENOSPC", "probability": 0.3}
    assert done.type == "ok" and done.value == {"nodes": ["n2", "n4"], **rule}
    assert sorted(control.requests) == [("n2", {"cmd": "fail", **rule}), ("n4", {"cmd": "fail", **rule})]
    nemesis.invoke("start-slow-disk", {"nodes": ["n2"], "ms": 100})
    control.fail_stop("n2")  # n2 stopped on its failed fsync
    nemesis.invoke("kill", {"nodes": ["n4"]})  # n4 is held down by another fault: not ours to start
    error = {"op": "fsync", "path": "p/0.log", "errno": "ENOSPC", "rmono": 5}
    control.errors = {"n2": [error]}
    control.requests.clear()
    stop = nemesis.invoke("stop-disk-errors", {})
    assert stop.type == "ok" and stop.value == {"nodes": ["n2", "n4"], "injected": {"n2": [error]},
                                                "restarted": ["n2"]}
    assert ("n2", {"cmd": "clear", "rules": "fail"}) in control.requests
    assert control.running("n2") and not control.running("n4")
    assert set(nemesis.status()["disk_rules"]) == {"n2"}  # its slow disk is still in force
    assert [c.f for c in nemesis.heal_all()] == ["restart", "stop-slow-disk"]
    assert "disk_rules" not in nemesis.status()


def test_the_stop_waits_for_a_node_on_its_way_out_after_a_write_error() -> None:
    """The node met its error just before the window closed and is still shutting down: the stop waits
    for it to exit and starts it, instead of finding it running and leaving it down afterwards."""
    import threading

    control = FakeDiskControl()
    nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
    nemesis.invoke("start-disk-errors", {"nodes": ["n3"], "ops": ["fsync"]})
    control.errors = {"n3": [{"op": "fsync", "path": "p/0.log", "errno": "EIO", "rmono": 1}]}
    threading.Timer(0.3, control.fail_stop, ["n3"]).start()  # it exits a moment later
    stop = nemesis.invoke("stop-disk-errors", {"watch_s": 5.0})
    assert stop.value["restarted"] == ["n3"] and control.running("n3")


def test_a_node_down_for_disk_damage_is_left_to_the_disk_fault() -> None:
    """Started by the errors' stop, a node with a damaged disk would refuse after the damage's own stop
    had looked at it (and found it running): only the disk fault's stop may start (and watch) it."""
    control = FakeDiskControl()
    control.host("n4").on("wipe", CommandResult("n4", "", 0, '{"action": "wipe", "removed": []}\n', ""))
    nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
    nemesis.invoke("start-disk-errors", {"nodes": ["n4"], "ops": ["write"]})
    assert nemesis.invoke("start-disk", {"nodes": ["n4"], "damage": "wipe"}).type == "ok"  # n4 is down
    stop = nemesis.invoke("stop-disk-errors", {})
    assert stop.value["restarted"] == [] and not control.running("n4")
    assert nemesis.invoke("stop-disk", {}).value["restarted"] == ["n4"] and control.running("n4")


def test_a_read_rule_restarts_its_node_onto_the_failing_disk() -> None:
    """The reads a node surely makes are those of its recovery: with `restart` the node is crashed
    and started while the rule is in force (not one another fault holds down)."""
    control = FakeDiskControl()
    nemesis = Nemesis("t", control, ledger=MemoryLedger(), seed=1)
    nemesis.invoke("kill", {"nodes": ["n5"]})
    control.log.clear()
    done = nemesis.invoke("start-disk-errors", {"nodes": ["n1", "n5"], "ops": ["read"], "glob": "*",
                                                "probability": 1.0, "restart": True})
    assert done.type == "ok" and done.value["restarted"] == ["n1"]
    assert control.requests[0][1]["cmd"] == "fail" and control.log == ["kill n1", "start n1"]
    assert control.nodes_by_name["n1"].starts == 1 and not control.running("n5")
