"""The Docker backend (docker SDK): hosts n1…nN are containers on a user-defined bridge network with
fixed addresses and NET_ADMIN (so nemesis iptables rules work inside).

Images are built offline: `kraftlab-base:bookworm` from a debootstrap minbase root (cached: built
once, about 45 s), then `kraftlab-node:<digest of the project's sources>`, a layer with the
project's wheels installed in a venv at /opt/kraftlab/venv. The node is each container's PID 1: a
tiny launcher idles as PID 1 (reaping orphans) until the node is started, then execs it; signals
(TERM/KILL/STOP/CONT) go to PID 1 with the Docker API, so they mean exactly what they say, and when
the node exits the container stops. Restarting the node starts the same container again, with the
same workdir volume (data, logs, config), in the same network namespace: that belongs to a holder
container (`…-nI-net`, a `sleep`), so the address and any nemesis iptables rules outlive the node.
Other daemons are started with `docker exec` through the shared shell scripts, each in its own session.
Every object carries the label `kraftlab.lab=NAME`; `remove_lab_objects` finds them by it.
A lab brought up for the disk-fault filesystem (`diskfs=True`) has its workdirs on this machine and
its holders serve the filesystem: control/containerfs.py says how and why.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from kraftlab.control import containerfs, subnet
from kraftlab.control.host import CommandResult, HostError
from kraftlab.control.identity import HostIdentity
from kraftlab.control.netns import lab_prefix
from kraftlab.control.preflight import SetupError, require_commands, require_root
from kraftlab.control.shell import ShellDaemons, pid_file
from kraftlab.control.state import HostRecord, LabState, remove_state, save_state
from kraftlab.control.wheels import FUSE_REQUIREMENTS, build_wheelhouse, source_digest

NODE_REPO = "kraftlab-node"
BASE_REPO = "kraftlab-base"
# fuse3: libfuse3 for pyfuse3 and fusermount3, for the disk-fault filesystem (used only by --diskfs labs)
BASE_PACKAGES = "python3,python3-venv,iproute2,iptables,procps,fuse3"
BASE_IMAGE = f"{BASE_REPO}:bookworm-{hashlib.sha256(BASE_PACKAGES.encode()).hexdigest()[:8]}"
WORKDIR = "/var/lib/kraftlab"
LABEL = "kraftlab.lab"
PID1_DAEMON = "kraft-node"  # the daemon that runs as the container's PID 1
PRUNE_AFTER_S = 24 * 3600.0  # node images older than this (and unused) are removed after a build
HOLDER_SUFFIX = "-net"  # the container holding node NAME's network namespace is NAME-net
HOLDER_PID1 = "sleep"  # the holder's command (no daemon of that name is started)
LAUNCH_FILE = "pid1.sh"  # <workdir>/run/pid1.sh: the command the launcher execs
LAUNCHER_MARK = "# kraftlab-launcher"
# PID 1 until the node starts: removes the node's pid file left by an earlier run of the container, reaps
# orphans, exits on SIGTERM (`docker stop`), and on SIGUSR1 (or every second) looks for the launch file;
# found, it execs `sh FILE`, which writes the pid file and execs the node: the node is PID 1.
LAUNCHER = f"""{LAUNCHER_MARK}
import os, signal, sys
path, pid_file = sys.argv[1:3]
if os.path.exists(pid_file):
    os.remove(pid_file)
def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
signal.signal(signal.SIGCHLD, reap)
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})
while not os.path.exists(path):
    signal.sigtimedwait({{signal.SIGUSR1}}, 1.0)
os.rename(path, path + ".taken")
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGUSR1}})
for s in (signal.SIGTERM, signal.SIGCHLD):
    signal.signal(s, signal.SIG_DFL)
