"""The membership nemesis against an in-memory dynamic quorum: each change made one at a time as
Kafka's tools make it, its outcome journalled, the windows undone exactly, the final heal back to
the voter set before, retries and ambiguous answers, seeded schedules and their replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlab.nemesis import membership, voter_changes, voter_races
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl, FakeQuorumControl
from kraftlab.nemesis.package import Timing
from kraftlab.nemesis.ports import MemoryLedger, MemoryRecorder, VoterAnswer, VoterRequest
from kraftlab.nemesis.runner import ScheduleRunner
from kraftlab.nemesis.schedule import Schedule, generate, save
from kraftlab.nemesis.session import quorum_for


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(voter_changes, "BACKOFF_S", 0.0)
    monkeypatch.setattr(membership, "VIEW_RETRY_S", 0.0)


def quorum_nemesis(**fake: object) -> tuple[FakeQuorumControl, Nemesis, MemoryRecorder]:
    control = FakeQuorumControl(**fake)  # type: ignore[arg-type]
    recorded = MemoryRecorder()
    return control, Nemesis("t1", control, recorder=recorded, ledger=MemoryLedger(), seed=1), recorded


def test_shrink_removes_the_active_controller_first_and_its_window_end_adds_every_voter_back() -> None:
    control, nemesis, recorded = quorum_nemesis(leader="n2")
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 1, "target": "controller", "seed": 3})
    assert done.type == "ok", done
    assert done.value["nodes"][0] == "n2"  # the active controller first
    assert len(control.voters) == 1 and done.value["voters_after"] == list(control.voters)
    assert [c["change"] for c in done.value["changes"]] == ["remove", "remove"]
    assert all(c["outcome"] == "ok" for c in done.value["changes"])
    assert [r[0] for r in control.requests] == ["remove", "remove"]
    healed = nemesis.invoke("stop-membership", {})
    assert healed.type == "ok", healed
    assert sorted(control.voters) == ["n1", "n2", "n3"]
    assert [c["change"] for c in healed.value["changes"]] == ["add", "add"]
    assert nemesis.status() == {}  # nothing left in force
    assert [op["f"] for op in recorded] == ["start-membership"] * 2 + ["stop-membership"] * 2


def test_the_active_controller_is_never_removed_from_two_voters() -> None:
    _, nemesis, _ = quorum_nemesis(leader="n1", n_voters=2)
    for seed in range(10):
        done = nemesis.invoke("start-membership", {"change": "shrink", "to": 1, "seed": seed})
        assert done.type == "ok" and done.value["nodes"] == ["n2"], done
        assert nemesis.invoke("stop-membership", {}).type == "ok"


def test_grow_adds_spares_up_to_five_and_its_window_end_removes_them() -> None:
    control, nemesis, _ = quorum_nemesis()
    done = nemesis.invoke("start-membership", {"change": "grow", "to": 5, "seed": 1})
    assert done.type == "ok", done
    assert sorted(done.value["nodes"]) == ["n4", "n5"] and sorted(control.voters) == ["n1", "n2", "n3", "n4", "n5"]
    assert nemesis.invoke("start-membership", {"change": "grow", "to": 6}).type == "fail"  # at most 5
    assert nemesis.invoke("stop-membership", {}).type == "ok"
    assert sorted(control.voters) == ["n1", "n2", "n3"]


def test_grow_skips_a_spare_that_is_down() -> None:
    control, nemesis, _ = quorum_nemesis()
    control.kill("n4")
    done = nemesis.invoke("start-membership", {"change": "grow", "to": 5, "seed": 1})
    assert done.type == "ok" and done.value["nodes"] == ["n5"], done


def test_replace_gives_the_voter_a_new_disk_and_its_window_end_adds_the_new_directory() -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    old = control.voters["n1"]
    done = nemesis.invoke("start-membership", {"change": "replace", "target": "controller", "seed": 1})
    assert done.type == "ok", done
    assert done.value["nodes"] == ["n1"] and "n1" not in control.voters
    assert control.disks["n1"] != old and control.running("n1")
    assert control.log[-3:] == ["kill n1", "new-disk n1", "start n1"]
    assert control.requests == [("remove", "n1", old)]
    assert nemesis.invoke("stop-membership", {}).type == "ok"
    assert control.voters["n1"] == control.disks["n1"] != old


def test_a_disk_is_replaced_only_with_three_voters() -> None:
    control, nemesis, _ = quorum_nemesis(n_voters=2)
    done = nemesis.invoke("start-membership", {"change": "replace", "seed": 1})
    assert done.type == "fail" and "3 or more voters" in str(done.error)
    assert control.requests == [] and all(control.running(n) for n in control.nodes())


@pytest.mark.parametrize("change", ["replace", "replace-split"])
def test_a_disk_is_replaced_only_once_every_voter_holds_the_leaders_high_water_mark(change: str) -> None:
    """An operator checks DescribeQuorum first: a replaced disk's entries are gone for good, and in
    a quorum that has not settled they may be the only copy of the leader's epoch."""
    control, nemesis, _ = quorum_nemesis(leader="n1")
    control.behind = {"n2": 2}  # n2 catches up after two looks: the window waits for it, then replaces
    done = nemesis.invoke("start-membership", {"change": change, "nodes": ["n3"], "elect_s": 0, "seed": 1})
    assert done.type == "ok", done
    assert control.log.count("new-disk n3") == 1
    assert nemesis.invoke("stop-membership", {}).type == "ok"

    control.behind = {"n2": 10**6}  # never catches up within the wait: no disk is replaced
    log = list(control.log)
    done = nemesis.invoke("start-membership", {"change": change, "nodes": ["n3"], "wait_s": 0.05, "seed": 1})
    assert done.type == "fail" and "n2 at 99" in str(done.error) and "settled" in str(done.error)
    assert control.log == log and control.voters["n3"] == control.disks["n3"]

    control.behind, control.high_watermark = {}, -1  # a new leader whose epoch has committed nothing
    done = nemesis.invoke("start-membership", {"change": change, "nodes": ["n3"], "wait_s": 0.05, "seed": 1})
    assert done.type == "fail" and "no high-water mark" in str(done.error)
    assert control.log == log


