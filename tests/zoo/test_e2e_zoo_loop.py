"""The end-to-end zoo's loop (kraftlab.zoo) over an in-memory runner: attempts repeat with new seeds
until a checker fails, the budget bounds them, the bug switch is always paired with test mode, a
missed bug or an invalid control fails the zoo, and `kraftlab zoo` refuses unknown bugs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlab.cli import main
from kraftlab.node.bugs import BY_NAME
from kraftlab.runner import TestOptions as Options
from kraftlab.zoo import PLANS, Attempt, BugResult, failed_checkers, run_zoo, select


class FakeRunner:
    """Writes a results.json per run: invalid (by `checker`) from attempt `found_at` on, for planted bugs."""

    def __init__(self, tmp: Path, found_at: int | None, checker: str = "raft", control_valid: bool = True) -> None:
        self.tmp = tmp
        self.found_at = found_at
        self.checker = checker
        self.control_valid = control_valid
        self.calls: list[Options] = []

    def __call__(self, opts: Options) -> tuple[int, Path]:
        self.calls.append(opts)
        run = self.tmp / f"run{len(self.calls)}"
        run.mkdir()
        bug = opts.config.get("kraftlab.unsafe.bug")
        tries = sum(1 for c in self.calls if c.config.get("kraftlab.unsafe.bug") == bug)
        if bug is None:
            bad = not self.control_valid
        else:
            bad = self.found_at is not None and tries >= self.found_at
        checkers = {"linearizable": {"valid": True}, self.checker: {"valid": not bad}}
        (run / "results.json").write_text(json.dumps({"valid": not bad, "checkers": checkers}))
        return (1 if bad else 0), run


def test_plans_cover_exactly_the_node_bugs() -> None:
    """Every bug an end-to-end run can expose has a plan, and no plan names anything else (the
    membership bugs wait for a membership nemesis: caught in simulation only, no plan yet)."""
    assert set(PLANS) == {b.name for b in BY_NAME.values() if b.end_to_end}
    assert set(BY_NAME) - set(PLANS) == {b.name for b in BY_NAME.values() if not b.end_to_end}


def test_repeats_until_found_and_names_the_checker(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path, found_at=3, checker="fencing")
    report = run_zoo(["no-self-fencing"], Options(), runner, attempt_s=5, budget_s=1e9, seed=10)
    (result,) = report.bugs
    assert result.found and result.found_by == ["fencing"] and len(result.attempts) == 3
    assert [a.seed for a in result.attempts] == [10, 11, 12]
    assert result.run_dir == tmp_path / "run3"
    assert report.control is not None and report.ok
    for opts in runner.calls[:3]:
        assert opts.config["kraftlab.unsafe.test.mode"] == "true"
        assert opts.config["kraftlab.unsafe.bug"] == "no-self-fencing"
        assert (opts.workload, opts.nemesis) == (PLANS["no-self-fencing"].workload, PLANS["no-self-fencing"].nemesis)
    assert "kraftlab.unsafe.bug" not in runner.calls[-1].config  # the control runs the correct node


def test_a_missed_bug_fails_the_zoo_within_its_budget(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path, found_at=None)
    report = run_zoo(["ack-before-fsync"], Options(), runner, attempt_s=5, budget_s=1e-9, seed=1)
    assert not report.ok and not report.bugs[0].found and len(report.bugs[0].attempts) == 1
    assert "NO" in report.table()
    report.bugs[0].attempts[0].code = 255
    assert "NO (1 crashed)" in report.table()


def test_an_invalid_control_fails_the_zoo(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path, found_at=1, control_valid=False)
    report = run_zoo(["resume-old-epoch"], Options(), runner, attempt_s=5, budget_s=100, seed=1)
    assert report.bugs[0].found and not report.ok


def test_failed_checkers_reads_false_verdicts_only(tmp_path: Path) -> None:
    assert failed_checkers(tmp_path) == []
    (tmp_path / "results.json").write_text(json.dumps({"valid": "unknown", "checkers": {"raft": {"valid": "unknown"}}}))
    assert failed_checkers(tmp_path) == []
    (tmp_path / "results.json").write_text(json.dumps({"valid": False, "checkers": {"raft": {"valid": False},
                                                                                    "fencing": {"valid": True}}}))
    assert failed_checkers(tmp_path) == ["raft"]


def test_shards_rotate_through_every_bug() -> None:
    shards = [select([], (k, 4)) for k in range(4)]
    assert sorted(b for s in shards for b in s) == sorted(PLANS)
    with pytest.raises(ValueError):
        select(["no-such-bug"], None)


def test_cli_refuses_unknown_bugs() -> None:
    assert main(["zoo", "no-such-bug"]) == 254


def test_time_to_detection_counts_earlier_attempts_whole_and_the_finding_one_to_its_verdict(tmp_path: Path) -> None:
    result = BugResult("ack-before-fsync", [Attempt(1, 0, tmp_path, 100.0, []),
                                            Attempt(2, 1, tmp_path, 80.0, ["raft"], verdict_s=50.0)])
    assert result.time_to_detection == 150.0
    assert BugResult("ack-before-fsync", [Attempt(1, 0, tmp_path, 100.0, [])]).time_to_detection is None
    runner = FakeRunner(tmp_path, found_at=1)
    (found,) = run_zoo(["ack-before-fsync"], Options(), runner, attempt_s=5, budget_s=100, seed=1,
                       control=False).bugs
    a = found.attempts[0]
    assert a.verdict_s is not None and 0 <= a.verdict_s <= a.seconds


def test_attempts_last_the_plans_time_unless_told(tmp_path: Path) -> None:
    runner = FakeRunner(tmp_path, found_at=1)
    run_zoo(["quorum-state-no-fsync", "no-self-fencing"], Options(), runner, attempt_s=None, budget_s=100, seed=1)
    assert [c.time_limit for c in runner.calls] == [PLANS["quorum-state-no-fsync"].attempt_s,
                                                    PLANS["no-self-fencing"].attempt_s, 60.0]
    run_zoo(["no-self-fencing"], Options(), runner, attempt_s=7, budget_s=100, seed=1, control=False)
    assert runner.calls[-1].time_limit == 7
    assert main(["zoo", "no-self-fencing", "--attempt-time", "0"]) == 254


def test_cli_passes_the_topology_to_every_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    import kraftlab.commands.zoo as command

    seen: list[Options] = []

    def fake_run_zoo(bugs: list[str], base: Options, *args: object, **kwargs: object) -> object:
        seen.append(base)
        raise command.BadArguments("stop here")

    monkeypatch.setattr(command, "run_zoo", fake_run_zoo)
    assert main(["zoo", "vote-without-log-check", "--topology", "combined", "--no-control"]) == 254
    assert seen[0].topology == "combined"
    assert main(["zoo", "vote-without-log-check"]) == 254 and seen[1].topology == Options().topology
