"""Packaging the project for hosts that do not share this machine's virtualenv: a wheelhouse with
the project's wheel and the node's own dependencies, so hosts install offline (`--no-index`)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_REQUIREMENTS = ("kio==0.6.5", "crc32c>=2.4")


class WheelError(Exception):
    """Building the wheelhouse failed; says which pip command and why."""


def build_wheelhouse(dest: Path | None = None) -> Path:
    dest = dest or Path(tempfile.mkdtemp(prefix="kraftlab-wheels-"))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(dest)]
    for args in ([*pip, "--no-deps", str(ROOT)], [*pip, *NODE_REQUIREMENTS]):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            raise WheelError(f"building wheels failed: {' '.join(args)}: {r.stderr.strip()[-1000:]}")
    return dest
