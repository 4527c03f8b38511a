"""The Vagrant backend: `vagrant up` in vagrant/ (five Debian 12 VMs), then `vagrant ssh-config` turned
into a nodes file, then the SSH backend. Host keys are verified against a known_hosts file of the
lab's own (next to its state file); the first `lab up` needs --accept-new-host-keys to record them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from kraftlab.control import nodesfile, ssh
from kraftlab.control.host import HostError
from kraftlab.control.preflight import require_commands
from kraftlab.control.state import LabState, load_state, remove_state, state_dir
from kraftlab.control.wheels import build_wheelhouse

VAGRANT_DIR = Path(__file__).resolve().parent.parent / "vagrant"
DEFAULT_SUBNET = "192.168.56"


def addresses(nodes: int, subnet: str | None = None) -> dict[str, str]:
    """The private-network address of each VM, as the Vagrantfile assigns them."""
    prefix = subnet or os.environ.get("KRAFTLAB_VM_SUBNET", DEFAULT_SUBNET)
    return {f"n{i}": f"{prefix}.{10 + i}" for i in range(1, nodes + 1)}


def _vagrant(args: list[str], cwd: Path, env: dict[str, str], capture: bool = False) -> str:
    r = subprocess.run(["vagrant", *args], cwd=cwd, env=env, text=True,
                       stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if r.returncode != 0:
        why = (r.stderr or "").strip()[-1500:]
        raise HostError(f"`vagrant {' '.join(args)}` in {cwd} exited {r.returncode}: {why}")
    return r.stdout or ""


def nodes_from_ssh_config(text: str, nodes: int, known_hosts: str) -> list[nodesfile.NodeEntry]:
    entries = nodesfile.from_ssh_config(text, addresses(nodes), {"known_hosts": known_hosts})
    return [e for e in entries if re.fullmatch(r"n\d+", e.name)]


def up(name: str, nodes: int = 5, *, vagrant_dir: str | Path = VAGRANT_DIR,
       accept_new_host_keys: bool = False) -> LabState:
    require_commands({"vagrant": "vagrant"})
    vdir = Path(vagrant_dir).resolve()
    env = dict(os.environ, KRAFTLAB_VM_NODES=str(nodes))
    wheels = vdir / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    build_wheelhouse(wheels)
    _vagrant(["up"], vdir, env)
    config = _vagrant(["ssh-config"], vdir, env, capture=True)
    known_hosts = str(state_dir() / f"{name}.known_hosts")
    entries = nodes_from_ssh_config(config, nodes, known_hosts)
    nodes_file = state_dir() / f"{name}.nodes"
    nodes_file.parent.mkdir(parents=True, exist_ok=True)
    nodes_file.write_text(nodesfile.render(entries))
    return ssh.connect_all(name, "vagrant", entries, accept_new_host_keys,
                           {"vagrant_dir": str(vdir), "nodes_file": str(nodes_file), "status": "up"})


def open_hosts(state: LabState) -> list[ssh.SshHost]:
    return ssh.open_hosts(state)


def down(name: str) -> None:
    try:
        state = load_state(name)
    except LookupError:
        return
    ssh.stop_daemons(state)
    vdir = Path(str(state.info.get("vagrant_dir", VAGRANT_DIR)))
    env = dict(os.environ, KRAFTLAB_VM_NODES=str(len(state.hosts)))
    _vagrant(["destroy", "-f"], vdir, env)
    remove_state(name)
    for suffix in (".nodes", ".known_hosts"):
        (state_dir() / f"{name}{suffix}").unlink(missing_ok=True)
