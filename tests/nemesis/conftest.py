"""Fixtures for the nemesis tests: a fake five-node lab and a recording nemesis on it."""

from __future__ import annotations

import pytest

from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.fakes import FakeNodeControl
from kraftlab.nemesis.ports import MemoryLedger, MemoryRecorder


@pytest.fixture
def control() -> FakeNodeControl:
    return FakeNodeControl()


@pytest.fixture
def recorded() -> MemoryRecorder:
    return MemoryRecorder()


@pytest.fixture
def ledger() -> MemoryLedger:
    return MemoryLedger()


@pytest.fixture
def nemesis(control: FakeNodeControl, recorded: MemoryRecorder, ledger: MemoryLedger) -> Nemesis:
    n = Nemesis("t1", control, recorder=recorded, ledger=ledger, seed=1, local_boot_id="local-boot")
    yield n
    n.close()
