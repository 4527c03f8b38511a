"""The test tree itself: every test module has a unique file name (pytest imports test modules
by basename from their folders, so two `test_cli.py` files break collection of the whole suite)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_module_names_are_unique() -> None:
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
