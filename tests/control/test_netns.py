"""The namespace backend for real: a five-host lab, names and reachability, daemons and signals,
and teardown (also after `lab up` is SIGKILLed) leaving nothing with the lab's prefix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from control_probes import CONNECT, SERVE, WAIT_LISTENING

from kraftlab.control import leftovers
from kraftlab.control.lab import Lab
from kraftlab.control.labs import clean, lab_down, lab_up, load_lab
from kraftlab.control.netns import WORK_ROOT, lab_prefix
from kraftlab.control.state import state_path

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]



def assert_nothing_left(name: str) -> None:
    prefix = lab_prefix(name)
    found = leftovers.find(prefix)
    assert not found, f"left behind: {found}"
    assert not state_path(name).exists()
    assert not (WORK_ROOT / name).exists()
    ps = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in ps


def wait_until(pred: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_five_hosts_resolve_and_reach_each_other(netns_lab: Lab) -> None:
    lab = netns_lab
    assert lab.names == ["n1", "n2", "n3", "n4", "n5"]
    assert len(set(lab.addresses().values())) == 5
    for h in lab.hosts:
        h.start_daemon("echo", SERVE.format(name=h.name), log_path=f"{h.workdir}/echo.log")
    lab.run(WAIT_LISTENING, check=True)
    # every node reaches every node by name
    for target in lab.names:
        out = lab.run(CONNECT.format(target=target), check=True)
        assert {r.stdout.strip() for r in out.values()} == {target}
    # the runner (root namespace) reaches every node by address
    import socket

    for h in lab.hosts:
        with socket.create_connection((h.address, 7000), timeout=2) as c:
            assert c.recv(100).decode() == h.name
    # each namespace has its own name and only its own address
    r = lab.host("n3").run("cat /etc/hostname; ip -4 -o addr show dev eth0", check=True)
    assert r.stdout.startswith("n3\n") and lab.host("n3").address in r.stdout


def test_daemon_signals(netns_lab: Lab) -> None:
    h = netns_lab.host("n2")
    pid = h.start_daemon("sleeper", "sleep 300", log_path=f"{h.workdir}/logs/sleeper.log", env={"X": "1"})
    assert h.daemon_pid("sleeper") == pid and os.path.exists(f"{h.workdir}/logs/sleeper.log")
    wait_until(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"))  # the pid is known first
    assert Path(f"/proc/{pid}/environ").read_bytes().split(b"\0").count(b"X=1") == 1
    state = lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]  # noqa: E731
    assert h.signal_daemon("sleeper", signal.SIGSTOP)
    wait_until(lambda: state() == "T")
    assert h.daemon_running("sleeper")
    assert h.signal_daemon("sleeper", signal.SIGCONT)
    wait_until(lambda: state() == "S")
    assert h.signal_daemon("sleeper", signal.SIGKILL)
    wait_until(lambda: not h.daemon_running("sleeper"))
    assert not h.signal_daemon("sleeper", signal.SIGTERM)
    # a daemon's process lives in its namespace
    pid2 = h.start_daemon("sleeper", "sleep 300", log_path=f"{h.workdir}/sleeper.log")
    ns = subprocess.run(["ip", "netns", "identify", str(pid2)], capture_output=True, text=True).stdout.strip()
    assert ns == f"{lab_prefix(netns_lab.name)}-n2"


def test_command_timeout_kills_the_command(netns_lab: Lab) -> None:
    r = netns_lab.host("n1").run("sleep 30", timeout=0.3)
    assert r.exit_code == 124 and "timed out" in r.stderr


def test_down_leaves_nothing(state_dir: Path, lab_name: str) -> None:
    lab = lab_up(lab_name, "netns", 5)
    try:
        pids = [h.start_daemon("s", "sleep 300", log_path=f"{h.workdir}/s.log") for h in lab.hosts]
        reopened = load_lab(lab_name)
        assert reopened.addresses() == lab.addresses()
        assert reopened.host("n4").daemon_pid("s") == pids[3]
    finally:
        lab_down(lab_name)
    assert_nothing_left(lab_name)
    for pid in pids:
        wait_until(lambda p=pid: not os.path.exists(f"/proc/{p}"))


def test_two_labs_never_collide(state_dir: Path, lab_name: str) -> None:
    a = lab_up(lab_name, "netns", 2)
    try:
        b = lab_up(lab_name + "b", "netns", 2)
        try:
            assert a.info["subnet"] != b.info["subnet"] and a.info["prefix"] != b.info["prefix"]
            with pytest.raises(Exception, match="already exist"):
                lab_up(lab_name, "netns", 2)
        finally:
            lab_down(lab_name + "b")
    finally:
        lab_down(lab_name)
    assert_nothing_left(lab_name)
    assert_nothing_left(lab_name + "b")


@pytest.mark.parametrize("moment", ["mid-way", "after-up"])
def test_clean_after_sigkill(state_dir: Path, lab_name: str, moment: str) -> None:
    prefix = lab_prefix(lab_name)
    env = dict(os.environ, KRAFTLAB_STATE_DIR=str(state_dir))
    code = ("import sys; from control.labs import lab_up\n"
            "lab = lab_up(sys.argv[1], 'netns', 5)\n"
            "[h.start_daemon('s', 'sleep 300', log_path=h.workdir + '/s.log') for h in lab.hosts]\n"
            "print('up', flush=True)\nimport time; time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, lab_name], env=env, stdout=subprocess.PIPE, text=True)
    try:
        if moment == "mid-way":
            wait_until(lambda: any(n.startswith(prefix) for n in leftovers.find(prefix).namespaces), 20)
        else:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
            assert len(leftovers.find(prefix).pids) == 5
    finally:
        proc.kill()
        proc.wait()
    assert leftovers.find(prefix)
    from kraftlab.cli import main

    assert main(["clean", "--lab", lab_name]) == 0
    assert_nothing_left(lab_name)
    clean(lab_name)  # idempotent


def test_lab_commands(state_dir: Path, lab_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlab.cli import main

    assert main(["lab", "up", "--name", lab_name, "--nodes", "3"]) == 0
    try:
        out = capsys.readouterr().out
        lab = load_lab(lab_name)
        assert all(f"{h.name}\t{h.address}" in out for h in lab.hosts) and len(lab.hosts) == 3
        lab.host("n2").start_daemon("s", "sleep 300", log_path=f"{lab.host('n2').workdir}/s.log")
        assert main(["lab", "list"]) == 0
        assert f"{lab_name}\tnetns\t3 hosts\t{lab.info['subnet']}\tup" in capsys.readouterr().out
        assert main(["lab", "status", "--name", lab_name]) == 0
        status = capsys.readouterr().out
        assert "n1\t" in status and "no daemons" in status and "s[" in status and "running" in status
        assert main(["lab", "node", "kill", "n1", "--name", lab_name]) == 1  # nothing deployed
        assert "has no deployment" in capsys.readouterr().err
    finally:
        assert main(["lab", "down", "--name", lab_name]) == 0
    assert_nothing_left(lab_name)
    assert main(["lab", "status", "--name", lab_name]) == 1
