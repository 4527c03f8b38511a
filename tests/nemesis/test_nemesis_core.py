"""The nemesis against fake hosts: the commands each fault issues, their reversal, the recorded
ops, the persisted state, and heal_all on every exit path."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from kraftlab.control.host import CommandResult
from kraftlab.nemesis.context import ACTIVE_WAIT_S
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.ports import MemoryLedger, MemoryRecorder
from kraftlab.nemesis.runner import Terminated, guarded

NEUTRAL = '{"offset_ms": 0.0, "rate": 1.0, "anchor_mono_ns": 0}'


def cmds(control: FakeNodeControl, node: str) -> list[str]:
    return control.host(node).commands


def dropped_sources(command: str) -> set[str]:
    return set(re.findall(r"-s (\S+)/32 -j DROP", command))


def test_partition_drops_exactly_the_grudge_on_each_receiver(nemesis: Nemesis, control: FakeNodeControl,
                                                             recorded: MemoryRecorder) -> None:
    done = nemesis.invoke("start-partition", {"grudge": {"n2": ["n1"], "n3": ["n1", "n4"]}})
    assert done.type == "ok", done
    assert dropped_sources(cmds(control, "n2")[-1]) == {"10.9.0.1"}
    assert dropped_sources(cmds(control, "n3")[-1]) == {"10.9.0.1", "10.9.0.4"}
    for node in ("n1", "n4", "n5"):  # every other host's chain is emptied (a new partition replaces the old)
        assert dropped_sources(cmds(control, node)[-1]) == set()
        assert "iptables-restore -w 10 --noflush" in cmds(control, node)[-1]
    assert all("KRAFTLAB-t1" in cmds(control, n)[-1] for n in control.nodes())
    assert recorded[0] == {"type": "invoke", "f": "start-partition", "value": {"grudge": {"n2": ["n1"],
                           "n3": ["n1", "n4"]}}, "node": None, "error": None}
    assert recorded[1]["type"] == "ok" and recorded[1]["value"]["grudge"] == {"n2": ["n1"], "n3": ["n1", "n4"]}
    assert nemesis.status() == {"partition": {"grudge": {"n2": ["n1"], "n3": ["n1", "n4"]}}}


def test_hook_is_installed_once_per_host(nemesis: Nemesis, control: FakeNodeControl) -> None:
    nemesis.invoke("start-partition", {"topology": "halves"})
    nemesis.invoke("start-partition", {"topology": "bridge"})
    first, second = cmds(control, "n1")
    assert "iptables -w 10 -I INPUT 1 -j KRAFTLAB-t1" in first
    assert "INPUT" not in second


def test_isolate_controller_asks_for_the_active_controller(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.leader = "n2"
    done = nemesis.invoke("start-partition", {"topology": "isolate-controller"})
    assert done.value["grudge"]["n2"] == ["n1", "n3", "n4", "n5"]
    # no leader known (an election in progress): asked again while the wait lasts, on a fake clock
    now = [0.0]
    elect_at: list[float | None] = [0.5]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if elect_at[0] is not None and now[0] >= elect_at[0]:
            control.leader = "n4"  # elected meanwhile

    nemesis.ctx.sleep, nemesis.ctx.clock = sleep, lambda: now[0]
    control.leader = None
    done = nemesis.invoke("start-partition", {"topology": "isolate-controller"})
    assert done.type == "ok" and done.value["grudge"]["n4"] == ["n1", "n2", "n3", "n5"] and now[0] < 1.0
    control.leader, elect_at[0], began = None, None, now[0]  # never elected: fails once the wait is over
    failed = nemesis.invoke("start-partition", {"topology": "isolate-controller"})
    assert failed.type == "fail" and "no active controller" in (failed.error or "")
    assert ACTIVE_WAIT_S - 1e-6 <= now[0] - began <= ACTIVE_WAIT_S + 0.2 + 1e-6


def test_heal_all_flushes_and_is_idempotent(nemesis: Nemesis, control: FakeNodeControl,
                                            recorded: MemoryRecorder) -> None:
    nemesis.invoke("start-partition", {"topology": "random-halves"})
    healed = nemesis.heal_all()
    assert [c.f for c in healed] == ["stop-partition"] and healed[0].type == "ok"
    for node in control.nodes():
        assert cmds(control, node)[-1] == "iptables -w 10 -F KRAFTLAB-t1 2>/dev/null || true"
    assert nemesis.status() == {}
    assert nemesis.heal_all() == []


def test_a_host_failing_makes_the_op_info_and_keeps_it_in_force(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.host("n3").on("iptables-restore", CommandResult("n3", "", 4, "", "iptables: resource busy"))
    done = nemesis.invoke("start-partition", {"topology": "halves"})
    assert done.type == "info" and "n3" in (done.error or "") and "resource busy" in (done.error or "")
    assert "partition" in nemesis.status()
    assert [c.f for c in nemesis.heal_all()] == ["stop-partition"]


def test_unknown_op_fails(nemesis: Nemesis, recorded: MemoryRecorder) -> None:
    done = nemesis.invoke("start-meteor", {})
    assert done.type == "fail" and "unknown nemesis op" in (done.error or "")
    assert [op["type"] for op in recorded] == ["invoke", "fail"]


def test_kill_then_restart(nemesis: Nemesis, control: FakeNodeControl) -> None:
    done = nemesis.invoke("kill", {"nodes": ["n2", "n4"]})
    assert done.type == "ok" and done.value == {"nodes": ["n2", "n4"], "signal": "SIGKILL"}
    assert control.nodes_by_name["n2"].state == "killed"
    assert nemesis.status()["process"] == {"n2": {"state": "killed", "host": "n2"},
                                           "n4": {"state": "killed", "host": "n4"}}
    healed = nemesis.heal_all()
    assert [(c.f, c.value) for c in healed] == [("restart", {"nodes": ["n2", "n4"]})]
    assert control.nodes_by_name["n2"].state == "running" and control.nodes_by_name["n2"].starts == 1


def test_kill_active_controller_and_graceful_stop(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.leader = "n3"
    assert nemesis.invoke("kill", {"target": "controller"}).value["nodes"] == ["n3"]
    assert nemesis.invoke("graceful-stop", {"target": "brokers"}).value == {"nodes": ["n4", "n5"],
                                                                            "signal": "SIGTERM"}
    assert control.log == ["kill n3", "stop n4", "stop n5"]
    nemesis.invoke("restart", {})
    assert all(f.state == "running" for f in control.nodes_by_name.values())


def test_pause_records_pids_and_resume(nemesis: Nemesis, control: FakeNodeControl) -> None:
    nemesis.invoke("pause", {"nodes": ["n1"]})
    assert nemesis.status()["process"]["n1"] == {"state": "paused", "host": "n1", "pid": 4001}
    assert nemesis.invoke("pause", {"nodes": ["n1"]}).type == "fail"  # cannot pause a paused node
    assert nemesis.status()["process"]["n1"]["state"] == "paused"  # the failed attempt keeps what is in force
    assert [(c.f, c.value, c.type) for c in nemesis.heal_all()] == [("resume", {"nodes": ["n1"], "signal": "SIGCONT"},
                                                                    "ok")]
    assert control.nodes_by_name["n1"].state == "running"


def test_partial_kill_is_info(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.nodes_by_name["n2"].state = "killed"
    done = nemesis.invoke("kill", {"nodes": ["n1", "n2"]})
    assert done.type == "info" and done.value["nodes"] == ["n1"] and "n2" in (done.error or "")
    assert list(nemesis.status()["process"]) == ["n1"]


def test_clock_bump_writes_the_file_and_reset_neutralises(nemesis: Nemesis, control: FakeNodeControl) -> None:
    done = nemesis.invoke("clock-bump", {"nodes": ["n3"], "delta_ms": 30_000})
    assert done.type == "ok" and done.value["offset_ms"] == {"n3": 30000.0}
    command = cmds(control, "n3")[-1]
    assert "/var/lib/kraftlab/n3/clock.json" in command and "30000.0" in command
    assert nemesis.status()["clock"]["n3"]["offset_ms"] == 30000.0
    nemesis.invoke("clock-bump", {"nodes": ["n3"], "delta_ms": -5_000})
    assert nemesis.status()["clock"]["n3"]["offset_ms"] == 25000.0
    assert [c.f for c in nemesis.heal_all()] == ["clock-reset"]
    assert NEUTRAL in cmds(control, "n3")[-1]
    assert nemesis.status() == {}


def test_clock_bump_beyond_minutes_fails(nemesis: Nemesis) -> None:
    assert nemesis.invoke("clock-bump", {"nodes": ["n1"], "delta_ms": 3_600_000}).type == "fail"


def test_clock_strobe_rewrites_until_reset(nemesis: Nemesis, control: FakeNodeControl) -> None:
    done = nemesis.invoke("clock-strobe", {"nodes": ["n2"], "high_ms": 5000, "period_ms": 20})
    assert done.type == "ok"
    writes = threading.Event()
    control.host("n2").on("clock.json", lambda c: (writes.set(), CommandResult("n2", c, 0, "1\n", ""))[1])
    assert writes.wait(5)
    nemesis.heal_all()
    count = len(cmds(control, "n2"))
    threading.Event().wait(0.1)
    assert len(cmds(control, "n2")) == count  # the strobe thread is gone
    assert NEUTRAL in cmds(control, "n2")[-1]


def test_clock_step_refused_on_a_shared_kernel(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.host("n1").on("boot_id", CommandResult("n1", "", 0, "local-boot\n", ""))
    done = nemesis.invoke("clock-step", {"nodes": ["n1"], "delta_s": 30})
    assert done.type == "fail" and (done.error or "").startswith("unsupported here")
    assert not any("date -s" in c for c in cmds(control, "n1"))


def test_clock_step_on_own_kernel_and_back(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.host("n1").on("boot_id", CommandResult("n1", "", 0, "vm-boot\n", ""))
    control.host("n1").on("date -s", CommandResult("n1", "", 0, "chrony\n", ""))
    done = nemesis.invoke("clock-step", {"nodes": ["n1"], "delta_s": 30})
    assert done.type == "ok" and done.value["stopped"] == {"n1": ["chrony"]}
    assert "time.time() + 30.0" in cmds(control, "n1")[-1]
    nemesis.heal_all()
    assert "time.time() + -30.0" in cmds(control, "n1")[-1] and "systemctl start chrony" in cmds(control, "n1")[-1]


def test_netem_missing_is_reported_unsupported(nemesis: Nemesis, control: FakeNodeControl,
                                               recorded: MemoryRecorder) -> None:
    for node in control.nodes():
        control.host(node).on("netem", CommandResult(node, "", 2, "", "Error: Specified qdisc kind is unknown."))
    done = nemesis.invoke("start-packet", {"kind": "delay", "delay_ms": 50})
    assert done.type == "fail" and (done.error or "").startswith("unsupported here")
    assert "qdisc kind is unknown" in (done.error or "")
    assert recorded[-1]["type"] == "fail"
    assert nemesis.status() == {}


def test_loss_and_bandwidth_and_their_heal(nemesis: Nemesis, control: FakeNodeControl) -> None:
    assert nemesis.invoke("start-packet", {"kind": "loss", "probability": 0.2}).type == "ok"
    assert "--probability 0.200000 -j DROP" in cmds(control, "n1")[-1]
    assert "KRAFTLAB-t1-LOSS" in cmds(control, "n1")[-1]
    done = nemesis.invoke("start-packet", {"kind": "bandwidth", "rate": "1mbit", "nodes": ["n2"]})
    assert done.type == "ok" and "tbf rate 1mbit" in cmds(control, "n2")[-1]
    assert "10.9.0.2" in cmds(control, "n2")[-1]
    nemesis.heal_all()
    assert "iptables -w 10 -F KRAFTLAB-t1-LOSS" in cmds(control, "n1")[-1]
    assert "tc qdisc del" in cmds(control, "n2")[-1]
    assert nemesis.status() == {}


def test_disk_fault_kills_damages_and_restarts(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.host("n2").on("truncate-tail", CommandResult("n2", "", 0, '{"action": "truncate-tail"}\n', ""))
    done = nemesis.invoke("start-disk", {"nodes": ["n2"], "damage": "truncate-tail", "seed": 3, "amount": 50})
    assert done.type == "ok" and done.value["done"] == {"n2": {"action": "truncate-tail"}}
    assert control.nodes_by_name["n2"].state == "killed"
    assert "/var/lib/kraftlab/n2/meta" in cmds(control, "n2")[-1]
    nemesis.invoke("start-disk", {"nodes": ["n4"], "damage": "wipe"})
    assert [c.f for c in nemesis.heal_all()] == ["stop-disk"]
    assert control.nodes_by_name["n4"].formats == 1 and control.nodes_by_name["n2"].formats == 0
    assert control.nodes_by_name["n2"].state == "running" == control.nodes_by_name["n4"].state


def _refuse_first_start(control: FakeNodeControl, monkeypatch: pytest.MonkeyPatch, nodes: set[str]) -> None:
    """Each of `nodes` exits at its next start (as a node refusing its damaged storage does)."""
    real_start, refusing = control.start, set(nodes)

    def start(node: str) -> None:
        real_start(node)
        if node in refusing:
            refusing.discard(node)
            control.nodes_by_name[node].state = "killed"

    monkeypatch.setattr(control, "start", start)


def test_disk_heal_rebuilds_an_observer_that_refuses_its_damaged_log_and_leaves_a_voter_down(
        nemesis: Nemesis, control: FakeNodeControl, monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse_first_start(control, monkeypatch, {"n2", "n4"})  # a voter and a broker-only node: both exit on the damage
    for node in ("n2", "n4"):
        control.host(node).on("flip-bits", CommandResult(node, "", 0, '{"action": "flip-bits"}\n', ""))
        nemesis.invoke("start-disk", {"nodes": [node], "damage": "flip-bits", "seed": 1})
    healed = nemesis.invoke("stop-disk", {"watch_s": 2.0})
    assert healed.type == "ok"
    assert healed.value["rebuilt"] == ["n4"] and healed.value["refused"] == ["n2"]
    assert control.nodes_by_name["n4"].formats == 1 and control.nodes_by_name["n4"].state == "running"
    assert control.nodes_by_name["n2"].formats == 0 and control.nodes_by_name["n2"].state == "killed"
    wiped = {n for n in ("n2", "n4") if any("' wipe-metadata-log " in c for c in cmds(control, n))}  # the action
    assert wiped == {"n4"}  # its metadata log only: its partition logs and their directory id stay
    assert healed.value["outcomes"] == {"n2": {"damage": "flip-bits", "zone": None, "outcome": "refused"},
                                        "n4": {"damage": "flip-bits", "zone": None, "outcome": "rebuilt"}}


def test_a_broker_refusing_its_damaged_meta_properties_is_rebuilt_with_a_new_one(
        nemesis: Nemesis, control: FakeNodeControl, monkeypatch: pytest.MonkeyPatch) -> None:
    """meta.properties was the damage: the rebuild cannot keep it, so the broker gets a new directory id."""
    _refuse_first_start(control, monkeypatch, {"n4"})
    control.host("n4").on("flip-bits", CommandResult("n4", "", 0, '{"action": "flip-bits"}\n', ""))
    nemesis.invoke("start-disk", {"nodes": ["n4"], "damage": "flip-bits", "zone": "meta.properties", "seed": 1})
    healed = nemesis.invoke("stop-disk", {"watch_s": 2.0})
    assert healed.value["rebuilt"] == ["n4"]
    assert any("' wipe-metadata " in c for c in cmds(control, "n4"))
    assert not any("' wipe-metadata-log " in c for c in cmds(control, "n4"))  # the action arg


def test_disk_heal_watches_a_damaged_node_another_package_restarted_during_the_window(
        nemesis: Nemesis, control: FakeNodeControl, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1-hour soak: a process package restarted a damaged broker just before stop-disk; it was
    running then, so stop-disk called it `served` without watching it, and the broker exited on its
    corrupt snapshot moments later, down until the end of the run (Unrecovered)."""
    control.host("n4").on("flip-bits", CommandResult("n4", "", 0, '{"action": "flip-bits"}\n', ""))
    nemesis.invoke("start-disk", {"nodes": ["n4"], "damage": "flip-bits", "seed": 1})
    control.start("n4")  # another package's restart: the node is still starting when the window ends
    real_running = control.running
    checks = {"n4": 0}

    def running(node: str) -> bool:  # it exits on its damage after the heal looked at it once
        if node == "n4" and control.nodes_by_name["n4"].formats == 0:
            checks["n4"] += 1
            if checks["n4"] > 1:
                control.nodes_by_name["n4"].state = "killed"
        return real_running(node)

    monkeypatch.setattr(control, "running", running)
    healed = nemesis.invoke("stop-disk", {"watch_s": 2.0})
    assert healed.value["restarted"] == [] and healed.value["rebuilt"] == ["n4"]
    assert healed.value["outcomes"]["n4"]["outcome"] == "rebuilt"
    assert control.nodes_by_name["n4"].formats == 1 and control.nodes_by_name["n4"].state == "running"


