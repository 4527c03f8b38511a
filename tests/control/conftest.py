"""Fixtures for control tests: a private lab state directory, unique lab names, a namespace lab,
real sshd servers in five namespaces with an SSH lab over them, and a Docker engine."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlab.control import sshd_lab
from kraftlab.control.lab import Lab
from kraftlab.control.labs import clean, lab_down, lab_up
from kraftlab.control.preflight import SetupError


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "labs"
    monkeypatch.setenv("KRAFTLAB_STATE_DIR", str(d))
    return d


@pytest.fixture
def lab_name() -> str:
    return "t" + secrets.token_hex(4)


@pytest.fixture
def netns_lab(state_dir: Path, lab_name: str) -> Iterator[Lab]:
    """A five-host namespace lab, removed afterwards whatever happens."""
    lab = lab_up(lab_name, "netns", 5)
    try:
        yield lab
    finally:
        lab.close()
        clean(lab_name)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Path]]:
    """Five namespaces running sshd; yields the namespace lab and the nodes file."""
    state = tmp_path_factory.mktemp("labs")
    old = os.environ.get("KRAFTLAB_STATE_DIR")
    os.environ["KRAFTLAB_STATE_DIR"] = str(state)
    name = "s" + secrets.token_hex(4)
    key_dir = Path("/run/kraftlab") / f"test-ssh-{name}"  # not under world-writable /tmp: StrictModes
    lab = lab_up(name, "netns", 5)
    try:
        yield lab, sshd_lab.start(lab, key_dir)
    finally:
        lab.close()
        clean(name)
        shutil.rmtree(key_dir, ignore_errors=True)
        if old is None:
            os.environ.pop("KRAFTLAB_STATE_DIR", None)
        else:
            os.environ["KRAFTLAB_STATE_DIR"] = old


@pytest.fixture(scope="module")
def ssh_lab(sshd: tuple[Lab, Path]) -> Iterator[Lab]:
    _, nodes_file = sshd
    name = "h" + secrets.token_hex(4)
    lab = lab_up(name, "ssh", nodes_file=str(nodes_file), accept_new_host_keys=True)
    try:
        yield lab
    finally:
        lab.close()
        lab_down(name)


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    """A Docker engine: the one running, or one started (and stopped afterwards) for the module."""
    from kraftlab.control import containers

    if not shutil.which("dockerd"):
        r = subprocess.run("apt-get install -y -qq --no-install-recommends docker.io", shell=True,
                           capture_output=True, text=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if r.returncode != 0:
            pytest.skip(f"docker.io could not be installed: {r.stderr.strip()[-300:]}")
    try:
        proc = containers.start_engine()
    except SetupError as exc:
        pytest.skip(f"the Docker engine cannot start here: {exc}")
    try:
        yield
    finally:
        containers.stop_engine(proc)
