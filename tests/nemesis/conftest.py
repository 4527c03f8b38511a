"""Fixtures for the nemesis tests: a fake five-node lab and a recording nemesis on it."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.ports import MemoryLedger


class Recorded(list[dict[str, Any]]):
    def __call__(self, type_: str, f: str, value: Any = None, *, node: str | None = None,
                 error: str | None = None) -> None:
        self.append({"type": type_, "f": f, "value": value, "node": node, "error": error})

    def completions(self) -> list[dict[str, Any]]:
        return [op for op in self if op["type"] != "invoke"]


@pytest.fixture
def control() -> FakeNodeControl:
    return FakeNodeControl()


@pytest.fixture
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture
def ledger() -> MemoryLedger:
    return MemoryLedger()


@pytest.fixture
def nemesis(control: FakeNodeControl, recorded: Recorded, ledger: MemoryLedger) -> Nemesis:
    n = Nemesis("t1", control, recorder=recorded, ledger=ledger, seed=1, local_boot_id="local-boot")
    yield n
    n.close()
