"""Real sshd servers inside a namespace lab: the stand-in for VMs that tests and benches of the SSH
backend use. Generates a client key and one host key per node in a private directory (mode 700,
never under a world-writable path, so sshd's StrictModes accepts it), writes one sshd config per
node (its own PidFile, UsePAM no, key-only login) and starts `sshd -D` as a daemon of each
namespace host, so the lab's teardown stops them. Returns the nodes file the SSH backend reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kraftlab.control.host import HostError
from kraftlab.control.lab import Lab
from kraftlab.control.nodesfile import NodeEntry, render

SSHD = "/usr/sbin/sshd"

CONFIG = """\
Port 22
ListenAddress {address}
HostKey {dir}/host_{name}
AuthorizedKeysFile {dir}/authorized_keys .ssh/authorized_keys
PidFile {dir}/sshd_{name}.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes yes
Subsystem sftp internal-sftp
LogLevel ERROR
"""


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kraftlab-test", "-f", str(path)],
                   check=True, capture_output=True)


def start(lab: Lab, key_dir: Path, known_hosts: Path | None = None, venv: str | None = None) -> Path:
    """Start sshd on every host of a namespace lab; returns the path of the nodes file (in key_dir).
    The host keys are not in known_hosts: the first connection needs accept_new_host_keys. With
    `venv`, the nodes file says the project is already installed there (this machine's venv)."""
    if not os.path.exists(SSHD):
        raise HostError("sshd is missing: `apt-get install -y openssh-server`")
    key_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(key_dir, 0o700)
    keygen(key_dir / "id_ed25519")
    shutil.copy(key_dir / "id_ed25519.pub", key_dir / "authorized_keys")
    os.chmod(key_dir / "authorized_keys", 0o600)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    entries = []
    for h in lab.hosts:
        keygen(key_dir / f"host_{h.name}")
        conf = key_dir / f"sshd_{h.name}.conf"
        conf.write_text(CONFIG.format(address=h.address, dir=key_dir, name=h.name))
        subprocess.run([SSHD, "-t", "-f", str(conf)], check=True, capture_output=True)
        options = {"workdir": f"{h.workdir}/ssh", "known_hosts": str(known_hosts or key_dir / "known_hosts")}
        if venv:
            options["venv"] = venv
        entries.append(NodeEntry(h.name, h.address, 22, "root", str(key_dir / "id_ed25519"), options))
    lab.on(None, lambda h: h.start_daemon("sshd", f"{SSHD} -D -e -f {key_dir}/sshd_{h.name}.conf",
                                          log_path=f"{h.workdir}/sshd.log"))
    wait = "i=0; until ss -ltn | grep -q ':22 '; do sleep 0.01; i=$((i+1)); [ $i -le 500 ] || exit 1; done"
    lab.run(wait, check=True, timeout=15)
    nodes_file = key_dir / "nodes"
    nodes_file.write_text(render(entries))
    return nodes_file
