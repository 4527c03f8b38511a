"""A diskfs mounted in a subprocess for one test or benchmark, unmounted afterwards even when it fails."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlab.control.mounts import diskfs_mounts, unmount
from kraftlab.nemesis.diskfs.control import request


def fuse_available() -> str | None:
    """Why a FUSE mount cannot be made here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "FUSE mounts need root here"
    if importlib.util.find_spec("pyfuse3") is None:
        return "pyfuse3 is not installed (bash scripts/setup.sh)"
    return None



@dataclass
class Mounted:
    backing: Path
    mountpoint: Path
    control: str
    process: subprocess.Popen[bytes]

    def ctl(self, **req: Any) -> dict[str, Any]:
        return request(self.control, req)


@contextmanager
def mounted(tmp_path: Path, seed: int = 0) -> Iterator[Mounted]:
    backing, mountpoint = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mountpoint.mkdir()
    control = str(tmp_path / "control.sock")
    log = open(tmp_path / "diskfs.log", "wb")  # noqa: SIM115 — closed below
    proc = subprocess.Popen([sys.executable, "-m", "kraftlab.nemesis.diskfs", "mount", str(backing), str(mountpoint),
                             "--control", control, "--seed", str(seed)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not (str(mountpoint.resolve()) in diskfs_mounts() and os.path.exists(control)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("diskfs did not mount: " + (tmp_path / "diskfs.log").read_text()[-2000:])
            time.sleep(0.02)
        yield Mounted(backing, mountpoint, control, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        unmount(str(mountpoint))
        log.close()