os.execv("/bin/sh", ["sh", path + ".taken"])
"""
DOCKERD_LOG = "/var/log/kraftlab-dockerd.log"


def client() -> Any:
    """A docker client for a running engine, or SetupError saying how to get one."""
    import docker

    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except Exception as exc:  # the SDK raises several kinds for a missing socket
        raise SetupError(f"the Docker daemon is not running ({exc.__class__.__name__}); start it (`dockerd &` "
                         "or `systemctl start docker`), or install it with `apt-get install -y docker.io`") from None


def start_engine(timeout: float = 30.0) -> subprocess.Popen[bytes] | None:
    """Start dockerd (without touching the host's iptables) unless one answers; returns the process
    started, or None if one was already running. The caller stops what it started."""
    try:
        client()
        return None
    except SetupError:
        pass
    require_root("starting dockerd")
    require_commands({"dockerd": "docker.io", "containerd": "containerd"})
    log = open(DOCKERD_LOG, "ab")  # noqa: SIM115 - handed to the daemon
    proc = subprocess.Popen(["dockerd", "--iptables=false", "--ip-masq=false"], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SetupError(f"dockerd exited with {proc.returncode}; see {DOCKERD_LOG}")
        try:
            client()
            return proc
        except SetupError:
            time.sleep(0.2)
    proc.terminate()
    raise SetupError(f"dockerd did not answer within {timeout:g}s; see {DOCKERD_LOG}")


def stop_engine(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def apt_mirror() -> str:
    """The Debian mirror apt uses here (deb822 or one-line sources)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        m = re.search(r"^URIs:\s*(\S+)", path.read_text(), re.M)
        if m:
            return m.group(1)
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in lists:
        if path.exists():
            m = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+\S+\s+main", path.read_text(), re.M)
            if m:
                return m.group(1)
    return "http://deb.debian.org/debian"


def ensure_base_image(c: Any) -> str:
    import docker

    try:
        c.images.get(BASE_IMAGE)
        return BASE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    require_commands({"debootstrap": "debootstrap", "tar": "tar"})
    work = Path(tempfile.mkdtemp(prefix="kraftlab-rootfs-", dir="/var/tmp"))
    try:
        root = work / "root"
        r = subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(root),
                            apt_mirror()], capture_output=True, text=True)
        if r.returncode != 0:
            raise SetupError(f"debootstrap failed: {r.stderr.strip()[-1000:] or r.stdout.strip()[-1000:]}")
        tarball = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
        repo, tag = BASE_IMAGE.split(":")
        c.api.import_image_from_file(str(tarball), repository=repo, tag=tag)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BASE_IMAGE


def ensure_node_image(c: Any, wheelhouse: Path | None = None) -> str:
    """The node image for the current project wheels (built unless an identical one exists)."""
    import docker

    base = ensure_base_image(c)
    tag = node_image_tag(wheels_digest(wheelhouse) if wheelhouse else source_digest())
    try:
        c.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    wheels = wheelhouse or build_wheelhouse(extra=FUSE_REQUIREMENTS)
    with tempfile.TemporaryDirectory(prefix="kraftlab-image-") as ctx:
        shutil.copytree(wheels, Path(ctx) / "wheels")
        (Path(ctx) / "Dockerfile").write_text(
            f"FROM {base}\nCOPY wheels /tmp/wheels\n"
            "RUN python3 -m venv /opt/kraftlab/venv && /opt/kraftlab/venv/bin/pip install -q --no-index --no-deps "
            "/tmp/wheels/*.whl && rm -rf /tmp/wheels\n")
        try:
            c.images.build(path=ctx, tag=tag, network_mode="none", rm=True, forcerm=True)
        except docker.errors.BuildError as exc:
            log = "".join(str(x.get("stream", "")) for x in exc.build_log)
            raise SetupError(f"building {tag} failed: {exc}: {log[-1500:]}") from None
    prune_node_images(c, keep=tag)
    # a base of other packages: Docker refuses while a node image is built on it (pruned after a day)
    prune_node_images(c, keep=base, older_than_s=0.0, repo=BASE_REPO)
    return tag


def node_image_tag(wheels: str) -> str:
    """The node image's tag: its wheels' digest, the base image and the filesystem's requirements."""
    digest = hashlib.sha256(f"{wheels}|{BASE_IMAGE}|{','.join(FUSE_REQUIREMENTS)}".encode()).hexdigest()[:12]
    return f"{NODE_REPO}:{digest}"


def prune_node_images(c: Any, keep: str, older_than_s: float = PRUNE_AFTER_S, now: float | None = None,
                      repo: str = NODE_REPO) -> list[str]:
    """Remove node images (`repo`'s images) other than `keep` built more than `older_than_s` ago: one
    is built per source change (~300 MB), so without this a CI machine's disk fills. A younger image
    may belong to a run of another checkout starting right now; an image a container still uses (or a
    base image a node image is built on) is refused by Docker and kept. Returns the tags removed."""
    import docker

    cutoff = (time.time() if now is None else now) - older_than_s
    removed: list[str] = []
    for image in c.images.list(name=repo):
        tags = [t for t in image.tags if t.startswith(f"{repo}:")]
        if not tags or keep in image.tags or _created_at(image.attrs.get("Created", "")) > cutoff:
            continue
        try:
            c.images.remove(image.id)
        except docker.errors.APIError:  # in use by a container (of a lab still up), or already gone
            continue
        removed.extend(tags)
    return removed


