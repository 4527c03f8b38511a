"""Error and delay rules, and the control channel's requests (no FUSE)."""

from __future__ import annotations

import errno
import re
import time
from typing import Any

import pytest

from kraftlab.nemesis.diskfs.control import handle
from kraftlab.nemesis.diskfs.durability import CrashReport
from kraftlab.nemesis.diskfs.faults import FaultTable, Rule, RuleError


def test_a_rule_fails_only_its_operations_on_its_files() -> None:
    table = FaultTable(seed=1)
    table.add(Rule.parse({"ops": "write,fsync", "glob": "*.log", "errno": "ENOSPC"}))
    assert table.error("write", "__cluster_metadata-0/00000000000000000000.log") == errno.ENOSPC
    assert table.error("fsync", "__cluster_metadata-0/00000000000000000000.log") == errno.ENOSPC
    assert table.error("read", "__cluster_metadata-0/00000000000000000000.log") is None
    assert table.error("write", "__cluster_metadata-0/quorum-state") is None
    assert table.injected == 2
    table.clear()
    assert table.error("write", "x.log") is None


def test_a_probability_fails_a_seeded_share() -> None:
    def hits(seed: int) -> list[bool]:
        table = FaultTable(seed)
        table.add(Rule.parse({"errno": "EIO", "probability": 0.3}))
        return [table.error("read", "f") is not None for _ in range(1000)]

    assert hits(5) == hits(5)
    assert 200 < sum(hits(5)) < 400


def test_delays_add_up_on_fsyncs_only() -> None:
    table = FaultTable()
    table.add(Rule.parse({"ops": ["fsync"], "glob": "*", "delay_ms": 200}))
    table.add(Rule.parse({"ops": ["fsync"], "glob": "*quorum-state", "delay_ms": 50}))
    assert table.delay_s("fsync", "p/quorum-state") == pytest.approx(0.25)
    assert table.delay_s("write", "p/quorum-state") == 0


@pytest.mark.parametrize("raw, says", [
    ({"ops": ["chmod"], "errno": "EIO"}, "ops"),
    ({"errno": "EPERM"}, "errno"),
    ({}, "errno (EIO, ENOSPC) or a positive delay_ms"),
    ({"errno": "EIO", "probability": 0}, "probability"),
])
def test_a_bad_rule_is_refused_with_the_reason(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(RuleError, match=re.escape(says)):
        Rule.parse(raw)


class FakeFs:
    def __init__(self) -> None:
        self.faults = FaultTable()
        self.crashed = 0

    def crash(self) -> CrashReport:
        self.crashed += 1
        return CrashReport(["a"], 3, [], [])

    def status(self) -> dict[str, Any]:
        return {"crashes": self.crashed}

    def fail(self, rule: Rule) -> None:
        self.faults.add(rule)


def test_the_control_requests() -> None:
    fs, stopped = FakeFs(), []
    assert handle(fs, {"cmd": "crash"}, lambda: None) == {"ok": True, "files_rolled_back": ["a"],
                                                          "bytes_dropped": 3, "entries_removed": [],
                                                          "entries_restored": []}
    assert handle(fs, {"cmd": "fail", "glob": "*.log", "errno": "EIO"}, lambda: None)["ok"]
    assert handle(fs, {"cmd": "delay", "ms": 100}, lambda: None)["rule"]["delay_ms"] == 100
    assert handle(fs, {"cmd": "status"}, lambda: None) == {"ok": True, "crashes": 1}
    assert handle(fs, {"cmd": "clear"}, lambda: None) == {"ok": True, "cleared": 2}
    assert handle(fs, {"cmd": "unmount"}, lambda: stopped.append(1)) == {"ok": True} and stopped
    bad = handle(fs, {"cmd": "fail", "errno": "EWHAT"}, lambda: None)
    assert not bad["ok"] and "errno" in bad["error"]
    assert "known: crash" in handle(fs, {"cmd": "explode"}, lambda: None)["error"]


def test_clearing_one_kind_of_rule_keeps_the_other() -> None:
    fs = FakeFs()
    handle(fs, {"cmd": "fail", "glob": "*.log", "errno": "ENOSPC"}, lambda: None)
    handle(fs, {"cmd": "delay", "ms": 300}, lambda: None)
    assert handle(fs, {"cmd": "clear", "rules": "delay"}, lambda: None) == {"ok": True, "cleared": 1}
    assert fs.faults.delay_s("fsync", "a.log") == 0 and fs.faults.error("write", "a.log") == errno.ENOSPC
    assert handle(fs, {"cmd": "clear", "rules": "fail"}, lambda: None) == {"ok": True, "cleared": 1}
    assert fs.faults.rules == []
    bad = handle(fs, {"cmd": "clear", "rules": "all"}, lambda: None)
    assert not bad["ok"] and "delay or fail" in bad["error"]


def test_injected_errors_are_handed_over_once_with_the_host_clock() -> None:
    fs = FakeFs()
    handle(fs, {"cmd": "fail", "ops": ["write"], "glob": "*.log", "errno": "EIO"}, lambda: None)
    before = time.monotonic_ns()
    assert fs.faults.error("write", "p/0.log") == errno.EIO and fs.faults.error("read", "p/0.log") is None
    answer = handle(fs, {"cmd": "injected"}, lambda: None)
    assert answer["ok"] and [{k: v for k, v in e.items() if k != "rmono"} for e in answer["errors"]] == [
        {"op": "write", "path": "p/0.log", "errno": "EIO"}]
    assert before <= answer["errors"][0]["rmono"] <= time.monotonic_ns()
    assert handle(fs, {"cmd": "injected"}, lambda: None) == {"ok": True, "errors": []}
