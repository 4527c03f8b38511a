"""The `Host` protocol: what the suite can do on a machine that runs a node.

Every backend (network namespaces, SSH, Docker, and the in-memory fake used by tests)
implements it, so deploy, nemesis and workloads treat them the same way.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class HostError(Exception):
    """A host could not be reached or a command could not be run on it; says which and why."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self) -> CommandResult:
        """Return self, or raise HostError naming the host, command, exit code and stderr."""
        if self.exit_code != 0:
            raise HostError(
                f"{self.host}: `{self.command}` exited {self.exit_code}: {self.stderr.strip()[-2000:]}"
            )
        return self


@runtime_checkable
class Host(Protocol):
    """One machine (namespace, VM, container) in a lab."""

    @property
    def name(self) -> str:
        """The node name (n1 … n5): what the suite calls this host."""
        ...

    @property
    def address(self) -> str:
        """The IP address other hosts reach it at."""
        ...

    @property
    def workdir(self) -> str:
        """A directory on the host that belongs to the suite (data, logs, pid files); distinct per
        host even when hosts share one filesystem (network namespaces)."""
        ...

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        """Run a shell command as root on the host."""
        ...

    def put(self, local_path: str, remote_path: str) -> None:
        """Copy a local file (or directory, recursively) onto the host."""
        ...

    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file (or directory, recursively) from the host."""
        ...

    def start_daemon(self, name: str, command: str, *, log_path: str, env: dict[str, str] | None = None) -> int:
        """Start a long-running process in the background with stdout/stderr to `log_path`;
        remembers it under `name` and returns its pid on the host."""
        ...

    def signal_daemon(self, name: str, sig: signal.Signals) -> bool:
        """Send a signal to the daemon `name` (TERM/KILL/STOP/CONT); False if it is not running."""
        ...

    def daemon_running(self, name: str) -> bool: ...

    def daemon_pid(self, name: str) -> int | None: ...

    def close(self) -> None: ...
