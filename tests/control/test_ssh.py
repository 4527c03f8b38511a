"""The SSH backend end to end against real sshd daemons in five namespaces: host-key policy, commands
(exit codes, streams, parallelism, one reused TCP_NODELAY connection), SFTP, daemons, the lab
commands, and errors a user can act on."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kraftlab.control import sshd_lab
from kraftlab.control.host import HostError
from kraftlab.control.lab import Lab
from kraftlab.control.labs import load_lab
from kraftlab.control.nodesfile import NodeEntry, read
from kraftlab.control.ssh import SshHost

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def entry(nodes_file: Path, name: str, **options: str) -> NodeEntry:
    e = next(e for e in read(str(nodes_file)) if e.name == name)
    return NodeEntry(e.name, e.host, e.port, e.user, e.key, {**e.options, **options})


def test_unknown_host_key_is_refused_unless_accepted(sshd: tuple[Lab, Path], tmp_path: Path) -> None:
    _, nodes_file = sshd
    kh = tmp_path / "known_hosts"
    e = entry(nodes_file, "n1", known_hosts=str(kh))
    with pytest.raises(HostError, match=r"unknown host key.*--accept-new-host-keys"):
        SshHost(e).run("true")
    assert not kh.exists()
    h = SshHost(e, accept_new_host_keys=True)
    assert h.run("echo hi", check=True).stdout == "hi\n"
    h.close()
    assert e.host in kh.read_text()
    strict = SshHost(e)
    assert strict.run("true").ok
    strict.close()


def test_changed_host_key_is_refused(sshd: tuple[Lab, Path], tmp_path: Path) -> None:
    _, nodes_file = sshd
    kh = tmp_path / "known_hosts"
    other = tmp_path / "other"
    sshd_lab.keygen(other)
    e = entry(nodes_file, "n2", known_hosts=str(kh))
    kh.write_text(f"{e.host} " + " ".join(other.with_suffix(".pub").read_text().split()[:2]) + "\n")
    with pytest.raises(HostError, match=r"HOST KEY MISMATCH.*ssh-keygen -R"):
        SshHost(e, accept_new_host_keys=True).run("true")


def test_unreachable_host_is_named(sshd: tuple[Lab, Path]) -> None:
    _, nodes_file = sshd
    e = entry(nodes_file, "n3")
    bad = NodeEntry("n3", e.host, 2, e.user, e.key, e.options)
    with pytest.raises(HostError, match=r"n3: cannot reach .*:2 over SSH"):
        SshHost(bad).run("true")


def test_commands(ssh_lab: Lab) -> None:
    h = ssh_lab.host("n1")
    r = h.run("echo out; echo err >&2; exit 7")
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert h.run("printf 'no newline'").stdout == "no newline"
    big = h.run("head -c 300000 /dev/zero | tr '\\0' x").stdout
    assert len(big) == 300000
    assert h.run("cat").stdout == ""  # stdin is not the session's stdin
    assert h.run("hostname -I 2>/dev/null || ip -4 -o addr").stdout.count(h.address) == 1
    r = h.run("sleep 5", timeout=0.3)
    assert r.exit_code == 124
    assert h.run("echo still works").stdout == "still works\n"


def test_one_reused_nodelay_connection_and_parallel_sessions(ssh_lab: Lab) -> None:
    h = ssh_lab.host("n2")
    assert isinstance(h, SshHost)
    t = h.transport()
    for _ in range(5):
        h.run("true")
    assert h.transport() is t
    assert t.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)  # type: ignore[union-attr]
    start = time.monotonic()  # five commands in parallel on one host
    with ThreadPoolExecutor(5) as pool:
        outs = list(pool.map(lambda i: h.run(f"sleep 0.5; echo {i}").stdout, range(5)))
    assert outs == [f"{i}\n" for i in range(5)]
    assert time.monotonic() - start < 2.4  # would be >= 2.5 s if serialised
    assert h.transport() is t
    results = ssh_lab.run("cat /etc/hostname")
    assert {n: r.stdout.strip() for n, r in results.items()} == {n: n for n in ssh_lab.names}


def test_sftp_files_and_directories(ssh_lab: Lab, tmp_path: Path) -> None:
    h = ssh_lab.host("n3")
    f = tmp_path / "f.sh"
    f.write_text("#!/bin/sh\necho ran\n")
    f.chmod(0o755)
    h.put(str(f), f"{h.workdir}/bin/f.sh")
    assert h.run(f"{h.workdir}/bin/f.sh", check=True).stdout == "ran\n"
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "a").write_bytes(bytes(range(256)) * 100)
    h.put(str(d), f"{h.workdir}/d")
    h.get(f"{h.workdir}/d", str(tmp_path / "back"))
    assert (tmp_path / "back" / "sub" / "a").read_bytes() == (d / "sub" / "a").read_bytes()
    h.get(f"{h.workdir}/bin/f.sh", str(tmp_path / "f2"))
    assert (tmp_path / "f2").read_text() == f.read_text()
    with pytest.raises(HostError, match="no such file"):
        h.get(f"{h.workdir}/nope", str(tmp_path / "x"))
    assert h.run("ls /tmp | grep -c kraftlab-xfer || true").stdout.strip() == "0"


def test_daemons_and_lab_commands(ssh_lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlab.cli import main

    h = ssh_lab.host("n4")
    pid = h.start_daemon("ticker", "sh -c 'while true; do echo tick; sleep 0.05; done'",
                         log_path=f"{h.workdir}/logs/ticker.log")
    assert h.daemon_pid("ticker") == pid
    assert h.signal_daemon("ticker", signal.SIGSTOP)
    assert main(["lab", "status", "--name", ssh_lab.name]) == 0
    assert f"ticker[{pid}] paused" in capsys.readouterr().out
    assert h.signal_daemon("ticker", signal.SIGCONT)
    time.sleep(0.2)
    h.get(f"{h.workdir}/logs/ticker.log", str(tmp_path / "ticker.log"))
    assert (tmp_path / "ticker.log").read_text().count("tick") >= 2
    reopened = load_lab(ssh_lab.name)  # strict host keys now: they were recorded at lab up
    assert reopened.host("n4").daemon_pid("ticker") == pid
    reopened.close()
    assert h.signal_daemon("ticker", signal.SIGKILL)
    deadline = time.monotonic() + 5
    while h.daemon_running("ticker"):
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.fixture
def sudo_user(sshd: tuple[Lab, Path]) -> Iterator[tuple[str, Path]]:
    """A throwaway non-root user with passwordless sudo and the test's key (removed afterwards)."""
    if not shutil.which("sudo"):
        r = subprocess.run("apt-get install -y -qq --no-install-recommends sudo", shell=True, capture_output=True,
                           text=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if r.returncode != 0:
            pytest.skip(f"sudo is not installed and could not be: {r.stderr.strip()[-200:]}")
    user = "kl" + secrets.token_hex(4)
    _, nodes_file = sshd
    key = read(str(nodes_file))[0].key
    base = Path("/run/kraftlab") / f"test-home-{user}"  # root-owned 755 path, the user's home 700 below
    home = base / user
    sudoers = Path("/etc/sudoers.d") / user
    try:
        (home / ".ssh").mkdir(parents=True)
        os.chmod(base, 0o755)
        subprocess.run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", "-p", "*", user], check=True,
                       capture_output=True)  # "*": no password, yet not a locked account (sshd refuses those)
        shutil.copy(key + ".pub", home / ".ssh" / "authorized_keys")
        subprocess.run(["chown", "-R", f"{user}:{user}", str(home)], check=True)
        os.chmod(home, 0o700)
        sudoers.write_text(f"{user} ALL=(ALL) NOPASSWD:ALL\n")
        os.chmod(sudoers, 0o440)
        yield user, nodes_file
    finally:
        sudoers.unlink(missing_ok=True)
        for _ in range(50):  # the user's sshd session may take a moment to go
            subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
            if subprocess.run(["userdel", user], capture_output=True).returncode in (0, 6):  # 6: no such user
                break
            time.sleep(0.1)
        shutil.rmtree(base, ignore_errors=True)