def test_a_voter_left_on_its_old_disk_is_removed_then_added_by_the_heal() -> None:
    control, nemesis, _ = quorum_nemesis()
    control.answers["n3"] = ["INVALID_REQUEST"]  # the removal of the old directory refused for good
    done = nemesis.invoke("start-membership", {"change": "replace", "nodes": ["n3"]})
    assert done.type == "fail" and "INVALID_REQUEST" in str(done.error)
    assert control.voters["n3"] != control.disks["n3"]  # the old (id, directory) still a voter
    healed = nemesis.heal_all()
    assert [h.type for h in healed] == ["ok"], healed
    assert [c["change"] for c in healed[0].value["changes"]] == ["remove", "add"]
    assert control.voters["n3"] == control.disks["n3"]


def test_retried_while_refused_for_now_and_unknown_when_no_controller_answers() -> None:
    control, nemesis, _ = quorum_nemesis()
    control.answers["n4"] = ["REQUEST_TIMED_OUT", "REQUEST_TIMED_OUT"]
    done = nemesis.invoke("add-controller", {"nodes": ["n4"]})
    assert done.type == "ok" and done.value["changes"][0]["attempts"] == 3, done
    control.add_controller = lambda node, timeout_s: VoterAnswer("UNREACHABLE", "no controller took it")  # type: ignore[method-assign]
    done = nemesis.invoke("add-controller", {"nodes": ["n5"], "deadline_s": 0.05})
    assert done.type == "info" and done.value["changes"][0]["outcome"] == "info", done  # may still commit
    assert "n5" not in control.voters
    control.answers["n4"] = ["VOTER_NOT_FOUND"]  # a definite refusal: nothing changed
    done = nemesis.invoke("remove-controller", {"nodes": ["n4"]})
    assert done.type == "fail" and "VOTER_NOT_FOUND" in str(done.error) and "n4" in control.voters


def test_by_hand_changes_are_undone_by_the_heal() -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    assert nemesis.invoke("remove-controller", {"target": "controller"}).type == "ok"
    assert nemesis.invoke("add-controller", {"nodes": ["n4", "n5"]}).type == "ok"
    replaced = nemesis.invoke("replace-disk", {"nodes": ["n2"]})
    assert replaced.type == "ok" and [c["change"] for c in replaced.value["changes"]] == ["remove", "add"]
    assert sorted(control.voters) == ["n2", "n3", "n4", "n5"]
    assert nemesis.status()["membership"]["desired"] == ["n1", "n2", "n3"]
    assert [h.type for h in nemesis.heal_all()] == ["ok"]
    assert sorted(control.voters) == ["n1", "n2", "n3"] and control.voters["n2"] == control.disks["n2"]
    assert nemesis.heal_all() == []  # healed: nothing left to do


