"""The network-namespace backend (the default): hosts n1…nN as namespaces on one Linux bridge.

Names: a lab's objects share a prefix `kl` + 5 hex digits of the lab name's hash, so two labs never
collide and `clean` finds leftovers: namespaces `PFX-n1`, host-side veths `PFX-h1`, bridge
`PFX-br`, an iptables FORWARD ACCEPT rule tagged with the comment `kraftlab:PFX`, hosts files in
`/etc/netns/PFX-nI/`, workdirs in `/var/lib/kraftlab/netns/LAB/nI`. The bridge holds the /24's
gateway (.1) so the runner in the root namespace reaches every node; node nI has address .(10+I).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from pyroute2 import IPRoute, NetNS, netns

from kraftlab.control import leftovers, mounts, subnet
from kraftlab.control.host import CommandResult, HostError
from kraftlab.control.identity import HostIdentity
from kraftlab.control.preflight import require_commands, require_root
from kraftlab.control.shell import ShellDaemons, local_daemon_pid
from kraftlab.control.state import HostRecord, LabState, load_state, remove_state, save_state

WORK_ROOT = Path(os.environ.get("KRAFTLAB_NETNS_ROOT", "/var/lib/kraftlab/netns"))
NEEDED = {"ip": "iproute2", "iptables": "iptables", "setsid": "util-linux"}


def lab_prefix(name: str) -> str:
    return "kl" + hashlib.sha1(name.encode()).hexdigest()[:5]


class NetnsHost(HostIdentity, ShellDaemons):
    """A node that is a network namespace on this machine; commands run with `ip netns exec`."""

    def __init__(self, name: str, address: str, namespace: str, workdir: str) -> None:
        super().__init__(name, address, workdir)
        self.namespace = namespace

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        argv = ["ip", "netns", "exec", self.namespace, "sh", "-c", command]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            result = CommandResult(self._name, command, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            result = CommandResult(self._name, command, 124, out, err + f"\ntimed out after {timeout:g}s")
        return result.check() if check else result

    def daemon_pid(self, name: str) -> int | None:
        return local_daemon_pid(self._workdir, name)  # polled often: no `ip netns exec` per question

    def put(self, local_path: str, remote_path: str) -> None:
        _copy(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        if not os.path.exists(remote_path):
            raise HostError(f"{self._name}: no such file {remote_path}")
        _copy(remote_path, local_path)

    def close(self) -> None:
        pass


def _copy(src: str, dest: str) -> None:
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    if os.path.isdir(src):
        shutil.copytree(src, dest, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)


def open_hosts(state: LabState) -> list[NetnsHost]:
    return [NetnsHost(h.name, h.address, str(h.extra["namespace"]), h.workdir) for h in state.hosts]


def up(name: str, nodes: int = 5) -> LabState:
    """Create the lab; on any failure remove what was created and re-raise."""
    require_root("the netns backend")
    require_commands(NEEDED)
    if not 1 <= nodes <= 200:
        raise ValueError("--nodes must be between 1 and 200")
    prefix = lab_prefix(name)
    found = leftovers.find(prefix)
    if found:
        raise HostError(f"lab {name}: objects with prefix {prefix} already exist ({found.summary()}); "
                        f"`kraftlab lab down --name {name}` or `kraftlab clean --lab {name}` removes them")
    bridge = f"{prefix}-br"
    try:
        with subnet.allocation_lock():
            net = subnet.pick_free(name)
            state = LabState(name=name, backend="netns", hosts=[], created=time.time(),
                             info={"prefix": prefix, "subnet": str(net), "bridge": bridge,
                                   "gateway": str(net[1]), "status": "creating"})
            save_state(state)
            with IPRoute() as ipr:
                ipr.link("add", ifname=bridge, kind="bridge")
                br = ipr.link_lookup(ifname=bridge)[0]
                ipr.addr("add", index=br, address=str(net[1]), prefixlen=24)
                ipr.link("set", index=br, state="up")
        _iptables("-I", "FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", f"kraftlab:{prefix}",
                  "-j", "ACCEPT")
        names = [f"n{i}" for i in range(1, nodes + 1)]
        addresses = {n: str(net[10 + i]) for i, n in enumerate(names, start=1)}
        # the machine's hostname too: namespaces share it, and tools that resolve it (sudo) would wait on DNS
        me = socket.gethostname()
        hosts_file = ("127.0.0.1\tlocalhost\n" + ("" if me in addresses else f"127.0.1.1\t{me}\n")
                      + "".join(f"{a}\t{n}\n" for n, a in addresses.items()))
        with IPRoute() as ipr:
            br = ipr.link_lookup(ifname=bridge)[0]
            for i, n in enumerate(names, start=1):
                ns = f"{prefix}-{n}"
                workdir = WORK_ROOT / name / n
                workdir.mkdir(parents=True, exist_ok=True)
                etc = Path("/etc/netns") / ns
                etc.mkdir(parents=True, exist_ok=True)
                (etc / "hosts").write_text(hosts_file)
                (etc / "hostname").write_text(n + "\n")
                netns.create(ns)
                _plumb(ipr, br, ns, f"{prefix}-h{i}", f"{prefix}-p{i}", addresses[n], str(net[1]))
                state.hosts.append(HostRecord(n, addresses[n], str(workdir), {"namespace": ns}))
        state.info["status"] = "up"
        save_state(state)
        return state
    except BaseException:
        leftovers.remove(prefix)
        remove_state(name)
        shutil.rmtree(WORK_ROOT / name, ignore_errors=True)
        raise


def _plumb(ipr: IPRoute, bridge_index: int, ns: str, host_if: str, peer_if: str, address: str, gateway: str) -> None:
    ipr.link("add", ifname=host_if, kind="veth", peer={"ifname": peer_if, "net_ns_fd": ns})
    h = ipr.link_lookup(ifname=host_if)[0]
    ipr.link("set", index=h, master=bridge_index, state="up")
    with NetNS(ns) as nsr:
        idx = nsr.link_lookup(ifname=peer_if)[0]
        nsr.link("set", index=idx, ifname="eth0")
        nsr.addr("add", index=idx, address=address, prefixlen=24)
        nsr.link("set", index=idx, state="up")
        nsr.link("set", index=nsr.link_lookup(ifname="lo")[0], state="up")
        nsr.route("add", dst="0.0.0.0/0", gateway=gateway)


def down(name: str) -> None:
    """Remove every trace of the lab (by its prefix), its workdirs and its state file."""
    prefix = lab_prefix(name)
    with contextlib.suppress(LookupError):
        prefix = str(load_state(name).info.get("prefix", prefix))
    leftovers.remove(prefix)
    mounts.unmount_under(WORK_ROOT / name)  # before the workdirs: rm cannot remove a (dead) mount point
    shutil.rmtree(WORK_ROOT / name, ignore_errors=True)
    remove_state(name)


def _iptables(*args: str) -> None:
    subprocess.run(["iptables", "-w", "10", *args], check=True, capture_output=True, text=True)
