"""The zoo's targeted schedules: every step is an operation the nemesis applies (on an in-memory
lab), each recipe keeps its shape (who is isolated, killed, restarted, and when), schedules are a
pure function of the seed, and a targeted plan's attempt replays its recipe's schedule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlab.nemesis import membership
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl, FakeQuorumControl
from kraftlab.nemesis.ports import MemoryLedger
from kraftlab.nemesis.schedule import load
from kraftlab.runner import TestOptions as Options
from kraftlab.zoo import PLANS, Plan, control_run, hunt, targeted_plans
from kraftlab.zoo.recipes import RECIPES, roles, targeted


class FailoverControl(FakeNodeControl):
    """A fake lab whose active controller fails over as a real one does: `leader` while it runs,
    else the first running controller (a recipe's "kill the active controller" never hits a dead node)."""

    def active_controller(self) -> str | None:
        return next((c for c in [self.leader, *self.controllers()] if c is not None and self.running(c)), None)


DRAWS_NOTHING = {"leader-alone-with-brokers"}  # its grudge names every controller: nothing to draw


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(membership, "hold", lambda seconds: None)  # a paused leader resumes at once


def _apply(recipe: str, seed: int) -> tuple[list[str], FakeNodeControl]:
    """Fire the whole schedule at a fake five-node lab (3 combined controllers; the 3 voters of a
    dynamic quorum and 2 spares when the schedule changes voters); the ops' outcomes."""
    schedule = targeted(recipe, seed=seed, duration=60, nodes=5)
    control = (FakeQuorumControl(leader="n2") if schedule.quorum == "dynamic"
               else FailoverControl(combined=True, leader="n2"))
    nemesis = Nemesis("z", control, ledger=MemoryLedger(), seed=seed, local_boot_id="local")
    outcomes = []
    try:
        for step in schedule.steps:
            done = nemesis.invoke(step.f, step.value)
            outcomes.append(f"{step.f}:{done.type}:{done.error or ''}")
        nemesis.heal_all()
    finally:
        nemesis.close()
    return outcomes, control


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_step_applies_and_the_lab_ends_whole(recipe: str) -> None:
    outcomes, control = _apply(recipe, seed=7)
    assert outcomes and all(":ok:" in o for o in outcomes), outcomes
    assert all(control.running(n) for n in control.nodes())


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_schedules_are_a_function_of_the_seed_and_stay_within_the_attempt(recipe: str) -> None:
    a, b = targeted(recipe, seed=3, duration=40, nodes=5), targeted(recipe, seed=3, duration=40, nodes=5)
    assert a.to_json() == b.to_json()
    assert all(0 < s.at < 40 for s in a.steps)
    assert [s.at for s in a.steps] == sorted(s.at for s in a.steps)
    named = [s for r in range(20) for s in targeted(recipe, seed=r, duration=40, nodes=5).steps
             if "nodes" in s.value or "grudge" in s.value]
    if named and recipe not in DRAWS_NOTHING:  # named nodes are drawn from the seed; others resolved as steps fire
        assert len({json.dumps(s.value, sort_keys=True) for s in named}) > 1


def test_stale_epoch_isolates_a_voter_while_the_others_restart_then_lets_it_be_told_but_not_fetch() -> None:
    """Whoever wins the election, `a` can only be connected to: every other voter refuses the
    connections `a` opens (it hears the new epoch but fetches nothing of it), then `a` is killed."""
    for seed in range(12):
        steps = targeted("stale-epoch", seed=seed, duration=14, nodes=5).steps
        (a,) = steps[0].value["nodes"]
        others = steps[1].value["nodes"]
        assert a not in others and sorted([a, *others]) == roles(5).controllers
        assert [s.f for s in steps] == ["start-partition", "kill", "restart", "start-partition", "kill", "restart",
                                        "stop-partition"]
        assert steps[3].value == {"grudge": {v: [a] for v in others}, "drop": "new-connections"}
        assert steps[4].value == {"nodes": [a]}


def test_leader_alone_with_brokers_cuts_the_controllers_apart_then_isolates_the_leader() -> None:
    attempt = PLANS["respond-before-commit"].attempt_s
    steps = targeted("leader-alone-with-brokers", seed=1, duration=attempt, nodes=5).steps
    assert [s.f for s in steps] == ["start-partition", "start-partition", "stop-partition"] * 3
    controllers = roles(5).controllers
    cut = {c: sorted(o for o in controllers if o != c) for c in controllers}
    assert all(s.value == {"grudge": cut} for s in steps[::3])  # brokers reach every controller
    assert all(s.value == {"topology": "isolate-controller"} for s in steps[1::3])
    # the leader is isolated before check-quorum (3 s) makes it resign, after the others' fetch timeout (2 s)
    assert all(2.0 < iso.at - cut_.at < 3.0 for cut_, iso in zip(steps[::3], steps[1::3], strict=True))
    assert steps[-1].at < attempt


def test_the_lagging_voter_is_never_the_controller_asked_who_leads() -> None:
    first = roles(5).controllers[0]
    for seed in range(30):
        steps = targeted("lagging-voter-meets-new-leader", seed=seed, duration=13, nodes=5).steps
        assert steps[0].value["nodes"] != [first]
        assert steps[1].value == {"topology": "isolate-controller"}


@pytest.mark.parametrize(("topology", "voters"), [("combined+brokers", 3), ("combined", 5)])
def test_the_lagging_voter_is_the_only_one_that_can_win(topology: str, voters: int) -> None:
    """Whoever leads when the cycle starts: once `a` restarts, the running up-to-date voters are one
    vote short of a majority and cannot open connections to `a` (only `a` can ask), the cut heals
    after `a` has had its fetch timeout and more, and every node runs again at the end."""
    majority = voters // 2 + 1
    for seed in range(12):
        steps = targeted("lagging-voter-first-candidate", seed=seed, duration=17, nodes=5, topology=topology).steps
        assert [s.f for s in steps] == ["kill", "start-partition", "kill", "restart", "stop-partition", "restart"]
        (a,) = steps[3].value["nodes"]
        assert a in steps[0].value["nodes"] and len(steps[0].value["nodes"]) == voters - majority
        assert steps[1].value == {"grudge": {a: sorted(c for c in roles(5, topology).controllers if c != a)},
                                  "drop": "new-connections"}
        assert steps[2].value == {"target": "controller"}
        assert steps[4].at - steps[3].at >= 7.0  # a (re)start, a fetch timeout (2 s) and the vote, under load
        for leader in (c for c in roles(5, topology).controllers if c not in steps[0].value["nodes"]):
            control = FailoverControl(size=5, n_controllers=voters, combined=True, leader=leader)
            nemesis = Nemesis("z", control, ledger=MemoryLedger(), seed=seed, local_boot_id="local")
            try:
                for step in steps[:4]:
                    assert nemesis.invoke(step.f, step.value).type == "ok", step
                up_to_date = [c for c in control.controllers() if c != a and control.running(c)]
                assert control.running(a) and not control.running(leader)
                assert len(up_to_date) == majority - 1, (leader, up_to_date)
                assert set(up_to_date) <= set(nemesis.status()["partition"]["grudge"][a])
                for step in steps[4:]:
                    assert nemesis.invoke(step.f, step.value).type == "ok", step
                assert all(control.running(n) for n in control.nodes()) and not nemesis.status()
            finally:
                nemesis.close()


def test_a_targeted_plan_replays_its_recipe_and_cleans_up(tmp_path: Path) -> None:
    seen: list[Options] = []
    schedules = []

    def runner(opts: Options) -> tuple[int, Path]:
        seen.append(opts)
        assert opts.replay_nemesis is not None
        schedules.append(load(opts.replay_nemesis).to_json())
        run = tmp_path / f"run{len(seen)}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps({"valid": False, "checkers": {"raft": {"valid": False}}}))
        return 1, run

    bug = next(b for b, p in PLANS.items() if p.recipe == "stale-epoch")
    result = hunt(bug, Options(), runner, attempt_s=30, budget_s=100, seed=4)
    assert len(result.attempts) == 1 and result.found_by == ["raft"]
    assert schedules[0] == targeted("stale-epoch", seed=4, duration=30, nodes=5).to_json()
    assert not Path(seen[0].replay_nemesis or "").exists()  # the temporary schedule is gone
    assert seen[0].diskfs  # a power loss at each kill, through the filesystem
    assert not any("lose" in k for k in seen[0].config)  # no node switch loses writes


def test_random_plans_replay_nothing_and_unknown_recipes_are_refused(tmp_path: Path) -> None:
    def runner(opts: Options) -> tuple[int, Path]:
        assert opts.replay_nemesis is None
        return 0, tmp_path

    hunt("accept-stale-broker-epoch", Options(), runner, attempt_s=5, budget_s=1e-9, seed=1)
    with pytest.raises(ValueError):
        Plan("mixed", "kill", recipe="no-such-recipe")


def test_a_recipe_control_replays_the_recipe_on_the_correct_node(tmp_path: Path) -> None:
    seen: list[Options] = []

    def runner(opts: Options) -> tuple[int, Path]:
        seen.append(opts)
        assert opts.replay_nemesis is not None and load(opts.replay_nemesis).steps
        return 0, tmp_path

    plans = targeted_plans()
    assert set(plans) == {p.recipe for p in PLANS.values() if p.recipe}
    a = control_run(Options(), runner, attempt_s=None, seed=3, plan=plans["stale-epoch"])
    assert a.code == 0 and "kraftlab.unsafe.bug" not in seen[0].config
    assert seen[0].diskfs  # the correct node survives power loss
    assert "kraftlab.unsafe.test.mode" not in seen[0].config  # nothing unsafe asked of the node
    assert seen[0].time_limit == plans["stale-epoch"].attempt_s


def test_every_bug_of_the_node_registry_has_a_plan_and_every_plan_a_bug() -> None:
    from kraftlab.zoo import missing_plans

    assert missing_plans() == ([], [])


def test_remove_active_controller_removes_the_leader_and_adds_it_back_on_a_dynamic_quorum() -> None:
    schedule = targeted("remove-active-controller", seed=5, duration=25, nodes=5)
    assert schedule.quorum == "dynamic" and "membership" in schedule.packages
    assert [(s.at, s.f) for s in schedule.steps] == [(2.0, "start-membership"), (10.0, "stop-membership"),
                                                     (14.0, "start-membership"), (22.0, "stop-membership")]
    control = FakeQuorumControl(leader="n2")
    nemesis = Nemesis("z", control, ledger=MemoryLedger(), seed=5, local_boot_id="local")
    try:
        first = nemesis.invoke(schedule.steps[0].f, schedule.steps[0].value)
        assert first.type == "ok" and first.value["changes"][0]["node"] == "n2"  # the active controller first
        assert "n2" not in control.voters
        nemesis.invoke(schedule.steps[1].f, schedule.steps[1].value)
        assert sorted(control.voters) == ["n1", "n2", "n3"]
    finally:
        nemesis.close()


def test_voter_changes_together_sends_two_changes_at_once_each_cycle_and_undoes_them() -> None:
    schedule = targeted("voter-changes-together", seed=2, duration=25, nodes=5)
    assert schedule.quorum == "dynamic" and schedule.packages == ["kill", "membership", "partition", "pause"]
    assert [(s.at, s.f) for s in schedule.steps] == [(2.0, "start-membership"), (8.0, "stop-membership"),
                                                     (12.0, "start-membership"), (18.0, "stop-membership"),
                                                     (22.0, "start-membership")]
    assert all(s.value["change"] == "concurrent" for s in schedule.steps if s.f == "start-membership")
    control = FakeQuorumControl(leader="n2")
    nemesis = Nemesis("z", control, ledger=MemoryLedger(), seed=2, local_boot_id="local")
    try:
        for step in schedule.steps[:2]:
            done = nemesis.invoke(step.f, step.value)
            assert done.type == "ok", done
            if step.f == "start-membership":
                assert len(done.value["sent_together"]) == 2 and "n2" in control.voters
        assert sorted(control.voters) == ["n1", "n2", "n3"]
    finally:
        nemesis.close()


def test_replace_disk_then_elect_pauses_the_leader_with_the_old_voter_still_in_the_set() -> None:
    schedule = targeted("replace-disk-then-elect", seed=4, duration=30, nodes=5)
    assert schedule.quorum == "dynamic"
    assert [(s.at, s.f) for s in schedule.steps] == [(2.0, "start-membership"), (14.0, "stop-membership"),
                                                     (18.0, "start-membership")]
    control = FakeQuorumControl(leader="n2")
    nemesis = Nemesis("z", control, ledger=MemoryLedger(), seed=4, local_boot_id="local")
    try:
        before = dict(control.voters)
        done = nemesis.invoke(schedule.steps[0].f, schedule.steps[0].value)
        assert done.type == "ok", done
        replaced = done.value["nodes"][0]
        assert replaced != "n2" and control.voters == before != {**before, replaced: control.disks[replaced]}
        assert done.value["election"]["paused"] == "n2" and done.value["election"]["paused_s"] == 5.5
        assert nemesis.invoke(schedule.steps[1].f, schedule.steps[1].value).type == "ok"
        assert control.voters[replaced] == control.disks[replaced]
    finally:
        nemesis.close()
