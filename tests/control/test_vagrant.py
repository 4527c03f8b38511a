"""vagrant/: the Vagrantfile parses (`ruby -c`) and validates (`vagrant validate`, installed from Debian
when missing), its addresses agree with the backend's, `lab up/down --backend vagrant` works against
a stand-in `vagrant` whose VMs are sshd namespaces, and provision.sh runs twice in a Debian chroot
(idempotent) after which a single combined node starts there and becomes leader (slow)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlab.control import vagrant

VDIR = Path(__file__).resolve().parents[2] / "vagrant"


def ensure_vagrant() -> None:
    if shutil.which("vagrant"):
        return
    if os.geteuid() != 0:
        pytest.skip("vagrant is not installed and installing it needs root")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run("apt-get update -qq && apt-get install -y -qq --no-install-recommends vagrant", shell=True,
                       env=env, capture_output=True, text=True)
    if r.returncode != 0 or not shutil.which("vagrant"):
        pytest.skip(f"installing vagrant failed: {r.stderr.strip()[-300:]}")


@pytest.fixture
def vcopy(tmp_path: Path) -> Path:
    """The Vagrantfile and provision.sh copied out, so validate's .vagrant/ stays out of the tree."""
    for f in ("Vagrantfile", "provision.sh"):
        shutil.copy(VDIR / f, tmp_path / f)
    return tmp_path


def validate(d: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=d, capture_output=True, text=True,
                          env={**os.environ, "VAGRANT_CHECKPOINT_DISABLE": "1", **env}, timeout=120)


def test_ruby_syntax() -> None:
    if not shutil.which("ruby"):
        pytest.skip("ruby is not installed (apt-get install -y ruby)")
    r = subprocess.run(["ruby", "-c", str(VDIR / "Vagrantfile")], capture_output=True, text=True)
    assert r.returncode == 0 and "Syntax OK" in r.stdout, r.stderr


def test_provision_script_syntax() -> None:
    subprocess.run(["sh", "-n", str(VDIR / "provision.sh")], check=True)