def _created_at(created: str) -> float:
    """Docker's RFC 3339 `Created` (nanoseconds, `Z`) as epoch seconds; unparsable counts as new (kept)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(created).timestamp()
    except ValueError:
        return float("inf")


def wheels_digest(wheels: Path) -> str:
    """A digest of the wheels' contents (not their zip timestamps), so unchanged code reuses its image."""
    digest = hashlib.sha256()
    for w in sorted(wheels.glob("*.whl")):
        digest.update(w.name.encode())
        with zipfile.ZipFile(w) as z:
            for info in sorted(z.infolist(), key=lambda i: i.filename):
                digest.update(f"{info.filename}:{info.CRC}:{info.file_size}".encode())
    return digest.hexdigest()[:12]


class DockerHost(HostIdentity, ShellDaemons):
    """A container. The daemon named `pid1` (the node) runs as the container's PID 1: the launcher
    execs it, so signals sent with the Docker API reach exactly the node, and when it exits the
    container stops. Other daemons run beside it through the shared shell scripts. Commands on a
    stopped container start it again first (the launcher idles: the host is there, the node is not)."""

    def __init__(self, name: str, address: str, container: str, workdir: str = WORKDIR,
                 pid1: str = PID1_DAEMON, disk_dir: str | None = None) -> None:
        super().__init__(name, address, workdir)
        self.container_name = container
        self.pid1 = pid1
        self.disk_dir = disk_dir
        """This machine's directory that is the workdir, when the holder serves the disk-fault filesystem."""
        self._container: Any = None
        self._disk_host: DockerHost | None = None

    def disk_host(self) -> DockerHost:
        """The holder container, where the disk-fault filesystem's daemon runs (control/containerfs.py)."""
        if self.disk_dir is None:
            raise HostError(f"{self._name}: this Docker lab was brought up without the disk-fault filesystem "
                            "(`kraftlab lab up --backend docker --diskfs`, or `kraftlab test --diskfs`)")
        if self._disk_host is None:
            # its daemons' pid files apart from the node's (the workdir is shared; their pids are the holder's)
            self._disk_host = DockerHost(self._name, self.address, f"{self.container_name}{HOLDER_SUFFIX}",
                                         f"{self._workdir}/holder", pid1=HOLDER_PID1)
        return self._disk_host

    def container(self) -> Any:
        import docker

        if self._container is None:
            try:
                self._container = client().containers.get(self.container_name)
            except docker.errors.NotFound:
                raise HostError(f"{self._name}: container {self.container_name} does not exist") from None
        return self._container

    def _exec(self, argv: list[str], *, revive: bool = True) -> tuple[int, bytes | None, bytes | None]:
        """Run argv in the container. A container whose node exited is started again (idle) when revive is
        set; without it, an exec into a stopped container answers code -1 (nothing ran)."""
        import docker

        for attempt in (1, 2):
            try:
                code, (out, err) = self.container().exec_run(argv, demux=True)
                return code, out, err
            except docker.errors.APIError as exc:
                # not running: the node exited (409 at create; 500 "is not running" when it exited between
                # create and start); start the host again
                stopped = exc.status_code == 409 or "is not running" in str(exc)
                if stopped and not revive:
                    return -1, None, None
                if attempt == 1 and stopped:
                    self.container().start()  # idle: the launcher is PID 1, the node's pid file is stale
                    self.container().exec_run(["rm", "-f", pid_file(self._workdir, self.pid1)])
                    continue
                raise HostError(f"{self._name}: docker exec failed: {exc}") from None
            except Exception as exc:
                raise HostError(f"{self._name}: docker exec failed: {exc}") from None
        raise AssertionError("unreachable")

    def run(self, command: str, *, timeout: float = 60.0, check: bool = False) -> CommandResult:
        start = time.monotonic()
        code, out, err = self._exec(["timeout", "-s", "KILL", f"{timeout:g}", "sh", "-c", command])
        stdout, stderr = (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")
        if code == 137 and time.monotonic() - start >= timeout:
            code, stderr = 124, stderr + f"\ntimed out after {timeout:g}s"
        result = CommandResult(self._name, command, code, stdout, stderr)
        return result.check() if check else result

    # -- the PID-1 daemon -------------------------------------------------------------------------

    def _launch_file(self) -> str:
        return f"{self._workdir}/run/{LAUNCH_FILE}"

    def _pid1_is_daemon(self) -> bool:
        c = self.container()
        c.reload()
        if c.status != "running":
            return False
        # 1: not the launcher. A node that exited meanwhile leaves its container stopped (exit code kept)
        # rather than started again by this question
        code, _, _ = self._exec(["grep", "-qF", LAUNCHER_MARK, "/proc/1/cmdline"], revive=False)
        if code == -1:  # the node has exited, but Docker refuses an exec a moment before it reports the
            self._wait_stopped(c)  # container stopped: gone means stopped, so a start or wipe never races it
        return code == 1

    @staticmethod
    def _wait_stopped(c: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while c.status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            c.reload()

    def start_daemon(self, name: str, command: str, *, log_path: str, env: dict[str, str] | None = None) -> int:
        if name != self.pid1:
            return super().start_daemon(name, command, log_path=log_path, env=env)
        if self._pid1_is_daemon():
            raise HostError(f"{self._name}: daemon {name} is already running")
        script = pid1_script(command, log_path, env, pid_file(self._workdir, name))
        launch = shlex.quote(self._launch_file())
        log_dir = shlex.quote(log_path.rsplit("/", 1)[0] or "/")
        self.run(f"mkdir -p {log_dir} {shlex.quote(self._workdir)}/run && cat > {launch}.tmp <<'KRAFTLAB_EOF'\n"
                 f"{script}KRAFTLAB_EOF\nmv {launch}.tmp {launch}", check=True)
        self.container().kill(signal="SIGUSR1")  # wakes the launcher (it also checks the file every second)
        deadline = time.monotonic() + 10.0
        while self.run(f"test -e {launch}").ok:
            if time.monotonic() > deadline:
                raise HostError(f"{self._name}: the container's launcher did not take the command for {name}")
            time.sleep(0.02)
        return 1

    def signal_daemon(self, name: str, sig: signal.Signals) -> bool:
        if name != self.pid1:
            return super().signal_daemon(name, sig)
        if not self._pid1_is_daemon():
            return False
        import docker

        try:
            self.container().kill(signal=sig.name)
        except docker.errors.APIError:  # it exited in between
            return False
        return True

    def daemon_pid(self, name: str) -> int | None:
        if name != self.pid1:
            return super().daemon_pid(name)
        return 1 if self._pid1_is_daemon() else None

    # -- files ------------------------------------------------------------------------------------

    def put(self, local_path: str, remote_path: str) -> None:
        parent, base = os.path.split(remote_path.rstrip("/"))
        self.run(f"mkdir -p '{parent or '/'}'", check=True)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(local_path, arcname=base)
        if not self.container().put_archive(parent or "/", buf.getvalue()):
            raise HostError(f"{self._name}: copying {local_path} to {remote_path} failed")

    def get(self, remote_path: str, local_path: str) -> None:
        import docker

        try:
            bits, _ = self.container().get_archive(remote_path)
        except docker.errors.NotFound:
            raise HostError(f"{self._name}: no such file {remote_path}") from None
        buf = io.BytesIO(b"".join(bits))
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=buf) as tar:
            tar.extractall(tmp, filter="data")
            (entry,) = os.listdir(tmp)
            Path(local_path).parent.mkdir(parents=True, exist_ok=True)
            src = os.path.join(tmp, entry)
            if os.path.isdir(src):
                shutil.copytree(src, local_path, dirs_exist_ok=True)
            else:
                shutil.copy2(src, local_path)

    def close(self) -> None:
        self._container = None
        if self._disk_host is not None:
            self._disk_host.close()


def pid1_script(command: str, log_path: str, env: dict[str, str] | None, pid_path: str) -> str:
    """What the launcher runs with `sh`: record pid 1 in the daemon's pid file (what `lab status` reads),
    then exec the command (so it becomes PID 1) with its output in the log."""
    q = shlex.quote
    env_prefix = " ".join(q(f"{k}={v}") for k, v in (env or {}).items())
    return f"echo 1 > {q(pid_path)}\nexec env {env_prefix} {command} >>{q(log_path)} 2>&1 </dev/null\n"


def open_hosts(state: LabState) -> list[DockerHost]:
    return [DockerHost(h.name, h.address, str(h.extra["container"]), h.workdir, str(h.extra.get("pid1", PID1_DAEMON)),
                       None if h.extra.get("disk_dir") is None else str(h.extra["disk_dir"]))
            for h in state.hosts]


def up(name: str, nodes: int = 5, *, wheelhouse: Path | None = None, pid1: str = PID1_DAEMON,
       diskfs: bool = False) -> LabState:
    """Containers n1…nN idling under the launcher, each with its workdir on a named volume (kept when the
    container stops and starts again); `pid1` names the daemon that will run as PID 1. With `diskfs`,
    the workdirs are this machine's directories shared with the holders, which serve the disk-fault
    filesystem (control/containerfs.py)."""
    c = client()
    prefix = lab_prefix(name)
    if c.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
        raise HostError(f"lab {name}: containers labelled {LABEL}={name} exist; `kraftlab clean --lab {name}`")
    image = ensure_node_image(c, wheelhouse)
    from docker.types import IPAMConfig, IPAMPool

    try:
        with subnet.allocation_lock():
            net = subnet.pick_free(name)
            network = c.networks.create(f"{prefix}-net", driver="bridge", labels={LABEL: name},
                                        ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=str(net),
                                                                               gateway=str(net[1]))]))
            state = LabState(name=name, backend="docker", hosts=[], created=time.time(),
                             info={"prefix": prefix, "subnet": str(net), "network": network.name, "image": image,
                                   "status": "creating"})
            save_state(state)
        names = [f"n{i}" for i in range(1, nodes + 1)]
        addresses = {n: str(net[10 + i]) for i, n in enumerate(names, start=1)}
        apparmor = False
        if diskfs:
            containerfs.prepare(name, names)
            state.info["diskfs"] = True
            apparmor = containerfs.uses_apparmor(list(c.info().get("SecurityOptions") or []))
        for n in names:
            cname = f"{prefix}-{n}"
            # the network namespace lives in a holder container, so the node's container can stop and start
            # again (kill, restart) without losing its address or the nemesis's iptables rules in force
            netcfg = c.api.create_networking_config(
                {network.name: c.api.create_endpoint_config(ipv4_address=addresses[n])})
            disk_dir = str(containerfs.node_dir(name, n)) if diskfs else None
            holder_disk = containerfs.holder_options(disk_dir, WORKDIR, apparmor=apparmor) if disk_dir else {}
            holder = c.api.create_container(image, command=[HOLDER_PID1, "infinity"], name=f"{cname}{HOLDER_SUFFIX}",
                                            hostname=n, labels={LABEL: name}, networking_config=netcfg,
                                            host_config=c.api.create_host_config(extra_hosts=addresses, **holder_disk))
            c.api.start(holder["Id"])
            if disk_dir:
                binds: Any = containerfs.node_binds(disk_dir, WORKDIR)
            else:
                volume = c.volumes.create(f"{cname}-work", labels={LABEL: name})
                binds = {volume.name: {"bind": WORKDIR, "mode": "rw"}}
            host_config = c.api.create_host_config(cap_add=["NET_ADMIN"], network_mode=f"container:{holder['Id']}",
                                                   binds=binds)
            launcher = ["python3", "-c", LAUNCHER, f"{WORKDIR}/run/{LAUNCH_FILE}", pid_file(WORKDIR, pid1)]
            created = c.api.create_container(image, command=launcher, name=cname, labels={LABEL: name},
                                             host_config=host_config, working_dir="/")
            c.api.start(created["Id"])
            extra: dict[str, object] = {"container": cname, "pid1": pid1}
            if disk_dir:
                extra["disk_dir"] = disk_dir
            state.hosts.append(HostRecord(n, addresses[n], WORKDIR, extra))
        state.info["status"] = "up"
        save_state(state)
        return state
    except BaseException:
        remove_lab_objects(name)
        remove_state(name)
        raise


def remove_lab_objects(name: str | None) -> int:
    """Remove the containers and networks labelled for the lab (every lab when None), then its
    disk-fault filesystem's mounts and directories on this machine; how many objects."""
    c = client()
    flt = {"label": LABEL if name is None else f"{LABEL}={name}"}
    count = 0
    containers = c.containers.list(all=True, filters=flt)
    for container in sorted(containers, key=lambda x: x.name.endswith(HOLDER_SUFFIX)):  # holders last
        container.remove(force=True)
        count += 1
    for network in c.networks.list(filters=flt):
        network.remove()
        count += 1
    for volume in c.volumes.list(filters=flt):
        volume.remove(force=True)
        count += 1
    return count + len(containerfs.release(name))


def down(name: str) -> None:
    remove_lab_objects(name)
    remove_state(name)
