"""Deploying the real node: installed over SSH (wheel + virtualenv on sshd-in-namespace hosts) and
formatted; and a five-node cluster on namespaces and over SSH that elects a leader and unfences its
brokers, survives kill/restart, and leaves its logs collected (skipped only while modules of the
node itself are missing: it is written in parallel)."""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from control import leftovers
from control.lab import Lab
from control.labs import clean, lab_down, lab_up
from control.netns import lab_prefix
from control.nodesfile import NodeEntry, read, render
from kraftlab.deploy import DeployError, Deployment, random_cluster_id

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def run_cluster(lab: Lab, tmp_path: Path) -> Deployment:
    d = Deployment.create(lab, cluster_id=random_cluster_id())
    try:
        d.deploy(wait=60)
    except DeployError as exc:
        missing = re.search(r"(ImportError|ModuleNotFoundError): .*", str(exc))
        if missing:  # the node is being written in parallel: an unfinished node is not a deploy failure
            pytest.skip(f"the node does not start yet: {missing.group(0)}")
        raise
    leader = d.active_controller()
    assert leader in d.controllers()
    d.kill(leader)
    assert not d.running(leader)
    d.start(leader)
    d.wait_healthy(60)
    d.pause("n5")
    d.resume("n5")
    d.stop_all()
    assert not any(d.running(n) for n in d.nodes())
    got = d.collect(tmp_path / "nodes")
    assert all({"kraft-node.log", "journal.jsonl", "server.properties"} <= set(files) for files in got.values()), got
    assert "node.id=4" in (tmp_path / "nodes" / "n4" / "server.properties").read_text()
    journal = (tmp_path / "nodes" / leader / "journal.jsonl").read_text()
    assert '"role"' in journal and '"leader"' in journal
    return d


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
