"""Fixtures for the node process tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kraftlab.node.config import render_properties


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    def write(props: dict[str, str], name: str = "server.properties") -> Path:
        path = tmp_path / name
        path.write_text(render_properties(props))
        return path

    return write
