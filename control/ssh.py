"""The SSH backend (paramiko): VMs or any Linux machines listed in a nodes file.

One TCP connection per host (TCP_NODELAY), opened on first use and reused. Commands run in
long-lived `sh` sessions on that connection (a small pool per host, so commands on one host can run
in parallel): the login shell's rc files are read once per session, never per command. When the
user is not root the session is `sudo -n sh`. Host keys are verified against known_hosts; an unknown
key is refused unless the lab was opened with `accept_new_host_keys`, a changed key always is.
Files move with SFTP (directories as a tar stream) through a temporary file the root shell moves.
"""

from __future__ import annotations

import io
import os
import secrets
import selectors
import shlex
import socket
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import paramiko

from kraftlab.control import nodesfile
from kraftlab.control.host import CommandResult, HostError
from kraftlab.control.nodesfile import NodeEntry
from kraftlab.control.shell import ShellDaemons
from kraftlab.control.state import HostRecord, LabState, load_state, remove_state, save_state

CONNECT_TIMEOUT = 10.0


class _Session:
    """One `sh` reading commands on stdin; each command's output ends with a unique marker."""

    def __init__(self, transport: paramiko.Transport, sudo: bool) -> None:
        self.channel = transport.open_session()
        self.channel.exec_command("exec sudo -n sh" if sudo else "exec sh")
        self.channel.fileno()  # makes the channel selectable on stdout and stderr
        self._ready = selectors.DefaultSelector()  # poll/epoll: any fd number (select() stops at 1024)
        self._ready.register(self.channel, selectors.EVENT_READ)

    def run(self, host: str, command: str, timeout: float) -> CommandResult | None:
        """The result, or None when the command timed out (the session is then unusable)."""
        token = "__kraftlab_" + secrets.token_hex(8)
        script = (f"( {command}\n) </dev/null; printf '\\n{token} %d\\n' $?; printf '\\n{token}\\n' >&2\n")
        self.channel.sendall(script.encode())
        out, err = bytearray(), bytearray()
        out_mark, err_mark = ("\n" + token + " ").encode(), ("\n" + token + "\n").encode()
        deadline = time.monotonic() + timeout
        while True:
            done_out = out.find(out_mark)
            if done_out >= 0 and out.endswith(b"\n") and err.find(err_mark) >= 0:
                code = int(out[done_out + len(out_mark):].strip())
                e = err[: err.find(err_mark)]
                return CommandResult(host, command, code, out[:done_out].decode(errors="replace"),
                                     e.decode(errors="replace"))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not (self.channel.recv_ready() or self.channel.recv_stderr_ready()):
                self._ready.select(left)
            if self.channel.recv_ready():
                out += self.channel.recv(65536)
            if self.channel.recv_stderr_ready():
                err += self.channel.recv_stderr(65536)
            if self.channel.exit_status_ready() and not (self.channel.recv_ready()
                                                          or self.channel.recv_stderr_ready()):
                raise HostError(f"{host}: remote shell exited ({self.channel.recv_exit_status()}): "
                                f"{err.decode(errors='replace').strip()[-500:]}")

    def close(self) -> None:
        self._ready.close()
        self.channel.close()


