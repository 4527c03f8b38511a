"""The Docker backend against a real engine the test starts (dockerd without host iptables changes):
offline images, fixed addresses, names, reachability, NET_ADMIN, daemons and signals, files, and
removal of everything labelled for the lab; and (e2e) the node as its container's PID 1: Docker API
signals, controlled shutdown, restart of the same container keeping its volume and network rules."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from control_probes import CONNECT, SERVE, WAIT_LISTENING

from kraftlab.control.lab import Lab
from kraftlab.control.labs import clean, lab_down, lab_up

pytestmark = [pytest.mark.docker, pytest.mark.skipif(os.geteuid() != 0, reason="starting dockerd needs root")]



@pytest.fixture
def docker_lab(engine: None, state_dir: Path, lab_name: str) -> Iterator[Lab]:
    lab = lab_up(lab_name, "docker", 3)
    try:
        yield lab
    finally:
        lab.close()
        clean(lab_name)


def test_containers_reach_each_other_and_filter(docker_lab: Lab) -> None:
    lab = docker_lab
    assert lab.names == ["n1", "n2", "n3"] and len(set(lab.addresses().values())) == 3
    for h in lab.hosts:
        h.start_daemon("echo", SERVE.format(name=h.name), log_path=f"{h.workdir}/echo.log")
    lab.run(WAIT_LISTENING, check=True)
    for target in lab.names:
        out = lab.run(CONNECT.format(target=target), check=True)
        assert {r.stdout.strip() for r in out.values()} == {target}
    with socket.create_connection((lab.host("n2").address, 7000), timeout=2) as c:
        assert c.recv(9).decode() == "n2"
    # NET_ADMIN: a rule in n2 cuts n1 -> n2 only
    lab.host("n2").run(f"iptables -A INPUT -s {lab.host('n1').address} -j DROP", check=True)
    assert not lab.host("n1").run(CONNECT.format(target="n2")).ok
    assert lab.host("n3").run(CONNECT.format(target="n2")).ok
    lab.host("n2").run("iptables -F INPUT", check=True)
    assert lab.host("n1").run(CONNECT.format(target="n2")).ok


def test_daemons_files_and_timeouts(docker_lab: Lab, tmp_path: Path) -> None:
    h = docker_lab.host("n1")
    pid = h.start_daemon("sleeper", "sleep 300", log_path=f"{h.workdir}/logs/s.log")
    assert h.daemon_pid("sleeper") == pid
    assert h.signal_daemon("sleeper", signal.SIGSTOP)
    assert h.run(f"grep State /proc/{pid}/status").stdout.split()[1] == "T"
    assert h.signal_daemon("sleeper", signal.SIGCONT)
    assert h.signal_daemon("sleeper", signal.SIGKILL)
    deadline = time.monotonic() + 5
    while h.daemon_running("sleeper"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("payload")
    h.put(str(tmp_path / "d"), f"{h.workdir}/copied")
    h.put(str(tmp_path / "d" / "f"), f"{h.workdir}/single")
    assert h.run(f"cat {h.workdir}/copied/f {h.workdir}/single", check=True).stdout == "payloadpayload"
    h.get(f"{h.workdir}/copied", str(tmp_path / "back"))
    assert (tmp_path / "back" / "f").read_text() == "payload"
    r = h.run("sleep 10", timeout=0.5)
    assert r.exit_code == 124
    assert h.run("test -x /opt/kraftlab/venv/bin/kraft-node").ok


def test_down_removes_everything(engine: None, state_dir: Path, lab_name: str) -> None:
    from kraftlab.control.containers import LABEL, client

    lab_up(lab_name, "docker", 2).close()
    c = client()
    assert len(c.containers.list(filters={"label": f"{LABEL}={lab_name}"})) == 4  # each node and its net holder
    lab_down(lab_name)
    assert not c.containers.list(all=True, filters={"label": f"{LABEL}={lab_name}"})
    assert not c.networks.list(filters={"label": f"{LABEL}={lab_name}"})


def pid1_cmdline(lab: Lab, node: str) -> str:
    return lab.host(node).run("tr '\\0' ' ' < /proc/1/cmdline", check=True).stdout


def container_state(lab: Lab, node: str) -> dict[str, object]:
    from kraftlab.control.containers import DockerHost

    h = lab.host(node)
    assert isinstance(h, DockerHost)
    c = h.container()
    c.reload()
    return dict(c.attrs["State"])


def answers(address: str) -> bool:
    from kraftlab.control.host import HostError
    from kraftlab.deploy import direct_query

    try:
        direct_query("cluster", address, timeout=1.0)
        return True
    except HostError:
        return False


def status_rows(lab_name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """`kraftlab lab status`: what it says runs on each host."""
    from kraftlab.cli import main

    capsys.readouterr()
    assert main(["lab", "status", "--name", lab_name]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    return {r[0].strip(): r[2] for r in rows if len(r) == 3}


@pytest.mark.e2e
def test_node_is_pid1(engine: None, state_dir: Path, lab_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The node is PID 1 of its container: signals from the Docker API mean what they say (STOP stops it
    answering, CONT resumes it, TERM is a controlled shutdown with exit 0, KILL kills), and a restart is
    the same container with the same workdir volume."""
    from kraftlab.deploy import Deployment

    lab = lab_up(lab_name, "docker", 3)
    try:
        assert "launcher" in pid1_cmdline(lab, "n1")  # idle until the node starts
        d = Deployment.create(lab, topology="combined")
        d.deploy(wait=90)
        for n in lab.names:
            assert "kraft-node start --config" in pid1_cmdline(lab, n)
            assert d.pid(n) == 1
        broker = next(n for n in lab.names if n != d.active_controller())
        address = lab.host(broker).address
        assert answers(address)
        assert status_rows(lab_name, capsys)[broker] == "kraft-node[1] running"
        d.pause(broker)
        assert lab.host(broker).run("grep '^State:' /proc/1/status").stdout.split()[1] == "T"
        assert status_rows(lab_name, capsys)[broker] == "kraft-node[1] paused"
        assert not answers(address) and container_state(lab, broker)["Status"] == "running"
        d.resume(broker)
        assert answers(address)

        log_before = int(lab.host(broker).run(f"wc -c < {d.paths(broker).log}", check=True).stdout)
        d.stop(broker)  # SIGTERM to PID 1: the node's own handler, a clean exit
        state = container_state(lab, broker)
        assert state["Status"] == "exited" and state["ExitCode"] == 0, state
        assert status_rows(lab_name, capsys)[broker] == "no daemons"  # the host is back (idle), the node is not
        d.start(broker)  # the same container again, its data and log kept on the volume
        assert "kraft-node start" in pid1_cmdline(lab, broker)
        d.wait_healthy(60)
        deadline = time.monotonic() + 30
        while not answers(address):  # the others may call it healthy before it answers itself
            assert time.monotonic() < deadline, d.log_tail(broker)
            time.sleep(0.1)
        assert lab.host(broker).run(f"test -f {d.paths(broker).metadata_dir}/meta.properties").ok
        assert int(lab.host(broker).run(f"wc -c < {d.paths(broker).log}", check=True).stdout) > log_before

        leader = d.active_controller()
        assert leader is not None
        rule = "INPUT -s 192.0.2.1/32 -j DROP"  # a nemesis rule in force outlives the node's container
        lab.host(leader).run(f"iptables -A {rule}", check=True)
        d.kill(leader)
        assert container_state(lab, leader)["ExitCode"] == 137
        assert not d.running(leader) and lab.host(leader).run("true").ok  # commands still work on its host
        d.start(leader)
        d.wait_healthy(60)
        assert f"-A {rule}" in lab.host(leader).run("iptables -S INPUT", check=True).stdout
        assert lab.host(leader).run("hostname", check=True).stdout.strip() == leader
    finally:
        lab.close()
        clean(lab_name)


@pytest.mark.e2e
def test_docker_cluster(engine: None, state_dir: Path, lab_name: str, tmp_path: Path) -> None:
    from cluster_checks import run_cluster

    lab = lab_up(lab_name, "docker", 5)
    try:
        d = run_cluster(lab, tmp_path)
        assert d.kraft_node("n1") == "/opt/kraftlab/venv/bin/kraft-node"
    finally:
        lab.close()
        clean(lab_name)