def test_vagrant_validate(vcopy: Path) -> None:
    ensure_vagrant()
    r = validate(vcopy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [f"n{i}" for i in range(1, 6)] == re.findall(r"==> (n\d+):", r.stdout)
    r3 = validate(vcopy, KRAFTLAB_VM_NODES="3", KRAFTLAB_VM_MEMORY="2048", KRAFTLAB_VM_CPUS="2")
    assert r3.returncode == 0 and re.findall(r"==> (n\d+):", r3.stdout) == ["n1", "n2", "n3"]


def test_vagrant_validate_catches_errors(vcopy: Path) -> None:
    ensure_vagrant()
    text = (vcopy / "Vagrantfile").read_text()
    (vcopy / "Vagrantfile").write_text(text.replace('node.vm.hostname = "n#{i}"',
                                                    'node.vm.hostname = "n#{i}"\n      node.vm.no_such_option = 1'))
    assert validate(vcopy).returncode != 0


def test_addresses_agree_with_the_vagrantfile() -> None:
    text = (VDIR / "Vagrantfile").read_text()
    subnet = re.search(r'KRAFTLAB_VM_SUBNET", "([\d.]+)"', text)
    offset = re.search(r'"#\{SUBNET\}\.#\{(\d+) \+ i\}"', text)
    assert subnet and offset
    assert vagrant.addresses(5) == {f"n{i}": f"{subnet.group(1)}.{int(offset.group(1)) + i}" for i in range(1, 6)}
    assert 'synced_folder ".", "/vagrant", disabled: !SYNC' in text and ":libvirt" in text and ":virtualbox" in text


@pytest.fixture
def chroot(tmp_path: Path) -> Iterator[Path]:
    """A Debian 12 minbase root (debootstrap), with /proc mounted; unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap (apt-get install -y debootstrap)")
    from kraftlab.control.containers import BASE_PACKAGES, apt_mirror

    root = Path("/var/tmp") / f"kraftlab-provision-{os.getpid()}-{tmp_path.name}"
    r = subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(root),
                        apt_mirror()], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"debootstrap failed (no mirror?): {r.stderr.strip()[-300:]}")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root / "proc")])
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_provision_twice_in_a_chroot(chroot: Path, state_dir: Path, tmp_path: Path) -> None:
    from kraftlab.control.wheels import build_wheelhouse

    build_wheelhouse(chroot / "tmp" / "kraftlab-wheels")
    shutil.copy(VDIR / "provision.sh", chroot / "provision.sh")
    hosts = ["192.168.56.11=n1", "192.168.56.12=n2"]
    outputs = []
    for _ in range(2):
        r = subprocess.run(["chroot", str(chroot), "sh", "/provision.sh", *hosts], capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        outputs.append(r.stdout)
    assert "installing" in outputs[0] and "installing" not in outputs[1]  # the second run changes nothing
    assert (chroot / "etc/hosts").read_text().count("192.168.56.12\tn2") == 1
    assert "NOPASSWD" in (chroot / "etc/sudoers.d/kraftlab").read_text()
    r = subprocess.run(["chroot", str(chroot), "sh", "-c", "id kraftlab && /var/lib/kraftlab/venv/bin/kraft-node "
                        "random-uuid"], capture_output=True, text=True)
    assert r.returncode == 0 and re.search(r"^[A-Za-z0-9_-]{22}$", r.stdout.splitlines()[-1]), r.stderr
    start_single_node(chroot, tmp_path)


def start_single_node(root: Path, tmp_path: Path) -> None:
    """The node as provisioned: one combined broker+controller (one voter) in the tree, on the loopback of
    its own network namespace, formatted, started, leader with its broker unfenced, then stopped."""
    from chroot_host import ChrootHost

    from kraftlab.control.lab import Lab
    from kraftlab.deploy import Deployment

    host = ChrootHost("n1", root, "klchroot-" + os.urandom(4).hex())
    lab = Lab("chroot-" + os.urandom(4).hex(), "chroot", [host])
    try:
        d = Deployment.create(lab, topology="combined")
        assert d.kraft_node("n1") == "/var/lib/kraftlab/venv/bin/kraft-node"  # where provision.sh put it
        d.deploy(wait=60)
        assert d.active_controller() == "n1" and d.health()[0]
        assert host.processes()  # the node runs inside the tree
        d.stop("n1")
        assert not d.running("n1") and not host.processes()
        got = d.collect(tmp_path / "nodes")
        assert {"kraft-node.log", "journal.jsonl", "server.properties"} <= set(got["n1"])
    finally:
        lab.close()
    assert not host.processes()
    assert host.namespace not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_vagrant_backend_flow(sshd: tuple[object, Path], state_dir: Path, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab up/down --backend vagrant` with a stand-in `vagrant` whose VMs are the sshd namespaces:
    wheels built into the folder, `vagrant up`, ssh-config → nodes file, host keys recorded only
    with the flag, then `vagrant destroy -f` on down."""
    from kraftlab.cli import main
    from kraftlab.control.labs import lab_down, lab_up
    from kraftlab.control.nodesfile import read
    from kraftlab.control.state import load_state

    _, nodes_file = sshd
    entries = read(str(nodes_file))
    config = "".join(f"Host {e.name}\n  HostName {e.host}\n  User {e.user}\n  Port {e.port}\n"
                     f"  UserKnownHostsFile /dev/null\n  IdentityFile {e.key}\n\n" for e in entries)
    bin_dir, vdir, calls = tmp_path / "bin", tmp_path / "vagrant", tmp_path / "calls"
    bin_dir.mkdir()
    vdir.mkdir()
    (tmp_path / "ssh-config").write_text(config)
    fake = bin_dir / "vagrant"
    fake.write_text(f"#!/bin/sh\necho \"$KRAFTLAB_VM_NODES $*\" >> {calls}\n"
                    f"[ \"$1\" = ssh-config ] && cat {tmp_path}/ssh-config\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("KRAFTLAB_VM_SUBNET", entries[0].host.rsplit(".", 1)[0])  # the namespaces' /24: .11 …
    name = "v" + os.urandom(4).hex()
    with pytest.raises(Exception, match="unknown host key"):
        lab_up(name, "vagrant", 5, vagrant_dir=str(vdir))
    lab = lab_up(name, "vagrant", 5, vagrant_dir=str(vdir), accept_new_host_keys=True)
    try:
        assert list((vdir / "wheels").glob("kraftlab-*.whl"))
        assert lab.addresses() == {e.name: e.host for e in entries}
        assert {n: r.stdout for n, r in lab.run("id -u").items()} == {e.name: "0\n" for e in entries}
        written = read(str(state_dir / f"{name}.nodes"))
        assert [(e.name, e.host, e.address) for e in written] == [(e.name, e.host, e.host) for e in entries]
        assert load_state(name).backend == "vagrant"
    finally:
        lab.close()
        assert main(["lab", "down", "--name", name]) == 0
    assert calls.read_text().splitlines() == ["5 up", "5 ssh-config", "5 up", "5 ssh-config", "5 destroy -f"]
    assert not (state_dir / f"{name}.nodes").exists() and not (state_dir / f"{name}.known_hosts").exists()
    lab_down(name)  # already gone: nothing to do