def test_a_wiped_voter_is_never_formatted_anew_and_must_refuse_to_start(
        nemesis: Nemesis, control: FakeNodeControl, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft assumes stable storage: a voter that lost its whole directory must not come back as an
    empty voter (it could vote twice or help elect a leader without committed records)."""
    real_start = control.start

    def start(node: str) -> None:  # the node refuses an unformatted directory: it exits at once
        real_start(node)
        if node == "n2":
            control.nodes_by_name[node].state = "killed"

    monkeypatch.setattr(control, "start", start)
    for node in ("n2", "n5"):
        control.host(node).on("wipe", CommandResult(node, "", 0, '{"action": "wipe", "removed": []}\n', ""))
        assert nemesis.invoke("start-disk", {"nodes": [node], "damage": "wipe"}).type == "ok"
    healed = nemesis.invoke("stop-disk", {"watch_s": 2.0})
    assert healed.value["refused"] == ["n2"] and healed.value["formatted"] == ["n5"]
    assert control.nodes_by_name["n2"].formats == 0 and control.nodes_by_name["n2"].state == "killed"
    assert control.nodes_by_name["n5"].formats == 1 and control.nodes_by_name["n5"].state == "running"
    assert healed.value["outcomes"] == {"n2": {"damage": "wipe", "zone": None, "outcome": "refused"},
                                        "n5": {"damage": "wipe", "zone": None, "outcome": "formatted"}}


def test_state_survives_in_the_ledger(control: FakeNodeControl) -> None:
    ledger = MemoryLedger()
    first = Nemesis("lab9", control, ledger=ledger)
    first.invoke("start-partition", {"topology": "halves"})
    first.invoke("pause", {"nodes": ["n5"]})
    second = Nemesis("lab9", control, ledger=ledger)  # a new process reading the same lab state
    assert second.status() == first.status() and set(second.status()) == {"partition", "process"}
    assert [c.f for c in second.heal_all()] == ["resume", "stop-partition"]
    assert Nemesis("other", control, ledger=ledger).status() == {}


def test_guarded_heals_on_exception(nemesis: Nemesis) -> None:
    with pytest.raises(RuntimeError), guarded(nemesis):
        nemesis.invoke("kill", {"nodes": ["n1"]})
        raise RuntimeError("boom")
    assert nemesis.status() == {}


def test_guarded_heals_on_sigterm(nemesis: Nemesis) -> None:
    with pytest.raises(Terminated), guarded(nemesis):
        nemesis.invoke("start-partition", {"topology": "halves"})
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)
    assert nemesis.status() == {}
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_packet_faults_hit_only_the_named_nodes(nemesis: Nemesis, control: FakeNodeControl) -> None:
    done = nemesis.invoke("start-packet", {"kind": "loss", "probability": 0.5, "nodes": ["n3"]})
    assert done.value["nodes"] == ["n3"]
    assert cmds(control, "n1") == [] and len(cmds(control, "n3")) == 1
    assert nemesis.invoke("start-packet", {"kind": "loss", "probability": 0.1}).value["nodes"] == control.nodes()


def test_clock_rate_anchors_on_the_host_monotonic_clock(nemesis: Nemesis, control: FakeNodeControl) -> None:
    before = time.monotonic_ns()
    done = nemesis.invoke("clock-rate", {"nodes": ["n1"], "rate": 2.0})
    assert done.type == "ok" and before <= done.value["anchor_mono_ns"]["n1"] <= time.monotonic_ns()  # shared kernel
    control.host("n2").on("boot_id", CommandResult("n2", "", 0, "vm-boot\n", ""))
    control.host("n2").on("monotonic_ns", CommandResult("n2", "", 0, "5555\n", ""))
    done = nemesis.invoke("clock-rate", {"nodes": ["n2"], "rate": 0.5})
    assert done.value["anchor_mono_ns"] == {"n2": 5555}
    assert '"rate": 0.5, "anchor_mono_ns": 5555' in cmds(control, "n2")[-1]
    assert nemesis.status()["clock"]["n2"]["anchor_mono_ns"] == 5555


def test_undoing_what_is_already_undone_is_not_an_error(nemesis: Nemesis, control: FakeNodeControl) -> None:
    nemesis.invoke("pause", {"nodes": ["n1"]})
    nemesis.invoke("kill", {"nodes": ["n2"]})
    control.nodes_by_name["n1"].state = "killed"  # the paused node died meanwhile
    control.nodes_by_name["n2"].state = "running"  # someone restarted n2 by hand
    healed = nemesis.heal_all()
    assert [(c.type, c.f, c.value) for c in healed] == [
        ("ok", "resume", {"nodes": [], "signal": "SIGCONT", "already": ["n1"]}),
        ("ok", "restart", {"nodes": [], "already": ["n2"]})]
    assert nemesis.status() == {}


def test_a_pause_ended_by_another_fault_is_not_resumed(nemesis: Nemesis, control: FakeNodeControl) -> None:
    control.host("n4").on("python3 -c", CommandResult("n4", "", 0, '{"action": "wipe"}\n', ""))
    nemesis.invoke("pause", {"nodes": ["n4"]})
    nemesis.invoke("start-disk", {"nodes": ["n4"], "damage": "wipe"})  # kills the paused process
    nemesis.invoke("stop-disk")  # a new process, not paused
    healed = nemesis.heal_all()
    assert [(c.type, c.f, c.value.get("already")) for c in healed] == [("ok", "resume", ["n4"])]
    assert control.nodes_by_name["n4"].state == "running"


def test_strobe_down_to_zero_stays_recorded(nemesis: Nemesis) -> None:
    done = nemesis.invoke("clock-strobe", {"nodes": ["n1"], "low_ms": 3000, "high_ms": 0, "period_ms": 50})
    assert done.type == "ok", done
    assert nemesis.status()["clock"]["n1"]["strobe"] == {"low_ms": 3000.0, "high_ms": 0.0, "period_ms": 50.0}
    assert nemesis.invoke("clock-strobe", {"nodes": ["n1"], "low_ms": 5, "high_ms": 5}).type == "fail"
    assert [c.f for c in nemesis.heal_all()] == ["clock-reset"] and nemesis.status() == {}


def test_guarded_heals_on_sigint(nemesis: Nemesis) -> None:
    # Python raises KeyboardInterrupt on SIGINT unless the process inherited SIGINT ignored (a
    # background job of a non-interactive shell does): give the test the interactive default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), guarded(nemesis):
            nemesis.invoke("pause", {"nodes": ["n2"]})
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(5)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert nemesis.status() == {}
