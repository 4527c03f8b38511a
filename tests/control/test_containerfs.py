"""The Docker backend's disk-fault filesystem without a Docker engine: the containers' arguments
(privilege only for the holder of a --diskfs lab), where the suite reaches each node's filesystem,
the refusals with their reasons, and the host directories' set-up and removal."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from kraftlab.cli import main
from kraftlab.control import containerfs, containers
from kraftlab.control.containers import WORKDIR, DockerHost
from kraftlab.control.lab import Lab
from kraftlab.control.wheels import FUSE_REQUIREMENTS
from kraftlab.deploy import DeployError, Deployment
from kraftlab.disks import DiskFsError, DiskMounts
from kraftlab.exits import EXIT_BAD_ARGS


def test_holder_gets_fuse_and_the_shared_workdir_the_node_only_receives_mounts() -> None:
    opts = containerfs.holder_options("/h/lab/n1", WORKDIR)
    assert opts == {"binds": [f"/h/lab/n1:{WORKDIR}:rw,rshared"], "devices": ["/dev/fuse:/dev/fuse:rwm"],
                    "cap_add": ["SYS_ADMIN"], "init": True}
    assert containerfs.node_binds("/h/lab/n1", WORKDIR) == [f"/h/lab/n1:{WORKDIR}:rw,rslave"]
    # an engine confining with AppArmor: docker-default denies mount, so the holder (only) goes unconfined
    assert not containerfs.uses_apparmor(["name=seccomp,profile=default"])  # this machine's engine
    assert containerfs.uses_apparmor(["name=apparmor", "name=seccomp,profile=builtin"])
    confined = containerfs.holder_options("/h/lab/n1", WORKDIR, apparmor=True)
    assert confined == {**opts, "security_opt": ["apparmor=unconfined"]}
    assert containerfs.node_dir("lab", "n1") == containerfs.DISK_ROOT / "lab" / "n1"


def test_image_has_fuse3_and_its_tag_follows_the_base() -> None:
    assert "fuse3" in containers.BASE_PACKAGES.split(",")
    assert containers.BASE_IMAGE.startswith("kraftlab-base:bookworm-")
    tag = containers.node_image_tag("abc")
    assert tag.startswith(f"{containers.NODE_REPO}:") and tag == containers.node_image_tag("abc")
    assert tag != containers.node_image_tag("abd")


def test_image_wheels_are_the_fuse_extra() -> None:
    """The node image's filesystem requirements are the project's `fuse` extra (one list, two places)."""
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert list(FUSE_REQUIREMENTS) == project["optional-dependencies"]["fuse"]


def docker_host(name: str, disk_dir: str | None) -> DockerHost:
    return DockerHost(name, "10.0.0.1", f"klx-{name}", disk_dir=disk_dir)


def test_mounts_route_to_the_holder_and_the_socket_is_reached_here() -> None:
    hosts = {"n1": docker_host("n1", "/h/lab/n1"), "n2": docker_host("n2", None)}
    mounts = DiskMounts(hosts.__getitem__, lambda n: "/opt/kraftlab/venv/bin/python")
    assert mounts.supported("n1") and not mounts.supported("n2")
    holder = hosts["n1"].disk_host()
    assert holder.container_name == "klx-n1-net"
    assert holder.workdir == f"{WORKDIR}/holder"  # its pid files (holder pids) apart from the node's
    assert holder.pid1 != hosts["n1"].pid1  # its revival never removes the node's pid file
    assert mounts.socket("n1") == f"{WORKDIR}/diskfs.sock"
    assert mounts._local_socket("n1") == "/h/lab/n1/diskfs.sock"
    with pytest.raises(DiskFsError, match=r"without the disk-fault filesystem.*--diskfs"):
        mounts.mount("n2")


def test_deploy_refuses_diskfs_on_a_docker_lab_not_brought_up_for_it(state_dir: Path) -> None:
    lab = Lab("klx", "docker", [docker_host(f"n{i}", None) for i in (1, 2, 3)])
    d = Deployment.create(lab, topology="combined", diskfs=True)
    with pytest.raises(DeployError, match=r"n1, n2, n3 cannot serve.*lab up --backend docker --diskfs"):
        d.deploy()


def test_lab_up_diskfs_is_for_docker(capsys: pytest.CaptureFixture[str], state_dir: Path) -> None:
    assert main(["lab", "up", "--backend", "netns", "--diskfs", "--name", "klx"]) == EXIT_BAD_ARGS
    assert "--diskfs is for the docker backend" in capsys.readouterr().err
    assert not state_dir.exists() or not any(state_dir.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")
def test_prepare_shares_the_lab_directory_and_release_leaves_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(containerfs, "DISK_ROOT", tmp_path / "disks")
    root = containerfs.prepare("klx", ["n1", "n2"])
    try:
        assert (root / "n1").is_dir() and (root / "n2").is_dir()
        out = subprocess.run(["findmnt", "-n", "-o", "PROPAGATION", str(root)], capture_output=True, text=True)
        assert out.stdout.split()[0] == "shared"
        assert containerfs.prepare("klx", ["n1", "n2"]) == root  # again: still one bind
        assert containerfs._is_mountpoint(root)
    finally:
        gone = containerfs.release("klx")
    assert gone == [str(root)] and not containerfs._is_mountpoint(root) and not root.exists()
    assert containerfs.release(None) == [] and not (tmp_path / "disks").exists()
