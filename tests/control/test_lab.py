"""The Lab's parallel helpers, the fake host, lab state files and subnet choice (no root needed)."""

from __future__ import annotations

import ipaddress
import signal
import threading
from pathlib import Path

import pytest

from kraftlab.control.fake import FakeHost
from kraftlab.control.host import Host, HostError
from kraftlab.control.lab import Lab
from kraftlab.control.preflight import SetupError, require_commands
from kraftlab.control.state import HostRecord, LabState, list_states, load_state, remove_state, save_state
from kraftlab.control.subnet import pick_free


def make_lab(n: int = 5) -> Lab:
    return Lab("x", "fake", [FakeHost(f"n{i}", f"10.0.0.{i}") for i in range(1, n + 1)])


def test_fake_host_is_a_host() -> None:
    assert isinstance(FakeHost("n1"), Host)


def test_on_runs_in_parallel_and_keys_by_name() -> None:
    lab = make_lab()
    barrier = threading.Barrier(5, timeout=5)

    def meet(h: Host) -> str:
        barrier.wait()  # only passes if all five calls are in flight at once
        return h.address

    assert lab.on(None, meet) == {f"n{i}": f"10.0.0.{i}" for i in range(1, 6)}


def test_on_some_hosts_only() -> None:
    lab = make_lab()
    lab.run("true", ["n2", "n4"])
    ran = [h.name for h in lab.hosts if isinstance(h, FakeHost) and h.commands]
    assert ran == ["n2", "n4"]


def test_errors_are_collected_from_every_host() -> None:
    lab = make_lab()
    for n in ("n2", "n3"):
        h = lab.host(n)
        assert isinstance(h, FakeHost)
        h.unreachable = True
    with pytest.raises(HostError) as exc:
        lab.run("true")
    assert "n2: unreachable" in str(exc.value) and "n3: unreachable" in str(exc.value)
    assert all(h.commands for h in lab.hosts if isinstance(h, FakeHost) and not h.unreachable)


def test_unknown_host_names_the_hosts() -> None:
    with pytest.raises(HostError, match="n1, n2"):
        make_lab(2).host("n9")


def test_check_raises_with_stderr() -> None:
    h = FakeHost("n1")
    h.on(r"^false", h.reply("false", 1, "", "boom"))
    assert not h.run("false").ok
    with pytest.raises(HostError, match=r"n1: `false` exited 1: boom"):
        h.run("false", check=True)


def test_fake_daemon_lifecycle() -> None:
    h = FakeHost("n1")
    pid = h.start_daemon("node", "kraft-node start", log_path="/l")
    assert h.daemon_pid("node") == pid
    with pytest.raises(HostError):
        h.start_daemon("node", "x", log_path="/l")
    assert h.signal_daemon("node", signal.SIGSTOP) and h.daemons["node"].state == "stopped"
    assert h.daemon_running("node")
    assert h.signal_daemon("node", signal.SIGKILL) and not h.daemon_running("node")
    assert not h.signal_daemon("node", signal.SIGCONT)


def test_fake_files_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "d"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f").write_text("hello")
    h = FakeHost("n1")
    h.put(str(src), "/remote")
    h.get("/remote", str(tmp_path / "back"))
    assert (tmp_path / "back" / "sub" / "f").read_text() == "hello"


def test_state_round_trip(state_dir: Path) -> None:
    s = LabState("lab1", "netns", [HostRecord("n1", "10.1.1.11", "/w/n1", {"namespace": "x-n1"})],
                 {"subnet": "10.1.1.0/24"}, 12.5)
    save_state(s)
    assert load_state("lab1") == s
    assert [x.name for x in list_states()] == ["lab1"]
    (state_dir / "deployments").mkdir()
    (state_dir / "deployments" / "lab1.json").write_text("{}")
    (state_dir / "deployments" / "lab2.json").write_text("{}")
    assert remove_state("lab1") and not remove_state("lab1")
    assert [p.name for p in (state_dir / "deployments").iterdir()] == ["lab2.json"]
    with pytest.raises(LookupError, match="no lab named 'lab1'"):
        load_state("lab1")


def test_bad_lab_names_are_refused(state_dir: Path) -> None:
    for bad in ("", "../etc", "a b", "x" * 41):
        with pytest.raises(ValueError):
            load_state(bad)


def test_pick_free_avoids_used_networks() -> None:
    first = pick_free("lab", used=[])
    assert first.prefixlen == 24 and first.subnet_of(ipaddress.IPv4Network("10.200.0.0/13"))
    second = pick_free("lab", used=[first])
    assert second != first
    wide = ipaddress.IPv4Network(f"{first.network_address}/16", strict=False)
    assert not pick_free("lab", used=[wide]).overlaps(wide)


def test_missing_command_names_package() -> None:
    with pytest.raises(SetupError, match=r"apt-get install -y no-such-pkg"):
        require_commands({"no-such-command-xyz": "no-such-pkg", "sh": "dash"})



def test_docker_not_running_says_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kraftlab.control.containers import client

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(SetupError, match=r"Docker daemon is not running.*apt-get install -y docker.io"):
        client()


def test_unknown_backend_is_refused() -> None:
    from kraftlab.control.labs import backend_module

    with pytest.raises(ValueError, match="unknown backend 'lxc'"):
        backend_module("lxc")


def test_local_daemon_pid(tmp_path: Path) -> None:
    """Liveness read from this machine's pid files and /proc, as the namespace hosts do."""
    import os
    import subprocess
    import time

    from kraftlab.control.shell import local_daemon_pid, pid_file

    workdir = str(tmp_path)
    assert local_daemon_pid(workdir, "d") is None  # no pid file
    Path(pid_file(workdir, "d")).parent.mkdir(parents=True)
    Path(pid_file(workdir, "d")).write_text(f"{os.getpid()}\n")
    assert local_daemon_pid(workdir, "d") == os.getpid()
    Path(pid_file(workdir, "d")).write_text("not a pid\n")
    assert local_daemon_pid(workdir, "d") is None
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":  # exited, not reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    Path(pid_file(workdir, "d")).write_text(f"{child.pid}\n")
    assert local_daemon_pid(workdir, "d") is None  # a zombie is not running
    child.wait()
    assert local_daemon_pid(workdir, "d") is None  # gone
