"""Packaging the project for hosts that do not share this machine's virtualenv: a wheelhouse with
the project's wheel, the node's own dependencies and pip's wheel, so hosts install offline
(`--no-index`) into a venv made `--without-pip` (twice as fast as one with ensurepip)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_REQUIREMENTS = ("kio==0.6.5", "crc32c>=2.4")
FUSE_REQUIREMENTS = ("pyfuse3>=3.3",)  # the disk-fault filesystem (kraftlab.nemesis.diskfs), where it is served
INSTALLER = "pip"  # its wheel runs as `python pip-*.whl/pip`: a venv needs no ensurepip


PACKAGES = ("node", "control", "nemesis", "workloads", "checker", "spark_analysis", "kraftlab")
DATA_SUFFIXES = (".py", ".html", ".css", ".j2", ".txt")


def source_digest() -> str:
    """A digest of what the project's wheel would contain (package sources and pyproject.toml):
    cheap to compute, so a cached build can be reused without building the wheel first."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*")):
            if path.suffix in DATA_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    digest.update(",".join(NODE_REQUIREMENTS).encode())
    return digest.hexdigest()[:12]


class WheelError(Exception):
    """Building the wheelhouse failed; says which pip command and why."""


def build_wheelhouse(dest: Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """The project's wheel, the node's dependencies, pip's wheel and the `extra` requirements (with
    their dependencies, e.g. FUSE_REQUIREMENTS), built for this machine's Python."""
    dest = dest or Path(tempfile.mkdtemp(prefix="kraftlab-wheels-"))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(dest)]
    for args in ([*pip, "--no-deps", str(ROOT)], [*pip, *NODE_REQUIREMENTS, *extra, INSTALLER]):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            raise WheelError(f"building wheels failed: {' '.join(args)}: {r.stderr.strip()[-1000:]}")
    return dest


def install_script(wheelhouse: str, venv: str) -> str:
    """Shell commands that (re)install the wheelhouse's wheels into `venv` offline, on the host."""
    return ("command -v python3 >/dev/null || { echo 'python3 is missing: apt-get install -y python3' >&2; exit 1; }; "
            f"[ -x {venv}/bin/python ] || python3 -m venv --without-pip {venv} || "
            f"{{ echo 'cannot create a venv: apt-get install -y python3-venv' >&2; exit 1; }}; "
            f"pip=$(ls {wheelhouse}/{INSTALLER}-*.whl | head -n1); "
            f"{venv}/bin/python $pip/pip install -q --no-index --no-deps --no-compile --force-reinstall "
            f"$(ls {wheelhouse}/*.whl | grep -v '/{INSTALLER}-')")