def test_a_static_quorum_refuses_membership_changes() -> None:
    nemesis = Nemesis("t1", FakeNodeControl(), recorder=MemoryRecorder(), ledger=MemoryLedger(), seed=1)
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 2})
    assert done.type == "fail" and "static" in str(done.error)
    static = FakeQuorumControl(dynamic=False)
    nemesis = Nemesis("t1", static, recorder=MemoryRecorder(), ledger=MemoryLedger(), seed=1)
    assert nemesis.invoke("add-controller", {"nodes": ["n4"]}).type == "fail"


def _schedule(seed: int, spares: list[str] | None, packages: tuple[str, ...] = ("membership",)) -> Schedule:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    return generate(list(packages), seed=seed, duration=120.0, nodes=nodes, controllers=nodes, brokers=nodes,
                    timing=Timing(), spares=spares)


def test_schedules_draw_membership_windows_only_on_a_dynamic_quorum() -> None:
    changes: set[str] = set()
    for seed in range(20):
        sched = _schedule(seed, ["n4", "n5"], ("membership", "kill"))
        assert sched.quorum == "dynamic" and Schedule.from_json(sched.to_json()).spares == ["n4", "n5"]
        starts = [s for s in sched.steps if s.f == "start-membership"]
        changes |= {s.value["change"] for s in starts}
        for s in starts:
            if s.value["change"] == "shrink":
                assert 1 <= s.value["to"] <= 2
            if s.value["change"] == "grow":
                assert 4 <= s.value["to"] <= 5
        static = _schedule(seed, None, ("membership", "kill"))
        assert not any(s.package == "membership" for s in static.steps) and static.quorum == "static"
    assert changes == {"shrink", "grow", "replace", "concurrent", "replace-split"}


def test_a_generated_schedule_runs_and_heals_back_to_the_first_voters_and_replays_the_same_choices() -> None:
    sched = _schedule(7, ["n4", "n5"])
    sched.steps = [s for s in sched.steps if s.at < 40]
    quick = Schedule.from_json({**sched.to_json(), "duration": 0.0,
                                "steps": [{**s.to_json(), "at": 0.0} for s in sched.steps]})
    chosen = []
    for _ in range(2):
        control, nemesis, recorded = quorum_nemesis(leader="n1")
        ScheduleRunner(nemesis, quick).run()
        assert sorted(control.voters) == ["n1", "n2", "n3"]
        assert all(control.voters[n] == control.disks[n] for n in control.voters)
        done = [op for op in recorded if op["type"] != "invoke"]
        assert done and all(op["type"] == "ok" for op in done), done
        chosen.append([op["value"].get("nodes") for op in done])
    assert chosen[0] == chosen[1]


def test_naming_membership_makes_the_lab_dynamic_and_a_replay_deploys_what_it_replays(tmp_path: Path) -> None:
    assert quorum_for("partition,membership") == "dynamic"
    assert quorum_for("all") == "static" and quorum_for("kill") == "static"  # `all` alone keeps a static lab
    for spares, quorum in ((["n4", "n5"], "dynamic"), (None, "static")):
        path = save(_schedule(1, spares), tmp_path / quorum)
        assert quorum_for("none", path) == quorum


def test_a_window_end_waits_for_a_leader_to_describe_the_quorum() -> None:
    control, nemesis, recorded = quorum_nemesis()
    assert nemesis.invoke("start-membership", {"change": "grow", "to": 4, "seed": 1}).type == "ok"
    control.silent = 5  # an election: no controller answers for a while
    assert nemesis.invoke("stop-membership", {}).type == "ok"
    assert sorted(control.voters) == ["n1", "n2", "n3"]
    control.silent = 10**6
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 2, "deadline_s": 0.05, "wait_s": 0.05})
    assert done.type == "fail" and "no leader" in str(done.error)
    # in a run an op waits briefly (the other lanes' next steps wait behind it); the final heal longer
    control.silent = 0
    assert nemesis.invoke("start-membership", {"change": "grow", "to": 4, "seed": 1}).type == "ok"
    assert nemesis.heal_all()[0].type == "ok"
    assert recorded[-2]["f"] == "stop-membership" and recorded[-2]["value"]["wait_s"] > membership.VIEW_WAIT_S


