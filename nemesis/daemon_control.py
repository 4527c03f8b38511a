"""A NodeControl over plain Host daemons: one daemon per host, started from a command.

Used by the namespace tests (with any long-running process) and by `kraftlab nemesis` when the lab
was not deployed through `kraftlab.deploy` (then only signals work: starting needs a command).
`kraftlab/deploy.py` may subclass it, filling in the node's real command, paths and roles.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence

from kraftlab.control.host import Host, HostError


class DaemonNodeControl:
    def __init__(self, hosts: Sequence[Host], *, daemon: str = "kraft-node",
                 command: Callable[[str], str] | None = None, controllers: Sequence[str] | None = None,
                 brokers: Sequence[str] | None = None, workdir: Callable[[str], str] | None = None,
                 active: Callable[[], str | None] | None = None,
                 reformat: Callable[[str], None] | None = None, stop_timeout: float = 20.0,
                 env: dict[str, str] | None = None) -> None:
        self._hosts = {h.name: h for h in hosts}
        self.daemon = daemon
        self._command = command
        self._controllers = list(controllers) if controllers is not None else list(self._hosts)
        self._brokers = list(brokers) if brokers is not None else list(self._hosts)
        self._workdir = workdir or (lambda n: str(getattr(self._hosts[n], "workdir", f"/var/lib/kraftlab/{n}")))
        self._active = active
        self._reformat = reformat
        self.stop_timeout = stop_timeout
        self._env = dict(env or {})

    def nodes(self) -> list[str]:
        return list(self._hosts)

    def controllers(self) -> list[str]:
        return list(self._controllers)

    def brokers(self) -> list[str]:
        return list(self._brokers)

    def host(self, node: str) -> Host:
        try:
            return self._hosts[node]
        except KeyError:
            raise HostError(f"no node {node!r} (nodes: {', '.join(self._hosts)})") from None

    def active_controller(self) -> str | None:
        return self._active() if self._active is not None else None

    def start(self, node: str) -> None:
        if self._command is None:
            raise HostError(f"{node}: this lab has no deployed node command to start")
        h = self.host(node)
        if h.daemon_running(self.daemon):
            raise HostError(f"{node}: {self.daemon} is already running")
        log = f"{self._workdir(node)}/{self.daemon}.log"
        h.start_daemon(self.daemon, self._command(node), log_path=log, env=self._env or None)

    def _signal(self, node: str, sig: signal.Signals) -> None:
        if not self.host(node).signal_daemon(self.daemon, sig):
            raise HostError(f"{node}: {self.daemon} is not running (cannot send {sig.name})")

    def kill(self, node: str) -> None:
        self._signal(node, signal.SIGKILL)
        self._wait_gone(node, 5.0)

    def stop(self, node: str, *, graceful: bool = True) -> None:
        if not graceful:
            self.kill(node)
            return
        self._signal(node, signal.SIGCONT)  # a paused node cannot act on SIGTERM
        self._signal(node, signal.SIGTERM)
        if not self._wait_gone(node, self.stop_timeout):
            self.kill(node)

    def _wait_gone(self, node: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running(node):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def pause(self, node: str) -> None:
        self._signal(node, signal.SIGSTOP)

    def resume(self, node: str) -> None:
        self._signal(node, signal.SIGCONT)

    def running(self, node: str) -> bool:
        return self.host(node).daemon_running(self.daemon)

    def pid(self, node: str) -> int | None:
        return self.host(node).daemon_pid(self.daemon)

    def data_dir(self, node: str) -> str:
        return f"{self._workdir(node)}/data"

    def metadata_log_dir(self, node: str) -> str:
        return f"{self._workdir(node)}/metadata"

    def clock_file(self, node: str) -> str:
        return f"{self._workdir(node)}/clock.json"

    def reformat(self, node: str) -> None:
        if self._reformat is None:
            raise HostError(f"{node}: this lab has no deployed node to format")
        self._reformat(node)
