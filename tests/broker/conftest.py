"""Fixtures for broker tests (the in-process cluster lives in broker_harness.py)."""

from __future__ import annotations

import pytest
from broker_harness import MiniCluster


@pytest.fixture
def mc() -> MiniCluster:
    return MiniCluster()
