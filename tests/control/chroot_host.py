"""A Host that is a directory tree (a debootstrap chroot) with its own network namespace: what the
provisioning test uses to start the node where provision.sh installed it, as on a VM. Commands run
with `ip netns exec NS chroot ROOT sh -c`; files are copied through ROOT; `close` kills every process
whose root is the tree and deletes the namespace."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from kraftlab.control.host import CommandResult, HostError
from kraftlab.control.identity import HostIdentity
from kraftlab.control.shell import ShellDaemons


class ChrootHost(HostIdentity, ShellDaemons):
    def __init__(self, name: str, root: Path, namespace: str, workdir: str = "/var/lib/kraftlab") -> None:
        super().__init__(name, "127.0.0.1", workdir)
        self.root = root
        self.namespace = namespace
        subprocess.run(["ip", "netns", "add", namespace], check=True)
        subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True)

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        argv = ["ip", "netns", "exec", self.namespace, "chroot", str(self.root), "sh", "-c", command]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            result = CommandResult(self.name, command, r.returncode, r.stdout, r.stderr)
        except subprocess.TimeoutExpired:
            result = CommandResult(self.name, command, 124, "", f"timed out after {timeout:g}s")
        return result.check() if check else result

    def _inside(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def put(self, local_path: str, remote_path: str) -> None:
        copy(Path(local_path), self._inside(remote_path))

    def get(self, remote_path: str, local_path: str) -> None:
        src = self._inside(remote_path)
        if not src.exists():
            raise HostError(f"{self.name}: no such file {remote_path}")
        copy(src, Path(local_path))

    def processes(self) -> list[int]:
        """Pids of processes running inside the tree."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root") == str(self.root):
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids

    def close(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["ip", "netns", "delete", self.namespace], capture_output=True)


def copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)
