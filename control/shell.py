"""Daemons on any host that runs POSIX shell commands: start (own session, pid file, log), signal,
liveness. One implementation shared by the netns, SSH and Docker backends.

A daemon `NAME` on a host keeps its pid in `<workdir>/run/NAME.pid`. It runs in its own session
(`setsid`), so its pid is its process-group id and signals reach the whole group (a node and any
child it forks stop and continue together).
"""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

from kraftlab.control.host import CommandResult, HostError

_LIVE = 'alive() { s=$(sed "s/.*) //" /proc/$1/stat 2>/dev/null | cut -d" " -f1); [ -n "$s" ] && [ "$s" != Z ]; }'


def pid_file(workdir: str, name: str) -> str:
    return f"{workdir}/run/{name}.pid"


def start_script(workdir: str, name: str, command: str, log_path: str, env: dict[str, str] | None) -> str:
    """A shell script that starts `command` detached and prints its pid; exits 3 if already running."""
    pidf = pid_file(workdir, name)
    q = shlex.quote
    env_prefix = " ".join(q(f"{k}={v}") for k, v in (env or {}).items())
    inner = f"echo $$ > {q(pidf)}.tmp && mv {q(pidf)}.tmp {q(pidf)} && exec env {env_prefix} {command}"
    log_dir = log_path.rsplit("/", 1)[0] or "/"
    return (
        f"{_LIVE}\n"
        f"mkdir -p {q(workdir)}/run {q(log_dir)}\n"
        f"if [ -s {q(pidf)} ] && alive $(cat {q(pidf)}); then echo already running >&2; exit 3; fi\n"
        f"rm -f {q(pidf)}\n"
        f"setsid sh -c {q(inner)} >>{q(log_path)} 2>&1 </dev/null &\n"
        f"i=0; while [ ! -s {q(pidf)} ] && [ $i -lt 1000 ]; do sleep 0.005; i=$((i+1)); done\n"
        f"cat {q(pidf)}\n"
    )


def signal_script(workdir: str, name: str, sig: signal.Signals) -> str:
    """Signal the daemon's process group; exits 1 when it is not running."""
    pidf = shlex.quote(pid_file(workdir, name))
    return (
        f"{_LIVE}\n"
        f"[ -s {pidf} ] || exit 1\np=$(cat {pidf})\nalive $p || exit 1\n"
        f"kill -{sig.name.removeprefix('SIG')} -- -$p 2>/dev/null || kill -{sig.name.removeprefix('SIG')} $p\n"
    )


def status_script(workdir: str, name: str) -> str:
    """Print the daemon's pid and exit 0 when it runs (stopped counts as running); exit 1 otherwise."""
    pidf = shlex.quote(pid_file(workdir, name))
    return f"{_LIVE}\n[ -s {pidf} ] || exit 1\np=$(cat {pidf})\nalive $p || exit 1\necho $p\n"


def local_daemon_pid(workdir: str, name: str) -> int | None:
    """What `status_script` finds, read directly from this machine's files and /proc (for hosts that
    share both with the suite, such as network namespaces): no process started."""
    try:
        pid = int(Path(pid_file(workdir, name)).read_text().strip())
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return pid if state and state[0] != "Z" else None


class ShellDaemons:
    """Mixin: the Host daemon methods, implemented with `self.run` and `self.workdir`."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def workdir(self) -> str:
        raise NotImplementedError

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        raise NotImplementedError

    def start_daemon(self, name: str, command: str, *, log_path: str, env: dict[str, str] | None = None) -> int:
        result = self.run(start_script(self.workdir, name, command, log_path, env), timeout=30.0)
        if result.exit_code == 3:
            raise HostError(f"{self.name}: daemon {name} is already running")
        result.check()
        try:
            return int(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"{self.name}: daemon {name} did not start: {result.stderr.strip()}") from None

    def signal_daemon(self, name: str, sig: signal.Signals) -> bool:
        return self.run(signal_script(self.workdir, name, sig), timeout=10.0).ok

    def daemon_running(self, name: str) -> bool:
        return self.daemon_pid(name) is not None

    def daemon_pid(self, name: str) -> int | None:
        result = self.run(status_script(self.workdir, name), timeout=10.0)
        if not result.ok:
            return None
        try:
            return int(result.stdout.strip())
        except ValueError:
            return None
