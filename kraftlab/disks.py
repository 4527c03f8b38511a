"""A deployed lab's data on the disk-fault filesystem (kraftlab.nemesis.diskfs): each node's
`metadata.log.dir` is a diskfs mount over a backing directory beside it, so a kill can lose
exactly what the node never fsynced, and the nemesis can fail or delay its I/O.

On each host: `<workdir>/metadata` is the mount, `<workdir>/metadata.backing` its backing
directory, `<workdir>/diskfs.sock` its control socket, `<workdir>/kraftlab-diskfs.log` its log.
The filesystem serves from a daemon beside the node's. On network namespaces it runs in the
machine's root mount namespace: `ip netns exec` gives each command a mount namespace of its own
that receives the root's mounts but sends none back, so a mount made there would be seen by no node.
On SSH hosts it runs on the host like the node (pyfuse3 and fuse3 must be installed there). On
Docker it runs in the node's holder container, which outlives the node (the node is its own
container's PID 1: its death kills everything beside it), and reaches the node's container by mount
propagation; the lab must have been brought up for it (control/containerfs.py).

The node's journal (`data/journal.jsonl`) stays off the filesystem: it is the run's evidence, and
a crash must not take back what the node said it did.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraftlab.control.containers import DockerHost
from kraftlab.control.host import CommandResult, Host, HostError
from kraftlab.control.mounts import FUSE_TYPE, unmount_command
from kraftlab.control.netns import NetnsHost
from kraftlab.control.shell import local_daemon_pid, signal_script, start_script
from kraftlab.control.ssh import SshHost

DAEMON = "kraftlab-diskfs"
MOUNT_WAIT_S = 20.0


class DiskFsError(HostError):
    """The filesystem could not be mounted, unmounted or asked (names the node and why)."""


def _local(command: str, timeout: float = 60.0) -> CommandResult:
    """A shell command in this machine's root namespaces (not the node's)."""
    try:
        p = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return CommandResult("local", command, 124, "", f"timed out after {timeout:g}s")
    return CommandResult("local", command, p.returncode, p.stdout, p.stderr)


class DiskMounts:
    """The diskfs mounts of one lab's nodes."""

    def __init__(self, host: Callable[[str], Host], python: Callable[[str], str]) -> None:
        self._host = host
        self._python = python

    # -- where -------------------------------------------------------------------------------------------

    def mountpoint(self, node: str) -> str:
        return f"{self._host(node).workdir}/metadata"

    def backing(self, node: str) -> str:
        return f"{self._host(node).workdir}/metadata.backing"

    def socket(self, node: str) -> str:
        return f"{self._host(node).workdir}/diskfs.sock"

    def log(self, node: str) -> str:
        return f"{self._host(node).workdir}/{DAEMON}.log"

    def supported(self, node: str) -> bool:
        h = self._host(node)
        return isinstance(h, NetnsHost | SshHost) or (isinstance(h, DockerHost) and h.disk_dir is not None)

    def _daemon_host(self, node: str) -> Host:
        """Where the filesystem's daemon runs and is mounted (not for network namespaces: this machine)."""
        h = self._host(node)
        if isinstance(h, SshHost):
            return h
        if isinstance(h, DockerHost):
            try:
                return h.disk_host()
            except HostError as exc:
                raise DiskFsError(str(exc)) from None
        raise DiskFsError(f"{node}: the disk-fault filesystem runs on network-namespace, SSH and Docker hosts, "
                          f"not on {type(h).__name__}")

    def _daemon_workdir(self, node: str) -> str:
        """Where the daemon's pid file goes (`<dir>/run/kraftlab-diskfs.pid`)."""
        h = self._host(node)
        return h.workdir if isinstance(h, NetnsHost) else self._daemon_host(node).workdir

    def _run(self, node: str, command: str, timeout: float = 60.0) -> CommandResult:
        if isinstance(self._host(node), NetnsHost):
            return _local(command, timeout)
        return self._daemon_host(node).run(command, timeout=timeout)

    def _local_socket(self, node: str) -> str | None:
        """The control socket's path on this machine, when it is reachable from here."""
        h = self._host(node)
        if isinstance(h, NetnsHost):
            return self.socket(node)
        if isinstance(h, DockerHost) and h.disk_dir is not None:  # the workdir is this machine's directory
            return f"{h.disk_dir}/{Path(self.socket(node)).name}"
        return None

    # -- mount / unmount ----------------------------------------------------------------------------------

    def mounted(self, node: str) -> bool:
        q = shlex.quote(self.mountpoint(node))
        return self._run(node, f"grep -q \" $(realpath {q}) {FUSE_TYPE} \" /proc/mounts").ok

    def mount(self, node: str, seed: int = 0) -> None:
        """Mount the node's metadata directory (empty backing directory first: call after a wipe)."""
        q = shlex.quote
        if self.mounted(node):
            return
        mnt, backing, sock = self.mountpoint(node), self.backing(node), self.socket(node)
        command = (f"{q(self._python(node))} -m kraftlab.nemesis.diskfs mount {q(backing)} {q(mnt)} "
                   f"--control {q(sock)} --seed {int(seed)}")
        r = self._run(node, f"mkdir -p {q(mnt)} {q(backing)} && rm -f {q(sock)} && "
                            + start_script(self._daemon_workdir(node), DAEMON, command, self.log(node), None))
        if not r.ok:
            raise DiskFsError(f"{node}: could not start the disk-fault filesystem: {r.stderr.strip()[-500:]}")
        deadline = time.monotonic() + MOUNT_WAIT_S
        while not self._run(node, f"test -S {q(sock)}").ok:
            if time.monotonic() > deadline or not self._daemon_alive(node):
                tail = self._run(node, f"tail -n 20 {q(self.log(node))}").stdout
                raise DiskFsError(f"{node}: the disk-fault filesystem did not mount {mnt}:\n{tail}")
            time.sleep(0.05)

    def _daemon_alive(self, node: str) -> bool:
        h = self._host(node)
        if isinstance(h, NetnsHost):
            return local_daemon_pid(h.workdir, DAEMON) is not None
        return self._daemon_host(node).daemon_running(DAEMON)

    def unmount(self, node: str) -> None:
        """Stop the filesystem and unmount it (lazily, so a dead mount goes too); nothing if not mounted."""
        import signal

        pids = self._daemon_workdir(node)
        self._run(node, signal_script(pids, DAEMON, signal.SIGTERM), timeout=10)
        deadline = time.monotonic() + 10
        while self._daemon_alive(node) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._daemon_alive(node):
            self._run(node, signal_script(pids, DAEMON, signal.SIGKILL), timeout=10)
        if self.mounted(node):
            r = self._run(node, unmount_command(self.mountpoint(node)))
            if not r.ok:
                raise DiskFsError(f"{node}: could not unmount {self.mountpoint(node)}: {r.stderr.strip()}")

    # -- control ------------------------------------------------------------------------------------------

    def request(self, node: str, req: dict[str, Any]) -> dict[str, Any]:
        """One control request to the node's filesystem; its answer (DiskFsError if refused)."""
        local = self._local_socket(node)
        if local is not None:  # the socket is on this machine
            from kraftlab.nemesis.diskfs.control import ControlError, request

            try:
                return request(local, req)
            except ControlError as exc:
                raise DiskFsError(f"{node}: {exc}") from None
        q = shlex.quote
        r = self._run(node, f"{q(self._python(node))} -m kraftlab.nemesis.diskfs ctl {q(self.socket(node))} "
                            f"{q(json.dumps(req))}")
        if not r.ok:
            raise DiskFsError(f"{node}: {r.stderr.strip()[-500:] or 'diskfs ctl failed'}")
        try:
            return dict(json.loads(r.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            raise DiskFsError(f"{node}: diskfs ctl printed no answer: {r.stdout[-300:]!r}") from None


def python_beside(executable: str) -> str:
    """The Python interpreter of the virtualenv that holds `executable` (e.g. kraft-node)."""
    return str(Path(executable).parent / "python") if "/" in executable else sys.executable


def wipe_backing_command(mounts: DiskMounts, node: str) -> str:
    """The shell command that empties a node's backing directory (the filesystem unmounted)."""
    b = shlex.quote(mounts.backing(node))
    return f"rm -rf {b} && mkdir -p {b}"

