"""What a Docker lab needs to serve the disk-fault filesystem (kraftlab.nemesis.diskfs, `--diskfs`).

The node is its container's PID 1 (control/containers.py): when it dies, the kernel kills every other
process of the container. A filesystem daemon there would die with the node at each kill, before it
could drop what was never fsynced (so a power loss would lose nothing) and with its error and delay
rules. So the daemon runs in the node's holder container (`…-nI-net`, the long-lived `sleep` that
keeps the node's network namespace), and the mount reaches the node through mount propagation:

- on this machine, each lab has a directory `DISK_ROOT/<lab>` bind-mounted onto itself and made
  shared (`mount --make-rshared`), with one subdirectory per node: the node's workdir;
- the holder binds the node's subdirectory at the workdir `rshared`, with `/dev/fuse` and
  `CAP_SYS_ADMIN` (mount(2) needs it; Docker's default seccomp profile allows mount with that
  capability), and mounts the filesystem at `<workdir>/metadata`; where the engine confines
  containers with AppArmor, its `docker-default` profile denies every mount, so there the holder
  runs unconfined by AppArmor (`apparmor=unconfined`);
- the node's container binds the same subdirectory at the workdir `rslave`, so it receives the mount
  (also when it starts again after a kill) and gets no privilege of its own.

Only labs brought up for `--diskfs` get the holder's privilege. The control socket
(`<workdir>/diskfs.sock`) is a file in that directory, so the suite asks the filesystem directly,
as on network namespaces. Taking the lab down unmounts whatever is left under its directory (a dead
mount of a killed daemon too), the shared bind, and removes the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kraftlab.control import mounts
from kraftlab.control.preflight import SetupError

DISK_ROOT = Path(os.environ.get("KRAFTLAB_DOCKER_DISK_ROOT", "/var/lib/kraftlab/docker-disks"))
FUSE_DEVICE = "/dev/fuse"
CAPABILITY = "SYS_ADMIN"


def lab_root(lab: str) -> Path:
    return DISK_ROOT / lab


def node_dir(lab: str, node: str) -> Path:
    """This machine's directory that is the node's workdir in both its containers."""
    return lab_root(lab) / node


def uses_apparmor(security_options: list[str]) -> bool:
    """Whether the engine confines containers with AppArmor (`docker info`'s SecurityOptions)."""
    return any(o == "apparmor" or o.startswith("name=apparmor") for o in security_options)


def holder_options(host_dir: str, workdir: str, *, apparmor: bool = False) -> dict[str, Any]:
    """create_host_config arguments (besides the network) of a node's holder that serves its diskfs."""
    # init: Docker's init as PID 1 reaps each daemon that exits (at every unmount); `sleep` would not
    opts: dict[str, Any] = {"binds": [f"{host_dir}:{workdir}:rw,rshared"],
                            "devices": [f"{FUSE_DEVICE}:{FUSE_DEVICE}:rwm"], "cap_add": [CAPABILITY], "init": True}
    if apparmor:  # docker-default has `deny mount`
        opts["security_opt"] = ["apparmor=unconfined"]
    return opts


def node_binds(host_dir: str, workdir: str) -> list[str]:
    """The node container's workdir: the holder's, receiving its mounts but sending none back."""
    return [f"{host_dir}:{workdir}:rw,rslave"]


def _is_mountpoint(path: Path) -> bool:
    target = str(path.resolve())
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    return any(len(f) > 4 and f[4].replace("\\040", " ") == target for f in (line.split() for line in lines))


def prepare(lab: str, nodes: list[str]) -> Path:
    """The lab's shared directory with a subdirectory per node (SetupError when this machine lacks FUSE)."""
    if not Path(FUSE_DEVICE).exists():
        raise SetupError(f"--diskfs on Docker needs {FUSE_DEVICE} on this machine (modprobe fuse)")
    root = lab_root(lab)
    for n in nodes:
        node_dir(lab, n).mkdir(parents=True, exist_ok=True)
    if not _is_mountpoint(root):
        for cmd in (["mount", "--bind", str(root), str(root)], ["mount", "--make-rshared", str(root)]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SetupError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return root


def release(lab: str | None) -> list[str]:
    """Unmount every diskfs left under the lab's directory (every lab's when None), the shared bind,
    and remove the directory; the mount points unmounted. Needs no Docker engine."""
    roots = [lab_root(lab)] if lab is not None else (sorted(DISK_ROOT.iterdir()) if DISK_ROOT.is_dir() else [])
    gone: list[str] = []
    for root in roots:
        gone.extend(mounts.unmount_under(root))
        while _is_mountpoint(root):  # lazily: a container still holding it lets go when it goes
            r = subprocess.run(["umount", "-l", str(root)], capture_output=True, text=True)
            if r.returncode != 0:
                raise SetupError(f"umount {root} failed: {r.stderr.strip()}")
            gone.append(str(root))
        shutil.rmtree(root, ignore_errors=True)
    if lab is None:
        with contextlib.suppress(OSError):
            DISK_ROOT.rmdir()
    return gone
