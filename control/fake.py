"""An in-memory Host for tests: records every command, serves scripted replies, keeps files and
daemons in dictionaries. Nothing touches the machine.

Replies are chosen by the first registered handler whose pattern (a regular expression searched in
the command) matches; unmatched commands succeed with empty output.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kraftlab.control.host import CommandResult, HostError
from kraftlab.control.identity import HostIdentity

Reply = CommandResult | Callable[[str], CommandResult]


@dataclass
class FakeDaemon:
    command: str
    log_path: str
    env: dict[str, str]
    pid: int
    state: str = "running"  # running | stopped | dead
    signals: list[signal.Signals] = field(default_factory=list)


class FakeHost(HostIdentity):
    """A Host that lives in memory."""

    _next_pid = 1000

    def __init__(self, name: str, address: str = "127.0.0.1", workdir: str | None = None) -> None:
        super().__init__(name, address, workdir or f"/var/lib/kraftlab/{name}")
        self.commands: list[str] = []
        self.files: dict[str, bytes] = {}
        self.daemons: dict[str, FakeDaemon] = {}
        self.unreachable = False
        self.closed = False
        self._handlers: list[tuple[re.Pattern[str], Reply]] = []

    def on(self, pattern: str, reply: Reply) -> None:
        """Answer commands matching `pattern` with `reply` (a result, or a function of the command)."""
        self._handlers.append((re.compile(pattern), reply))

    def reply(self, command: str, exit_code: int = 0, stdout: str = "", stderr: str = "") -> CommandResult:
        return CommandResult(self._name, command, exit_code, stdout, stderr)

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        if self.unreachable:
            raise HostError(f"{self._name}: unreachable")
        self.commands.append(command)
        result = self.reply(command)
        for pattern, reply in self._handlers:
            if pattern.search(command):
                result = reply(command) if callable(reply) else reply
                result = CommandResult(self._name, command, result.exit_code, result.stdout, result.stderr)
                break
        return result.check() if check else result

    def put(self, local_path: str, remote_path: str) -> None:
        src = Path(local_path)
        if src.is_dir():
            for p in src.rglob("*"):
                if p.is_file():
                    self.files[f"{remote_path}/{p.relative_to(src)}"] = p.read_bytes()
        else:
            self.files[remote_path] = src.read_bytes()

    def get(self, remote_path: str, local_path: str) -> None:
        matches = {k: v for k, v in self.files.items() if k == remote_path or k.startswith(remote_path + "/")}
        if not matches:
            raise HostError(f"{self._name}: no such file {remote_path}")
        for k, v in matches.items():
            dest = Path(local_path) if k == remote_path else Path(local_path) / k[len(remote_path) + 1 :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(v)

    def start_daemon(self, name: str, command: str, *, log_path: str, env: dict[str, str] | None = None) -> int:
        if self.daemon_running(name):
            raise HostError(f"{self._name}: daemon {name} is already running")
        FakeHost._next_pid += 1
        self.commands.append(command)
        self.daemons[name] = FakeDaemon(command, log_path, dict(env or {}), FakeHost._next_pid)
        return FakeHost._next_pid

    def signal_daemon(self, name: str, sig: signal.Signals) -> bool:
        d = self.daemons.get(name)
        if d is None or d.state == "dead":
            return False
        d.signals.append(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            d.state = "dead"
        elif sig == signal.SIGSTOP:
            d.state = "stopped"
        elif sig == signal.SIGCONT:
            d.state = "running"
        return True

    def daemon_running(self, name: str) -> bool:
        d = self.daemons.get(name)
        return d is not None and d.state != "dead"

    def daemon_pid(self, name: str) -> int | None:
        d = self.daemons.get(name)
        return d.pid if d is not None and d.state != "dead" else None

    def close(self) -> None:
        self.closed = True
