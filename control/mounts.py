"""The disk-fault filesystem's mounts as this machine's kernel sees them: which are mounted where,
and how to unmount one (lazily, so that a mount whose process was killed — "Transport endpoint is
not connected" — goes too). Clean-up uses it to leave no mount behind a killed run."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
from pathlib import Path

FSNAME = "kraftlab-diskfs"
FUSE_TYPE = "fuse.kraftlab"


def diskfs_mounts(under: str | Path | None = None) -> list[str]:
    """Mount points of kraftlab diskfs filesystems (alive or dead), optionally only those under a directory."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    found = [f[1].replace("\\040", " ") for f in (line.split() for line in lines)
             if len(f) > 2 and f[0] == FSNAME and f[2] == FUSE_TYPE]
    if under is None:
        return found
    root = str(Path(under).resolve())
    return [m for m in found if m == root or m.startswith(root + "/")]


def unmount_command(mountpoint: str) -> str:
    """A shell command that lazily unmounts `mountpoint` (fusermount3 where installed, else umount)."""
    q = shlex.quote(mountpoint)
    return f"fusermount3 -u -z {q} 2>/dev/null || fusermount -u -z {q} 2>/dev/null || umount -l {q}"


def unmount(mountpoint: str) -> bool:
    """Lazily unmount the diskfs at `mountpoint` on this machine; False when none was mounted there."""
    target = str(Path(mountpoint).resolve())
    if target not in diskfs_mounts():
        return False
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    cmd = [tool, "-u", "-z", target] if tool else ["umount", "-l", target]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)
    return True


def unmount_under(root: str | Path, wait_s: float = 5.0) -> list[str]:
    """Unmount every diskfs under `root` (their processes exit once unmounted); the mount points."""
    gone = diskfs_mounts(root)
    for m in gone:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            unmount(m)
    deadline = time.monotonic() + wait_s
    while diskfs_mounts(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone
