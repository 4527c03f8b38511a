"""Fixtures for control tests: a private lab state directory and unique lab names."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "labs"
    monkeypatch.setenv("KRAFTLAB_STATE_DIR", str(d))
    return d


@pytest.fixture
def lab_name() -> str:
    return "t" + secrets.token_hex(4)


@pytest.fixture
def netns_lab(state_dir: Path, lab_name: str) -> Iterator[object]:
    """A five-host namespace lab, removed afterwards whatever happens."""
    from control.labs import clean, lab_up

    lab = lab_up(lab_name, "netns", 5)
    try:
        yield lab
    finally:
        lab.close()
        clean(lab_name)
