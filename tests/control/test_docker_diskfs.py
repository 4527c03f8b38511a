"""The disk-fault filesystem on the Docker backend, against a real engine: a `--diskfs` lab's nodes
have their metadata directory on it (served from each node's holder container), a power loss of a
node (its container's PID 1 killed) drops what it never fsynced and keeps what it did, the node
starts again onto the same filesystem, and `kraftlab clean` of a lab left running (as after a
killed run) leaves no container, mount or directory behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from node_logs import logs_on_failure

from kraftlab.cli import main
from kraftlab.control import containerfs
from kraftlab.control.labs import clean, lab_up
from kraftlab.control.mounts import FUSE_TYPE

pytestmark = [pytest.mark.docker, pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0, reason="starting dockerd needs root")]

# in the node's container: a file fsynced with its directory entry, then an append and a new file never fsynced
WRITE = """python3 - {d} <<'EOF'
import os, sys
d = sys.argv[1]
fd = os.open(f"{{d}}/probe.synced", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"kept")
os.fsync(fd)
dfd = os.open(d, os.O_RDONLY)
os.fsync(dfd)
os.write(fd, b"+lost")
os.close(fd)
with open(f"{{d}}/probe.unsynced", "wb") as f:
    f.write(b"lost")
EOF
"""


def host_mounts_under(root: Path) -> list[str]:
    lines = Path("/proc/mounts").read_text().splitlines()
    return [f[1] for f in (line.split() for line in lines) if f[1] == str(root) or f[1].startswith(f"{root}/")]


def test_diskfs_lab_power_loss_and_clean(engine: None, state_dir: Path, lab_name: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlab.control.containers import LABEL, DockerHost, client
    from kraftlab.deploy import Deployment

    lab = lab_up(lab_name, "docker", 3, diskfs=True)
    try:
        d = Deployment.create(lab, topology="combined", diskfs=True)
        with logs_on_failure(d):  # a node that exits is read before the cleanup removes it
            d.deploy(wait=90)
            for n in lab.names:  # each node's container sees its holder's mount
                h = lab.host(n)
                assert isinstance(h, DockerHost) and h.disk_dir is not None
                mounted = h.run(f"grep ' {d.paths(n).metadata_dir} {FUSE_TYPE} ' /proc/mounts")
                assert mounted.ok, h.run("cat /proc/mounts").stdout
                assert not h.run("test -c /dev/fuse").ok  # the node's container has no FUSE of its own
                assert h.disk_host().run("test -c /dev/fuse").ok
            assert main(["lab", "status", "--name", lab_name]) == 0  # the holders' daemons are listed with the node's
            rows = [line for line in capsys.readouterr().out.splitlines() if len(line.split("\t")) == 3]  # host rows
            assert len(rows) == 3 and all("kraft-node[1] running" in r and "kraftlab-diskfs[" in r for r in rows), rows
            node = next(n for n in lab.names if n != d.active_controller())
            mnt = d.paths(node).metadata_dir
            lab.host(node).run(WRITE.format(d=mnt), check=True)

            lost = d.power_off(node)
            assert lost is not None and lost["ok"], lost
            assert "probe.unsynced" in lost["entries_removed"] and "probe.synced" not in lost["entries_removed"], lost
            assert any(f.endswith("probe.synced") for f in lost["files_rolled_back"]), lost
            assert lost["bytes_dropped"] == len("+lost"), lost  # the removed file is not counted in bytes
            assert not d.running(node)
            assert d.disks is not None
            d.disks.unmount(node)  # the filesystem stopped and served again: what was durable stays
            d.disks.mount(node)
            node_host = lab.host(node)
            assert isinstance(node_host, DockerHost)
            zombies = node_host.disk_host().run("ps -eo stat= | grep -c '^Z'").stdout.strip()
            assert zombies == "0"  # the holder's init reaped the daemon that stopped

            d.start(node)  # its container again: the holder's mount is received anew
            d.wait_healthy(90)
            h = lab.host(node)
            assert h.run(f"cat {mnt}/probe.synced", check=True).stdout == "kept"
            assert not h.run(f"test -e {mnt}/probe.unsynced").ok
            assert h.run(f"test -f {mnt}/meta.properties").ok

        # a run killed with everything up: clean alone takes it all away
        root = containerfs.lab_root(lab_name)
        assert host_mounts_under(root)
        lab.close()
        clean(lab_name)
        assert not client().containers.list(all=True, filters={"label": f"{LABEL}={lab_name}"})
        assert host_mounts_under(root) == [] and not root.exists()
    finally:
        lab.close()
        clean(lab_name)