def test_non_root_user_goes_through_sudo(sudo_user: tuple[str, Path], tmp_path: Path) -> None:
    user, nodes_file = sudo_user
    e = entry(nodes_file, "n5", known_hosts=str(tmp_path / "kh"))
    h = SshHost(NodeEntry(e.name, e.host, e.port, user, e.key, e.options), accept_new_host_keys=True)
    try:
        assert h.sudo
        assert h.run("id -u", check=True).stdout == "0\n"
        assert h.run("echo $SUDO_USER", check=True).stdout == f"{user}\n"
        f = tmp_path / "f"
        f.write_text("root-owned")
        h.put(str(f), f"{h.workdir}/sudo-test/f")
        assert h.run(f"stat -c %U {h.workdir}/sudo-test/f", check=True).stdout == "root\n"
        h.run(f"chmod 600 {h.workdir}/sudo-test/f", check=True)
        h.get(f"{h.workdir}/sudo-test/f", str(tmp_path / "back"))
        assert (tmp_path / "back").read_text() == "root-owned"
        pid = h.start_daemon("s", "sleep 300", log_path=f"{h.workdir}/sudo-test/s.log")
        assert h.run(f"ps -o user= -p {pid}", check=True).stdout.strip() == "root"
        assert h.signal_daemon("s", signal.SIGKILL)
    finally:
        h.run(f"rm -rf {h.workdir}/sudo-test")
        h.close()
