"""A kill is a power loss where the node's control can lose un-fsynced writes: the kill's result
says what was lost; elsewhere a kill stays a plain SIGKILL."""

from __future__ import annotations

import random
from typing import Any

from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.ports import MemoryLedger
from kraftlab.nemesis.process import ProcessFault
from kraftlab.nemesis.state import FaultState


class DiskControl(FakeNodeControl):
    def __init__(self) -> None:
        super().__init__()
        self.crashed: list[str] = []

    def power_off(self, node: str) -> dict[str, Any] | None:
        self.kill(node)
        self.crashed.append(node)
        return {"ok": True, "bytes_dropped": 17, "files_rolled_back": ["__cluster_metadata-0/0.log"],
                "entries_removed": [], "entries_restored": []}


def _fault(control: FakeNodeControl) -> ProcessFault:
    return ProcessFault(FaultContext("lab", control, FaultState(MemoryLedger(), "lab")), random.Random(1))


def test_a_kill_loses_the_unfsynced_writes_and_says_so() -> None:
    control = DiskControl()
    done = _fault(control).kill({"nodes": ["n1", "n2"]})
    assert sorted(control.crashed) == ["n1", "n2"]
    assert done["lost_unfsynced"]["n1"] == {"bytes_dropped": 17, "files_rolled_back": ["__cluster_metadata-0/0.log"],
                                            "entries_removed": [], "entries_restored": []}


def test_a_graceful_stop_loses_nothing() -> None:
    control = DiskControl()
    done = _fault(control).graceful_stop({"nodes": ["n1"]})
    assert control.crashed == [] and "lost_unfsynced" not in done


def test_without_the_filesystem_a_kill_is_a_plain_sigkill() -> None:
    done = _fault(FakeNodeControl()).kill({"nodes": ["n3"]})
    assert done == {"nodes": ["n3"], "signal": "SIGKILL"}