class SshHost(ShellDaemons):
    def __init__(self, entry: NodeEntry, accept_new_host_keys: bool = False) -> None:
        self.entry = entry
        self.accept_new_host_keys = accept_new_host_keys
        self._lock = threading.Lock()
        self._transport: paramiko.Transport | None = None
        self._idle: list[_Session] = []

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def address(self) -> str:
        return self.entry.address

    @property
    def workdir(self) -> str:
        return self.entry.workdir

    @property
    def sudo(self) -> bool:
        return self.entry.user != "root"

    # -- connection -----------------------------------------------------------------------------

    def transport(self) -> paramiko.Transport:
        with self._lock:
            if self._transport is None or not self._transport.is_active():
                self._transport = self._connect()
                self._idle = []
            return self._transport

    def _connect(self) -> paramiko.Transport:
        e = self.entry
        where = f"{e.host}:{e.port}"
        try:
            sock = socket.create_connection((e.host, e.port), timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            raise HostError(f"{e.name}: cannot reach {where} over SSH: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = paramiko.Transport(sock)
        try:
            t.start_client(timeout=CONNECT_TIMEOUT)
            self._verify_host_key(t)
            try:
                key = paramiko.PKey.from_path(e.key)
            except (OSError, paramiko.SSHException) as exc:
                raise HostError(f"{e.name}: cannot read private key {e.key}: {exc}") from None
            try:
                t.auth_publickey(e.user, key)
            except paramiko.AuthenticationException:
                raise HostError(f"{e.name}: SSH login as {e.user}@{where} with key {e.key} was refused") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            t.close()
            raise HostError(f"{e.name}: SSH to {where} failed: {exc}") from None
        except BaseException:
            t.close()
            raise
        t.set_keepalive(15)
        return t

    def _verify_host_key(self, t: paramiko.Transport) -> None:
        e = self.entry
        lookup = e.host if e.port == 22 else f"[{e.host}]:{e.port}"
        key = t.get_remote_server_key()
        known = paramiko.HostKeys()
        if os.path.exists(e.known_hosts):
            known.load(e.known_hosts)
        entry = known.lookup(lookup)
        fingerprint = key.fingerprint
        if entry is not None and key.get_name() in entry:
            if entry[key.get_name()] == key:
                return
            raise HostError(
                f"{e.name}: HOST KEY MISMATCH for {lookup}: the server offers {key.get_name()} {fingerprint}, "
                f"{e.known_hosts} has a different one. If the machine was rebuilt, remove the old key with "
                f"`ssh-keygen -R '{lookup}' -f {e.known_hosts}` and reconnect with --accept-new-host-keys.")
        if not self.accept_new_host_keys:
            raise HostError(
                f"{e.name}: unknown host key for {lookup} ({key.get_name()} {fingerprint}), not in "
                f"{e.known_hosts}; pass --accept-new-host-keys to trust and record it")
        Path(e.known_hosts).parent.mkdir(parents=True, exist_ok=True)
        with open(e.known_hosts, "a") as f:
            f.write(f"{lookup} {key.get_name()} {key.get_base64()}\n")

    def _session(self) -> _Session:
        t = self.transport()
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            return _Session(t, self.sudo)
        except paramiko.SSHException as exc:
            raise HostError(f"{self.name}: cannot open a session: {exc}") from None

    # -- Host -----------------------------------------------------------------------------------

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        session = self._session()
        try:
            result = session.run(self.name, command, timeout)
        except (OSError, paramiko.SSHException) as exc:
            session.close()
            raise HostError(f"{self.name}: connection lost running `{command}`: {exc}") from None
        except BaseException:
            session.close()
            raise
        if result is None:
            session.close()
            result = CommandResult(self.name, command, 124, "", f"timed out after {timeout:g}s")
        else:
            with self._lock:
                self._idle.append(session)
        return result.check() if check else result

    def _sftp(self) -> paramiko.SFTPClient:
        sftp = paramiko.SFTPClient.from_transport(self.transport())
        if sftp is None:  # paramiko's answer when the server opens no channel for it
            raise HostError(f"{self.name}: the SSH server opened no SFTP channel")
        return sftp

    def _tmp(self) -> str:
        return f"/tmp/kraftlab-xfer-{secrets.token_hex(6)}"

    def put(self, local_path: str, remote_path: str) -> None:
        tmp = self._tmp()
        q = shlex.quote
        with self._sftp() as sftp:
            if os.path.isdir(local_path):
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                    tar.add(local_path, arcname=".")
                buf.seek(0)
                sftp.putfo(buf, tmp)
                cmd = f"mkdir -p {q(remote_path)} && tar -xzf {tmp} -C {q(remote_path)} --no-same-owner; rc=$?"
            else:
                sftp.put(local_path, tmp)
                mode = os.stat(local_path).st_mode & 0o777
                cmd = (f"mkdir -p $(dirname {q(remote_path)}) && mv -f {tmp} {q(remote_path)} && "
                       f"chown 0:0 {q(remote_path)} 2>/dev/null; chmod {mode:o} {q(remote_path)}; rc=$?")
        self.run(f"{cmd}; rm -f {tmp}; exit $rc", check=True)

    def get(self, remote_path: str, local_path: str) -> None:
        tmp = self._tmp()
        q = shlex.quote
        kind = self.run(f"if [ -d {q(remote_path)} ]; then tar -czf {tmp} -C {q(remote_path)} . && echo dir; "
                        f"elif [ -e {q(remote_path)} ]; then cp {q(remote_path)} {tmp} && echo file; "
                        f"else echo no such file {q(remote_path)} >&2; exit 1; fi; chmod 644 {tmp}", check=True)
        try:
            with self._sftp() as sftp:
                if kind.stdout.strip() == "dir":
                    buf = io.BytesIO()
                    sftp.getfo(tmp, buf)
                    buf.seek(0)
                    Path(local_path).mkdir(parents=True, exist_ok=True)
                    with tarfile.open(fileobj=buf, mode="r:gz") as tar:
                        tar.extractall(local_path, filter="data")
                else:
                    Path(local_path).parent.mkdir(parents=True, exist_ok=True)
                    sftp.get(tmp, local_path)
        finally:
            self.run(f"rm -f {tmp}")

    def close(self) -> None:
        with self._lock:
            for s in self._idle:
                s.close()
            self._idle = []
            if self._transport is not None:
                self._transport.close()
                self._transport = None


# -- the backend ------------------------------------------------------------------------------


def entries_from_state(state: LabState) -> list[NodeEntry]:
    return [NodeEntry(h.name, str(h.extra["host"]), int(str(h.extra["port"])), str(h.extra["user"]),
                      str(h.extra["key"]), _options(h.extra.get("options", {})))
            for h in state.hosts]


def _options(saved: Any) -> dict[str, str]:
    """A host's ssh options as the lab state saved them (a JSON object)."""
    return {str(k): str(v) for k, v in dict(saved).items()}


def open_hosts(state: LabState) -> list[SshHost]:
    return [SshHost(e) for e in entries_from_state(state)]


def connect_all(name: str, backend: str, entries: list[NodeEntry], accept_new_host_keys: bool,
                info: dict[str, object]) -> LabState:
    """Connect to every host in parallel (verifying or recording host keys), check that commands
    run as root, and record the lab."""
    from kraftlab.control.lab import Lab

    hosts = [SshHost(e, accept_new_host_keys) for e in entries]
    with Lab(name, backend, hosts) as lab:
        whoami = lab.run("id -u", timeout=30)
    bad = [n for n, r in whoami.items() if r.stdout.strip() != "0"]
    if bad:
        raise HostError(f"commands do not run as root on {', '.join(bad)} (is passwordless sudo set up?): "
                        + "; ".join(whoami[n].stderr.strip() for n in bad))
    state = LabState(name=name, backend=backend, created=time.time(), info=info, hosts=[
        HostRecord(e.name, e.address, e.workdir, {"host": e.host, "port": e.port, "user": e.user, "key": e.key,
                                                  "options": dict(e.options)}) for e in entries])
    save_state(state)
    return state


def up(name: str, nodes: int = 0, *, nodes_file: str, accept_new_host_keys: bool = False) -> LabState:
    """Open the hosts of a nodes file (which decides how many there are: `nodes` is not used)."""
    entries = nodesfile.read(nodes_file)
    return connect_all(name, "ssh", entries, accept_new_host_keys,
                       {"nodes_file": os.path.abspath(nodes_file), "status": "up"})


def stop_daemons(state: LabState) -> None:
    """Kill every daemon the suite started on the lab's hosts (best effort: unreachable hosts are skipped)."""
    from kraftlab.control.lab import Lab
    from kraftlab.control.labs import open_hosts as open_any

    script = ('for f in "$0"/run/*.pid; do [ -s "$f" ] && kill -KILL -- -$(cat "$f") 2>/dev/null; '
              'rm -f "$f"; done; true')
    with Lab(state.name, state.backend, open_any(state)) as lab:
        for h in lab.hosts:
            try:
                h.run(f"sh -c {shlex.quote(script)} {shlex.quote(h.workdir)}", timeout=20)
            except HostError:
                continue


def down(name: str) -> None:
    try:
        state = load_state(name)
    except LookupError:
        return
    stop_daemons(state)
    remove_state(name)
