"""Deploying the real node: installed over SSH (wheel + virtualenv on sshd-in-namespace hosts) and
formatted; and a five-node cluster on namespaces and over SSH that elects a leader and unfences its
brokers, survives kill/restart, and leaves its logs collected (skipped only while modules of the
node itself are missing: it is written in parallel)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cluster_checks import run_cluster

from kraftlab.control import leftovers
from kraftlab.control.lab import Lab
from kraftlab.control.labs import clean, lab_down, lab_up
from kraftlab.control.netns import lab_prefix
from kraftlab.control.nodesfile import NodeEntry, read, render

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


@pytest.mark.e2e
def test_netns_cluster(state_dir: Path, lab_name: str, tmp_path: Path) -> None:
    lab = lab_up(lab_name, "netns", 5)
    try:
        run_cluster(lab, tmp_path)
    finally:
        lab.close()
        clean(lab_name)
    assert not leftovers.find(lab_prefix(lab_name))


@contextmanager
def ssh_lab_with(nodes_file: Path, tmp_path: Path, **options: str) -> Iterator[Lab]:
    """An SSH lab over the sshd servers, from their nodes file with extra options on every line."""
    entries = [NodeEntry(e.name, e.host, e.port, e.user, e.key, {**e.options, **options})
               for e in read(str(nodes_file))]
    variant = tmp_path / "nodes-file"
    variant.write_text(render(entries))
    name = "h" + secrets.token_hex(4)
    lab = lab_up(name, "ssh", nodes_file=str(variant), accept_new_host_keys=True)
    try:
        yield lab
    finally:
        lab.close()
        lab_down(name)


@pytest.mark.e2e
def test_ssh_cluster(sshd: tuple[Lab, Path], tmp_path: Path) -> None:
    """Over real SSH, with the project already installed (this machine's venv, as `venv=` says)."""
    with ssh_lab_with(sshd[1], tmp_path, venv=sys.prefix) as lab:
        d = run_cluster(lab, tmp_path)
        assert d.kraft_node("n2") == f"{sys.prefix}/bin/kraft-node"


@pytest.mark.e2e
@pytest.mark.slow
def test_ssh_cluster_installed_from_wheels(sshd: tuple[Lab, Path], tmp_path: Path) -> None:
    """As on VMs: the project installed from wheels into a venv on each host."""
    with ssh_lab_with(sshd[1], tmp_path) as lab:
        d = run_cluster(lab, tmp_path)
        assert d.kraft_node("n1") == f"{lab.host('n1').workdir}/venv/bin/kraft-node"
        info = lab.run(f"{d.kraft_node('n1')} info --config {d.paths('n1').config}")
        assert all(d.state.cluster_id in r.stdout + r.stderr for r in info.values()), info