def test_a_window_starts_from_the_first_voter_set_undoing_what_an_earlier_end_could_not() -> None:
    control, nemesis, _ = quorum_nemesis()
    assert nemesis.invoke("start-membership", {"change": "grow", "to": 5, "seed": 1}).type == "ok"
    control.answers["n4"] = ["INVALID_REQUEST"]  # the window's end cannot remove n4
    assert nemesis.invoke("stop-membership", {}).type == "fail"
    assert sorted(control.voters) == ["n1", "n2", "n3", "n4", "n5"]
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 2, "seed": 1})
    assert done.type == "ok", done
    assert done.value["voters_before"] == ["n1", "n2", "n3"] and len(control.voters) == 2
    assert [(c["change"], c["node"]) for c in done.value["changes"]][:2] == [("remove", "n4"), ("remove", "n5")]


def test_a_shrink_waits_for_the_next_leader_after_removing_the_active_controller() -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    real = control.remove_controller

    def remove(node: str, directory_id: str, timeout_s: float) -> VoterAnswer:
        answer = real(node, directory_id, timeout_s)
        if node == "n1":
            control.silent = 2  # the removed leader resigned: an election follows
        return answer

    control.remove_controller = remove  # type: ignore[method-assign]
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 1, "target": "controller", "seed": 1})
    assert done.type == "ok" and len(done.value["nodes"]) == 2 and len(control.voters) == 1, done
    control.silent = 10**6  # no leader ever after: the shrink is partial (info), not ok
    assert nemesis.invoke("stop-membership", {"wait_s": 0.05}).type == "fail"
    control.silent = 0
    assert nemesis.invoke("stop-membership", {}).type == "ok"
    control.silent = 0

    def remove_then_silence(node: str, directory_id: str, timeout_s: float) -> VoterAnswer:
        control.silent = 10**6
        return real(node, directory_id, timeout_s)

    control.remove_controller = remove_then_silence  # type: ignore[method-assign]
    done = nemesis.invoke("start-membership", {"change": "shrink", "to": 1, "seed": 1, "wait_s": 0.05,
                                               "deadline_s": 0.05})
    assert done.type == "info" and "not yet 1" in str(done.error), done


def test_two_changes_are_sent_together_then_each_carried_on_and_the_window_end_undoes_both() -> None:
    control, nemesis, recorded = quorum_nemesis(leader="n1")
    done = nemesis.invoke("start-membership", {"change": "concurrent", "pair": "add+add", "seed": 1})
    assert done.type == "ok", done
    assert sorted(done.value["nodes"]) == ["n4", "n5"] and sorted(control.voters) == ["n1", "n2", "n3", "n4", "n5"]
    assert sorted((s["change"], s["node"], s["answer"]) for s in done.value["sent_together"]) == [
        ("add", "n4", "NONE"), ("add", "n5", "NONE")]
    assert nemesis.invoke("stop-membership", {}).type == "ok"
    assert sorted(control.voters) == ["n1", "n2", "n3"] and nemesis.status() == {}
    assert [op["f"] for op in recorded] == ["start-membership"] * 2 + ["stop-membership"] * 2


def test_a_change_the_leader_refuses_while_the_other_is_in_flight_is_sent_again() -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    for voter in ("n2", "n3"):  # a correct leader: the other change has not committed yet
        control.answers[voter] = ["REQUEST_TIMED_OUT"]
    done = nemesis.invoke("start-membership", {"change": "concurrent", "pair": "add+remove", "seed": 2})
    assert done.type == "ok", done
    sent = {s["change"]: (s["node"], s["answer"]) for s in done.value["sent_together"]}
    removed, answer = sent["remove"]
    assert answer == "REQUEST_TIMED_OUT" and sent["add"][1] == "NONE"
    attempts = {c["node"]: c["attempts"] for c in done.value["changes"]}
    assert attempts[removed] == 2 and removed not in control.voters
    assert nemesis.invoke("stop-membership", {}).type == "ok" and sorted(control.voters) == ["n1", "n2", "n3"]


