"""Fixtures for controller tests (the harness lives in controller_harness.py)."""

from __future__ import annotations

import pytest
from controller_harness import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture
def h3() -> Harness:
    return Harness(controllers=3)
