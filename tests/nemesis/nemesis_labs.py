"""A namespace lab for the nemesis's real-process tests: its own state directory, a unique name,
and removal afterwards whatever happens."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from kraftlab.control.lab import Lab


@contextlib.contextmanager
def namespace_lab(state_dir: Path, prefix: str, nodes: int) -> Iterator[Lab]:
    """`nodes` namespace hosts named `prefix` + random hex; KRAFTLAB_STATE_DIR points at `state_dir`
    while the lab lives (the fixtures using it are module-scoped, so no monkeypatch)."""
    from kraftlab.control.labs import clean, lab_up

    old = os.environ.get("KRAFTLAB_STATE_DIR")
    os.environ["KRAFTLAB_STATE_DIR"] = str(state_dir)
    name = prefix + secrets.token_hex(4)
    try:
        lab = lab_up(name, "netns", nodes)
        try:
            yield lab
        finally:
            lab.close()
            clean(name)
    finally:
        if old is None:
            os.environ.pop("KRAFTLAB_STATE_DIR", None)
        else:
            os.environ["KRAFTLAB_STATE_DIR"] = old