def test_changes_sent_together_never_remove_the_active_controller_nor_pass_five_voters() -> None:
    for seed in range(8):
        control, nemesis, _ = quorum_nemesis(leader="n2")
        done = nemesis.invoke("start-membership", {"change": "concurrent", "seed": seed})
        assert done.type == "ok", done
        assert "n2" in control.voters and 1 <= len(control.voters) <= 5
        assert len(done.value["sent_together"]) == 2
    control, nemesis, _ = quorum_nemesis(leader="n1", n_voters=5)
    done = nemesis.invoke("start-membership", {"change": "concurrent", "pair": "add+add", "seed": 1})
    assert done.type == "fail" and "no two voter changes" in str(done.error)


def test_the_requests_sent_together_are_in_flight_at_the_same_time() -> None:
    control = FakeQuorumControl()
    both_in = voter_races.threading.Barrier(2, timeout=5)
    real = control.add_controller

    def add(node: str, timeout_s: float) -> VoterAnswer:
        both_in.wait()  # sent one after the other, the first would wait here alone and break the barrier
        return real(node, timeout_s)

    control.add_controller = add  # type: ignore[method-assign]
    requests = [VoterRequest("add", "n4", control.disks["n4"]), VoterRequest("add", "n5", control.disks["n5"])]
    assert [a.error for a in voter_races.send_in_threads(control, requests, 1.0)] == ["NONE", "NONE"]


def test_a_replaced_disk_is_left_in_the_voters_through_an_election_then_the_window_end_swaps_it() -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    old = dict(control.voters)
    done = nemesis.invoke("start-membership", {"change": "replace-split", "elect_s": 0, "seed": 4})
    assert done.type == "ok", done
    node = done.value["nodes"][0]
    assert node != "n1" and done.value["old_directory_id"] == old[node] != control.disks[node]
    assert control.voters == old  # the old (id, directory id) still votes in the set
    assert control.log[-5:] == [f"kill {node}", f"new-disk {node}", f"start {node}", "pause n1", "resume n1"]
    assert done.value["election"] == {"paused": "n1", "paused_s": 0.0, "leader_after": "n1"}
    assert control.requests == [] and "process" not in nemesis.status()  # nothing paused or killed left
    healed = nemesis.invoke("stop-membership", {})
    assert healed.type == "ok", healed
    assert [(c["change"], c["node"]) for c in healed.value["changes"]] == [("remove", node), ("add", node)]
    assert control.voters[node] == control.disks[node]


def test_carried_on_from_a_first_answer_sent_elsewhere() -> None:
    control = FakeQuorumControl()
    ok = voter_changes.carry_out(control, "add", "n4", control.disks["n4"], deadline_s=1, catch_up_s=1,
                                 first=VoterAnswer("UNREACHABLE", "no answer"))
    assert ok.outcome == "ok" and ok.attempts == 2 and "n4" in control.voters
    refused = voter_changes.carry_out(control, "add", "n5", control.disks["n5"], deadline_s=1, catch_up_s=1,
                                      first=VoterAnswer("INVALID_REQUEST", "no"))
    assert refused.outcome == "fail" and refused.attempts == 1 and "n5" not in control.voters


def test_the_paused_leader_is_in_the_ledger_while_held_and_the_pause_is_sized_by_the_node_timeouts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    control, nemesis, _ = quorum_nemesis(leader="n1")
    seen: list[dict[str, object]] = []
    monkeypatch.setattr(membership, "hold", lambda seconds: seen.append(nemesis.status()))
    assert nemesis.invoke("start-membership", {"change": "replace-split", "elect_s": 4.0, "seed": 1}).type == "ok"
    paused = seen[0]["process"]["n1"]  # type: ignore[index]
    assert paused["state"] == "paused" and paused["pid"] == control.nodes_by_name["n1"].pid  # a killed run resumes it
    assert "process" not in nemesis.status()
    timing = Timing(fetch_s=3.0, election_s=0.5)
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    drawn = [s.value["elect_s"] for seed in range(30)
             for s in generate(["membership"], seed=seed, duration=120.0, nodes=nodes, controllers=nodes,
                               brokers=nodes, timing=timing, spares=["n4", "n5"]).steps
             if s.value.get("change") == "replace-split"]
    assert drawn and set(drawn) == {timing.failover_s}
