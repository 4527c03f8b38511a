"""Deploying the KRaft node onto a lab's hosts, and operating it: install, render
`server.properties` (keys in docs/contracts.md), format with one cluster id, start, stop, kill,
pause/resume, restart, wipe, wait until healthy (a quorum leader, every broker unfenced), and
collect every node's logs and journals into a run directory.

`Deployment` is the `nemesis.ports.NodeControl` of a deployed lab. Its plan (topology, node ids,
cluster id, paths) is saved next to the lab's state file so later commands reopen it with
`load_deployment(lab)`.

On each host everything lives under the host's workdir:
`server.properties`, `kraft-node.log`, `clock.json`, `data/` (log.dirs, with `journal.jsonl`),
`metadata/` (metadata.log.dir) and, on SSH hosts, `venv/` (the project installed from a wheel).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.checker.raft.stored import STORED_LOG_FILE
from kraftlab.control.host import CommandResult, Host, HostError
from kraftlab.control.lab import Lab
from kraftlab.control.netns import NetnsHost
from kraftlab.control.ssh import SshHost
from kraftlab.control.state import state_dir
from kraftlab.control.wheels import WheelError, build_wheelhouse, install_script
from kraftlab.disks import DiskMounts, python_beside
from kraftlab.nemesis.daemon_control import DaemonNodeControl
from kraftlab.nemesis.ports import QuorumView, VoterAnswer, VoterRequest
from kraftlab.nemesis.voter_races import send_in_threads

DAEMON = "kraft-node"
BROKER_PORT = 9092
CONTROLLER_PORT = 9093
CONTROLLER_LISTENER = "CONTROLLER"
SASL_PORT = 9094
"""Each broker's SASL_PLAINTEXT listener (SCRAM-SHA-256/512): the scram workload's logins."""
METRICS_PORT = 9100
DOCKER_VENV = "/opt/kraftlab/venv"

# topology name → (number of controllers, whether controllers are also brokers)
TOPOLOGIES: dict[str, tuple[int | None, bool]] = {
    "combined+brokers": (3, True),  # 3 combined controller+broker nodes, the rest brokers (default)
    "dedicated": (3, False),  # 3 controller-only nodes, the rest brokers
    "combined": (None, True),  # every node is a combined controller+broker
}
DEFAULT_TOPOLOGY = "combined+brokers"
FATAL_SCAN_S = 1.0  # wait_healthy looks for `fatal` journal events this often

DEFAULT_PROPERTIES: dict[str, str] = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.retry.backoff.ms": "20",
    "controller.quorum.append.linger.ms": "25",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    # Small on purpose, as Jepsen tunes a system for interesting behaviour: a 60-s run writes about
    # 50 KB of metadata, so these give several snapshots and segment rolls per run. How much log is
    # kept behind the snapshots (metadata.max.retention.bytes) is Kafka's default unless the seed's
    # config draw (kraftlab.config_swarm) picks less: then nodes that restart or fall behind load
    # snapshots instead of replaying a log that is always whole.
    "metadata.snapshot.max.new.record.bytes": "8192",
    "metadata.log.segment.bytes": "16384",
    # Kafka's StandardAuthorizer, so the acl workload's ACLs are enforced and brokers journal their
    # decisions (checker.authorization). Resources without ACLs stay open (the cluster resource above
    # all: the workloads' clients and the nodes' own requests are User:ANONYMOUS on PLAINTEXT, which
    # may therefore create and delete ACLs); the acl workload puts ACLs only on `acl-` resources.
    # `User:admin` may do anything even where ACLs deny.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:admin",
}


class DeployError(Exception):
    """The node could not be deployed or did not come up; names the host and shows its last log lines."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    node_id: int
    roles: tuple[str, ...]
    address: str
    spare: bool = False
    """A controller of a dynamic quorum formatted `--no-initial-controllers`: it starts as an observer
    and becomes a voter only when added (`add-controller`)."""

    @property
    def controller(self) -> bool:
        return "controller" in self.roles

    @property
    def broker(self) -> bool:
        return "broker" in self.roles


QUORUMS = ("static", "dynamic")
"""`static`: the voters are `controller.quorum.voters`, fixed for the cluster's life. `dynamic` (KIP-853):
the nodes find the quorum through `controller.quorum.bootstrap.servers`; the topology's controllers are
its first voters (formatted `--initial-controllers`) and every other node is a combined broker and spare
controller (formatted `--no-initial-controllers`), ready to be added as a voter."""
INITIAL_VOTERS = 3  # a dynamic quorum's first voters when every node is a controller (topology combined)


def plan(topology: str, addresses: dict[str, str], quorum: str = "static") -> list[NodeSpec]:
    """Roles and node ids (n1 → 1 …) for the hosts, in their order (`quorum`: one of QUORUMS)."""
    if quorum not in QUORUMS:
        raise ValueError(f"unknown quorum {quorum!r} (one of {', '.join(QUORUMS)})")
    try:
        n_controllers, combined = TOPOLOGIES[topology]
    except KeyError:
        raise ValueError(f"unknown topology {topology!r} (one of {', '.join(TOPOLOGIES)})") from None
    names = list(addresses)
    n_controllers = len(names) if n_controllers is None else n_controllers
    if len(names) < n_controllers or (not combined and len(names) <= n_controllers):
        raise ValueError(f"topology {topology} needs more than {len(names)} hosts")
    specs = []
    for i, name in enumerate(names):
        if i < n_controllers:
            roles: tuple[str, ...] = ("broker", "controller") if combined else ("controller",)
        else:
            roles = ("broker",)
        spare = quorum == "dynamic" and (i >= n_controllers or (TOPOLOGIES[topology][0] is None
                                                                and i >= min(INITIAL_VOTERS, len(names))))
        if spare:
            roles = ("broker", "controller")
        specs.append(NodeSpec(name, i + 1, roles, addresses[name], spare))
    return specs


@dataclass(frozen=True)
class NodePaths:
    workdir: str

    @property
    def config(self) -> str:
        return f"{self.workdir}/server.properties"

    @property
    def log(self) -> str:
        return f"{self.workdir}/kraft-node.log"

    @property
    def data_dir(self) -> str:
        return f"{self.workdir}/data"

    @property
    def metadata_dir(self) -> str:
        return f"{self.workdir}/metadata"

    @property
    def journal(self) -> str:
        return f"{self.data_dir}/journal.jsonl"

    @property
    def clock_file(self) -> str:
        return f"{self.workdir}/clock.json"


def render_properties(spec: NodeSpec, specs: Sequence[NodeSpec], paths: NodePaths,
                      overrides: dict[str, str] | None = None, *, diskfs: bool = False, quorum: str = "static") -> str:
    """The node's server.properties. On the disk-fault filesystem (`diskfs`) `log.dirs` is the
    metadata directory too — Kafka's default layout, partitions beside `__cluster_metadata-0` — so
    partition data is on the mount as well; the journal stays in `data/`, off it — and brokers fsync
    each append (`log.flush.interval.messages=1`), the setting under which Kafka promises that an
    acknowledged record survives a power loss of its replicas (by default it promises no such thing:
    replication is the durability, and balanced recovery elects a last known leader whose unflushed
    tail the power loss took). An override may set Kafka's default back. A dynamic `quorum` names
    every controller in `controller.quorum.bootstrap.servers` instead of fixed voters."""
    if quorum == "dynamic":
        where = ("controller.quorum.bootstrap.servers",
                 ",".join(f"{s.address}:{CONTROLLER_PORT}" for s in specs if s.controller))
    else:
        where = ("controller.quorum.voters",
                 ",".join(f"{s.node_id}@{s.address}:{CONTROLLER_PORT}" for s in specs if s.controller))
    listeners = []
    if spec.broker:
        listeners.append(f"PLAINTEXT://{spec.address}:{BROKER_PORT}")
        listeners.append(f"SASL_PLAINTEXT://{spec.address}:{SASL_PORT}")
    if spec.controller:
        listeners.append(f"{CONTROLLER_LISTENER}://{spec.address}:{CONTROLLER_PORT}")
    props: dict[str, str] = {
        "process.roles": ",".join(spec.roles),
        "node.id": str(spec.node_id),
        where[0]: where[1],
        "listeners": ",".join(listeners),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "metadata.log.dir": paths.metadata_dir,
        "log.dirs": paths.metadata_dir if diskfs else paths.data_dir,
        **DEFAULT_PROPERTIES,
        "kraftlab.journal.file": paths.journal,
        "kraftlab.clock.file": paths.clock_file,
        "kraftlab.metrics.port": str(METRICS_PORT),
    }
    if diskfs:
        props["log.flush.interval.messages"] = "1"
    if spec.broker:
        props["advertised.listeners"] = (f"PLAINTEXT://{spec.address}:{BROKER_PORT},"
                                         f"SASL_PLAINTEXT://{spec.address}:{SASL_PORT}")
        props["inter.broker.listener.name"] = "PLAINTEXT"
    props.update(overrides or {})
    from kraftlab.node.admin import render_properties as render  # escapes what Kafka's parser would misread

    return f"# {spec.name}: rendered by kraftlab.deploy\n" + render(props)


def random_cluster_id() -> str:
    """A Kafka Uuid in its base64 form (22 characters), never starting with '-' (as Kafka does)."""
    from kraftlab.node.admin import random_cluster_id as new_id

    return new_id()


def kraft_node_path(backend: str, workdir: str) -> str:
    """Where the `kraft-node` executable is on a host of the backend."""
    if backend == "netns":
        return str(Path(sys.prefix) / "bin" / "kraft-node")  # namespaces share this machine's venv
    if backend == "docker":
        return f"{DOCKER_VENV}/bin/kraft-node"
    return f"{workdir}/venv/bin/kraft-node"


@dataclass
class DeploymentState:
    lab: str
    topology: str
    cluster_id: str
    specs: list[NodeSpec]
    overrides: dict[str, str] = field(default_factory=dict)
    run_dir: str | None = None
    """The run directory of the test that deployed it: `kraftlab clean` after a killed runner
    collects the node logs and journals there, so `kraftlab analyze` can still judge the run."""
    diskfs: bool = False
    """Each node's metadata.log.dir is on the disk-fault filesystem (kraftlab/disks.py): a kill
    loses what the node never fsynced, and the disk nemesis can fail or delay its I/O."""
    quorum: str = "static"
    """`static` (controller.quorum.voters) or `dynamic` (KIP-853: voters can be added and removed)."""

    def save(self) -> Path:
        path = state_dir() / "deployments" / f"{self.lab}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)
        return path

    @staticmethod
    def load(lab: str) -> DeploymentState:
        path = state_dir() / "deployments" / f"{lab}.json"
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise LookupError(f"lab {lab} has no deployment ({path}); deploy the node first") from None
        raw["specs"] = [NodeSpec(s["name"], s["node_id"], tuple(s["roles"]), s["address"], bool(s.get("spare")))
                        for s in raw["specs"]]
        return DeploymentState(**raw)


class Deployment(DaemonNodeControl):
    """The node deployed on a lab: the nemesis's daemon control (signals, start, stop, paths)
    filled in with the node's command, roles and workdirs, plus install, format, health and
    collection."""

    def __init__(self, lab: Lab, state: DeploymentState, *, stop_timeout: float = 20.0) -> None:
        self.lab = lab
        self.state = state
        self.timings: dict[str, float] = {}  # seconds per phase of the last deploy / wait_healthy
        self._specs = {s.name: s for s in state.specs}
        self._mounts = DiskMounts(self.lab.host, lambda n: python_beside(self.kraft_node(n)))
        self.disks = self._mounts if state.diskfs else None
        self._leader_hint: str | None = None  # the quorum's leader when last described: asked first
        super().__init__(lab.hosts, daemon=DAEMON,
                         command=lambda n: f"{self.kraft_node(n)} start --config {self.paths(n).config}",
                         controllers=[s.name for s in state.specs if s.controller],
                         brokers=[s.name for s in state.specs if s.broker],
                         workdir=lambda n: self.lab.host(n).workdir, active=self.active_controller,
                         reformat=self.reformat, stop_timeout=stop_timeout, env={"PYTHONUNBUFFERED": "1"})

    # -- creating ---------------------------------------------------------------------------------

    @staticmethod
    def create(lab: Lab, topology: str = DEFAULT_TOPOLOGY, overrides: dict[str, str] | None = None,
               cluster_id: str | None = None, run_dir: Path | None = None, diskfs: bool = False,
               quorum: str = "static") -> Deployment:
        state = DeploymentState(lab.name, topology, cluster_id or random_cluster_id(),
                                plan(topology, lab.addresses(), quorum), dict(overrides or {}),
                                None if run_dir is None else str(run_dir), diskfs, quorum)
        state.save()
        return Deployment(lab, state)

    def paths(self, node: str) -> NodePaths:
        return NodePaths(self.lab.host(node).workdir)

    def preinstalled(self, node: str) -> bool:
        """True when the host already has the project (namespaces, Docker, an SSH host with `venv=`)."""
        h = self.lab.host(node)
        return self.lab.backend not in ("ssh", "vagrant") or (isinstance(h, SshHost) and h.entry.venv is not None)

    def kraft_node(self, node: str) -> str:
        h = self.lab.host(node)
        if isinstance(h, SshHost) and h.entry.venv is not None:
            return f"{h.entry.venv}/bin/kraft-node"
        return kraft_node_path(self.lab.backend, h.workdir)

    def install(self, wheelhouse: Path | None = None) -> None:
        """Make `kraft-node` runnable on every host: nothing to copy for namespaces and Docker (the
        venv / the image has it) or SSH hosts with a `venv=`; a wheel + virtualenv for other SSH hosts."""
        targets = [n for n in self.nodes() if not self.preinstalled(n)]
        if targets:
            try:
                wheels = wheelhouse or build_wheelhouse()
            except WheelError as exc:
                raise DeployError(str(exc)) from None
            self.lab.on(targets, lambda h: install_on_ssh_host(h, wheels))
        missing = {n: r for n, r in self.lab.on(None, lambda h: h.run(f"test -x {self.kraft_node(h.name)}")).items()
                   if not r.ok}
        if missing:
            raise DeployError("kraft-node is not installed on " + ", ".join(
                f"{n} (no {self.kraft_node(n)})" for n in sorted(missing)))

    def configure(self) -> None:
        """Write every node's server.properties (and create its directories)."""
        def write(h: Host) -> None:
            spec, paths = self._specs[h.name], self.paths(h.name)
            text = render_properties(spec, self.state.specs, paths, self.state.overrides, diskfs=self.state.diskfs,
                                     quorum=self.state.quorum)
            h.run(f"mkdir -p {paths.data_dir} {paths.metadata_dir} && cat > {paths.config} <<'KRAFTLAB_EOF'\n"
                  f"{text}KRAFTLAB_EOF\n", check=True)
            if self.disks is not None:
                self.disks.mount(h.name, seed=self._specs[h.name].node_id)

        self.lab.on(None, write)

    def format(self, nodes: Iterable[str] | None = None) -> None:
        initial = initial_controllers(self.state.specs, {s.name: random_cluster_id() for s in self.state.specs})
        self.lab.on(nodes, lambda h: self._format(h.name, ignore_formatted=False, initial=initial))

    def _format(self, node: str, *, ignore_formatted: bool, initial: str | None = None) -> None:
        """`kraft-node format` of the node; a controller of a dynamic quorum with `--initial-controllers
        initial` (a first voter, when the cluster is made) or else `--no-initial-controllers`."""
        spec = self._specs[node]
        quorum_flag = ""
        if self.dynamic_quorum() and spec.controller:
            first = initial is not None and not spec.spare
            quorum_flag = f" --initial-controllers {initial}" if first else " --no-initial-controllers"
        if isinstance(self.lab.host(node), NetnsHost) and not quorum_flag:  # this machine's files: no process
            format_here(node, self.paths(node).config, self.state.cluster_id, ignore_formatted=ignore_formatted)
            return
        flag = " --ignore-formatted" if ignore_formatted else ""
        r = self.lab.host(node).run(f"{self.kraft_node(node)} format --config {self.paths(node).config} "
                                    f"--cluster-id {self.state.cluster_id}{flag}{quorum_flag}", timeout=60)
        if not r.ok:
            raise DeployError(f"{node}: kraft-node format failed ({r.exit_code}): {(r.stderr or r.stdout).strip()}")

    def deploy(self, *, wait: float = 60.0) -> str:
        """A fresh cluster: install, stop what runs, wipe, configure, format, start all, wait until healthy.
        Every step runs on all hosts at once; `timings` says how long each took."""
        self.timings = {}
        t = time.monotonic()
        if self.disks is not None and (unable := [n for n in self.nodes() if not self._mounts.supported(n)]):
            raise DeployError(f"--diskfs: the hosts {', '.join(unable)} cannot serve the disk-fault filesystem "
                              "(a Docker lab needs `kraftlab lab up --backend docker --diskfs`; docs/diskfs.md)")
        self.install()
        self.stop_all(graceful=False)
        self.lab.on(None, lambda h: self._wipe(h.name))
        self.configure()
        t = self._phase("prepare", t)
        self.format()
        t = self._phase("format", t)
        self.start_all()
        self._phase("start", t)
        return self.wait_healthy(wait)

    def _phase(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.timings[name] = now - since
        return now

    # -- NodeControl (the rest comes from DaemonNodeControl) --------------------------------------

    def nodes(self) -> list[str]:
        return [s.name for s in self.state.specs]

    def start_all(self) -> None:
        self.lab.on(None, lambda h: self.start(h.name))

    def stop_all(self, *, graceful: bool = True) -> None:
        self.lab.on([n for n, up in self.alive().items() if up], lambda h: self.stop(h.name, graceful=graceful))

    def alive(self) -> dict[str, bool]:
        """Whether each node's process runs, asked of all hosts at once."""
        return self.lab.on(None, lambda h: self.running(h.name))

    def restart(self, node: str) -> None:
        if self.running(node):
            self.stop(node)
        self.start(node)

    def wipe(self, node: str) -> None:
        """Delete the node's data and metadata directories (the node must be down)."""
        if self.running(node):
            raise HostError(f"{node}: stop kraft-node before wiping its data")
        self._wipe(node)

    def _wipe(self, node: str) -> None:
        p = self.paths(node)
        if self._mounts.supported(node):  # a mount (also a previous deployment's) goes first: rm cannot remove it
            self._mounts.unmount(node)
            self.lab.host(node).run(f"rm -rf {self._mounts.backing(node)}", check=True)
        self.lab.host(node).run(f"rm -rf {p.data_dir} {p.metadata_dir} && mkdir -p {p.data_dir} {p.metadata_dir}",
                                check=True)
        if self.disks is not None:
            self.disks.mount(node, seed=self._specs[node].node_id)

    def power_off(self, node: str) -> dict[str, Any] | None:
        """A kill that is a power loss on the filesystem (nemesis.powerloss.PowerLoss): SIGKILL, the
        disk's crash at once, then the wait for the process to go (None without diskfs: a kill)."""
        if self.disks is None:
            self.kill(node)
            return None
        self._signal(node, signal.SIGKILL)
        try:
            return self.disks.request(node, {"cmd": "crash"})
        finally:
            self._wait_gone(node, 5.0)

    def on_diskfs(self) -> bool:
        """The nodes' metadata directories are on the disk-fault filesystem (`--diskfs`)."""
        return self.disks is not None

    def disk_request(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        """A request to the node's disk-fault filesystem (errors, delays, status)."""
        if self.disks is None:
            raise HostError(f"{node}: this lab's data is not on the disk-fault filesystem (deploy with --diskfs)")
        return self.disks.request(node, request)

    def unmount_disks(self) -> None:
        """Stop every node's disk-fault filesystem (the nodes must be down)."""
        if self.disks is not None:
            disks = self.disks
            self.lab.on(None, lambda h: disks.unmount(h.name))

    def reformat(self, node: str) -> None:
        self._format(node, ignore_formatted=True)

    # -- a dynamic quorum's voters (nemesis.ports.VoterControl), as Kafka's tools change them ----------

    def dynamic_quorum(self) -> bool:
        return self.state.quorum == "dynamic"

    def spare_controllers(self) -> list[str]:
        return [s.name for s in self.state.specs if s.spare]

    def describe_voters(self) -> QuorumView:
        described = self.describe_quorum()
        names = {s.node_id: s.name for s in self.state.specs}
        leader = quorum_leader(described)
        listed = described.get("voters", [])
        voters = {names.get(int(v["id"]), f"id{v['id']}"): str(v.get("directory_id") or "") for v in listed}
        ends = {names.get(int(v["id"]), f"id{v['id']}"): int(v.get("log_end_offset", -1)) for v in listed}
        self._leader_hint = names.get(leader) if leader is not None else None
        return QuorumView(self._leader_hint, voters, int(described.get("high_watermark", -1)), ends)

    def directory_id(self, node: str) -> str | None:
        r = self.lab.host(node).run(f"cat {shlex.quote(self.paths(node).metadata_dir)}/meta.properties", timeout=15)
        found = re.search(r"^directory\.id=(\S+)$", r.stdout, re.MULTILINE) if r.ok else None
        return found.group(1) if found else None

    def _bootstrap_controllers(self) -> str:
        """Every controller, the leader last seen first: the tool asks them in turn, and one cut off by a
        partition costs a whole connection timeout."""
        specs = sorted((s for s in self.state.specs if s.controller), key=lambda s: s.name != self._leader_hint)
        return ",".join(f"{s.address}:{CONTROLLER_PORT}" for s in specs)

    def add_controller(self, node: str, timeout_s: float) -> VoterAnswer:
        """`kraft-node add-controller` on the node's host, with the node's own configuration (its id,
        listener and formatted directory id, as Kafka's tool reads them)."""
        command = (f"{self.kraft_node(node)} add-controller --bootstrap-controller {self._bootstrap_controllers()} "
                   f"--command-config {self.paths(node).config} --timeout {timeout_s:g}")
        return self._voter_command(node, command, timeout_s)

    def remove_controller(self, node: str, directory_id: str, timeout_s: float) -> VoterAnswer:
        command = (f"{self.kraft_node(node)} remove-controller --bootstrap-controller {self._bootstrap_controllers()} "
                   f"--controller-id {self._specs[node].node_id} --controller-directory-id {shlex.quote(directory_id)} "
                   f"--timeout {timeout_s:g}")
        return self._voter_command(node, command, timeout_s)

    def change_voters_together(self, requests: Sequence[VoterRequest], timeout_s: float) -> list[VoterAnswer]:
        """Sent from this process where the runner reaches the controllers (each request over its own
        connection, all at once), else by the tools run on the nodes' hosts at once (one thread each)."""
        if self.lab.backend not in DIRECT_BACKENDS:
            return send_in_threads(self, requests, timeout_s)
        controllers = sorted((s for s in self.state.specs if s.controller), key=lambda s: s.name != self._leader_hint)
        from kraftlab.node import admin

        wanted = [admin.VoterChange(r.kind, self._specs[r.node].node_id, r.directory_id or "",
                                    (CONTROLLER_LISTENER, self._specs[r.node].address, CONTROLLER_PORT))
                  for r in requests]
        answers = admin.change_voters_together_now([(s.address, CONTROLLER_PORT) for s in controllers], wanted,
                                                   self.state.cluster_id, timeout_s, VOTER_COMMAND_SLACK_S)
        return [VoterAnswer(error, message) for error, message in answers]

    def _voter_command(self, node: str, command: str, timeout_s: float) -> VoterAnswer:
        """The tool run on the node's host, stopped `VOTER_COMMAND_SLACK_S` after `timeout_s` (its own
        request timeout is 30 s longer: a controller cut off by a partition would hold it that long)."""
        try:
            return voter_answer(self.lab.host(node).run(command, timeout=timeout_s + VOTER_COMMAND_SLACK_S))
        except HostError as exc:
            return VoterAnswer("UNREACHABLE", f"{node}: {exc}")

    def new_disk(self, node: str) -> None:
        """The (stopped) node's metadata directory emptied and formatted `--no-initial-controllers`: a new
        directory id (its data directory and journal stay, as when a metadata disk is swapped)."""
        if self.running(node):
            raise HostError(f"{node}: stop kraft-node before replacing its disk")
        meta = shlex.quote(self.paths(node).metadata_dir)
        self.lab.host(node).run(f"find {meta} -mindepth 1 -delete", check=True, timeout=60)
        self._format(node, ignore_formatted=True)

    # -- health -----------------------------------------------------------------------------------

    def _ask(self, kind: str, candidates: list[str], alive: dict[str, bool] | None = None) -> dict[str, Any]:
        """DescribeQuorum (`kind` "quorum", on controllers) or DescribeCluster ("cluster", on brokers):
        asked directly from here where the runner reaches the nodes (namespaces, containers), else
        with `kraft-node describe-…` run on the node's host (VMs behind SSH). Skips nodes not running
        (`alive` when the caller just asked, else each is asked)."""
        errors = []
        for node in candidates:
            if not (alive[node] if alive is not None else self.running(node)):
                continue
            try:
                return self._ask_node(kind, node)
            except HostError as exc:
                errors.append(f"{node}: {exc}")
        what = "controller" if kind == "quorum" else "broker"
        raise HostError(f"describe-{kind} failed: " + ("; ".join(errors) or f"no {what} is running"))

    def _ask_node(self, kind: str, node: str) -> dict[str, Any]:
        address = self._specs[node].address
        if self.lab.backend in DIRECT_BACKENDS:
            return direct_query(kind, address)
        return self._ask_on_host(kind, node, address)

    def _ask_on_host(self, kind: str, node: str, address: str) -> dict[str, Any]:
        flag, port = ("--bootstrap-controller", CONTROLLER_PORT) if kind == "quorum" else ("--bootstrap-server",
                                                                                           BROKER_PORT)
        r = self.lab.host(node).run(f"{self.kraft_node(node)} describe-{kind} {flag} {address}:{port}", timeout=15)
        if not r.ok:
            raise HostError((r.stderr or r.stdout).strip()[-300:])
        return dict(json.loads(r.stdout))

    def describe_quorum(self, alive: dict[str, bool] | None = None) -> dict[str, Any]:
        return self._ask("quorum", self.controllers(), alive)

    def describe_cluster(self, alive: dict[str, bool] | None = None) -> dict[str, Any]:
        return self._ask("cluster", self.brokers(), alive)

    def active_controller(self) -> str | None:
        try:
            leader = quorum_leader(self.describe_quorum())
        except (HostError, ValueError):
            return None
        return next((s.name for s in self.state.specs if s.node_id == leader), None)

    def health(self, alive: dict[str, bool] | None = None) -> tuple[bool, str]:
        """(healthy, what is missing): a quorum leader, and every broker registered and unfenced."""
        status = self._status(alive)
        return status.healthy, status.why

    def _status(self, alive: dict[str, bool] | None) -> Health:
        """Healthy when a controller names a leader and every broker answers DescribeCluster itself (a
        broker refuses while it starts: a restarted one still listed unfenced from before does not count)
        with every broker registered and unfenced in its view."""
        alive = alive if alive is not None else self.alive()
        try:
            quorum = self.describe_quorum(alive)
            leader = quorum_leader(quorum)
        except (HostError, ValueError) as exc:
            return Health(False, None, False, str(exc))
        if leader is None:
            return Health(True, None, False, "no quorum leader yet")
        if not self.brokers():
            return Health(True, leader, True, f"leader {leader}")
        running = [n for n in self.brokers() if alive[n]]
        try:
            views = self.lab.on(running, lambda h: unfenced_brokers(self._ask_node("cluster", h.name)))
        except (HostError, ValueError) as exc:
            return Health(True, leader, False, f"describe-cluster failed: {exc}")
        brokers = set.intersection(*views.values()) if views else set()
        want = {self._specs[n].node_id for n in self.brokers()}
        if not want <= brokers:
            return Health(True, leader, False,
                          f"leader {leader}, brokers not registered and unfenced: {sorted(want - brokers)}")
        return Health(True, leader, True, f"leader {leader}, brokers {sorted(brokers)} unfenced")

    def wait_healthy(self, timeout: float = 60.0, poll: float = 0.05) -> str:
        """Poll (every `poll` s) until healthy; `timings` gets "answer" (until a controller first
        answered DescribeQuorum), "leader" (from then until it named a leader) and "unfenced" (from
        then until every broker was unfenced)."""
        start = time.monotonic()
        deadline = start + timeout
        seen: dict[str, float] = {}
        why = "not checked"
        next_fatal_scan = start + FATAL_SCAN_S  # a deploy healthy within a second never scans
        while time.monotonic() < deadline:
            alive = self.alive()
            dead = [n for n, up in alive.items() if not up]
            if dead:
                raise DeployError("kraft-node exited on " + "; ".join(self.describe_failure(n) for n in dead))
            if time.monotonic() >= next_fatal_scan:
                next_fatal_scan = time.monotonic() + FATAL_SCAN_S
                fatal = self.fatal_errors([n for n, up in alive.items() if up])
                if fatal:
                    raise DeployError("kraft-node journalled a fatal error (a bug in the node: it will not become "
                                      "healthy) on " + "; ".join(f"{n}: {e}" for n, e in sorted(fatal.items())))
            status = self._status(alive)
            now = time.monotonic()
            if status.answered:
                seen.setdefault("answer", now)
            if status.leader is not None:
                seen.setdefault("leader", now)
            why = status.why
            if status.healthy:
                answer, leader = seen.get("answer", start), seen.get("leader", start)
                self.timings.update(answer=answer - start, leader=leader - answer, unfenced=now - leader)
                return why
            time.sleep(poll)
        raise DeployError(f"cluster not healthy after {timeout:g}s: {why}\n"
                          + "\n".join(self.describe_failure(n) for n in self.nodes()))

    def fatal_errors(self, nodes: list[str]) -> dict[str, str]:
        """The first `fatal` journal event's error per node that has one. A node journals `fatal` only
        when it broke its own invariants, so waiting for it to become healthy is waiting for nothing."""
        if not nodes:
            return {}
        pattern = shlex.quote('"ev":"fatal"')

        def first_fatal(h: Host) -> str | None:
            r = h.run(f"grep -m1 -F {pattern} {shlex.quote(self.paths(h.name).journal)} 2>/dev/null", timeout=10)
            if r.exit_code != 0 or not r.stdout.strip():
                return None
            try:
                return str(json.loads(r.stdout.splitlines()[0]).get("error", "?"))
            except ValueError:
                return r.stdout.strip()[:300]

        found = self.lab.on(nodes, first_fatal)
        return {n: e for n, e in found.items() if e is not None}

    def metrics_addresses(self) -> dict[str, str | None]:
        """Each node's metrics address as it journalled it when it last started (None: serves none)."""
        pattern = shlex.quote('"ev":"metrics"')

        def last_address(h: Host) -> str | None:
            r = h.run(f"grep -F {pattern} {shlex.quote(self.paths(h.name).journal)} 2>/dev/null | tail -n1", timeout=10)
            try:
                return str(json.loads(r.stdout)["address"]) if r.ok and r.stdout.strip() else None
            except (ValueError, KeyError):
                return None

        return self.lab.on(self.nodes(), last_address)

    def log_tail(self, node: str, lines: int = 20) -> str:
        r = self.lab.host(node).run(f"tail -n {lines} {self.paths(node).log} 2>&1", timeout=10)
        return r.stdout.rstrip()

    def describe_failure(self, node: str) -> str:
        h = self.lab.host(node)
        state = "running" if self.running(node) else "not running"
        tail = self.log_tail(node)
        return f"{node} ({h.address}, {state}), last lines of {self.paths(node).log}:\n{tail}"

    # -- collecting -------------------------------------------------------------------------------

    def collect(self, run_nodes_dir: Path) -> dict[str, list[str]]:
        """Copy each node's log, journal and server.properties into `run_nodes_dir/<node>/`;
        returns what was copied per node (a missing file is skipped, an unreachable host raises)."""
        def fetch(h: Host) -> list[str]:
            p = self.paths(h.name)
            dest = run_nodes_dir / h.name
            dest.mkdir(parents=True, exist_ok=True)
            got = []
            for remote, local in ((p.log, "kraft-node.log"), (p.journal, "journal.jsonl"),
                                  (p.config, "server.properties"), (p.clock_file, "clock.json")):
                if h.run(f"test -f {shlex.quote(remote)}").ok:
                    h.get(remote, str(dest / local))
                    got.append(local)
            # what the metadata log holds on disk (Kafka's DumpLogSegments text), judged beside the journal
            dump = h.run(f"{shlex.quote(self.kraft_node(h.name))} dump-log --batches-only "
                         f"{shlex.quote(p.metadata_dir)}", timeout=60)
            if dump.stdout.startswith("Dumping "):  # damage fails the command after the valid batches
                (dest / STORED_LOG_FILE).write_text(dump.stdout, encoding="utf-8")
                got.append(STORED_LOG_FILE)
            return got

        return self.lab.on(None, fetch)


DIRECT_BACKENDS = ("netns", "docker")  # the runner reaches every node's address itself


def direct_query(kind: str, address: str, timeout: float = 2.0) -> dict[str, Any]:
    """describe-quorum / describe-cluster in this process, through the node's admin surface (the
    same requests and JSON as `kraft-node describe-…`, without starting a process)."""
    from kraftlab.node import admin

    try:
        if kind == "quorum":
            return admin.describe_quorum_now(address, CONTROLLER_PORT, timeout)
        return admin.describe_cluster_now(address, BROKER_PORT, timeout)
    except admin.AdminError as exc:
        raise HostError(str(exc)) from None


def initial_controllers(specs: Sequence[NodeSpec], directory_ids: dict[str, str]) -> str:
    """`--initial-controllers` of a dynamic quorum: each first voter as `id@host:port:directory-id`."""
    return ",".join(f"{s.node_id}@{s.address}:{CONTROLLER_PORT}:{directory_ids[s.name]}"
                    for s in specs if s.controller and not s.spare)


def voter_answer(result: CommandResult) -> VoterAnswer:
    """What `kraft-node add-controller` / `remove-controller` said, as the quorum's answer: exit 0 is
    NONE; a refusal names Kafka's error (`… failed: REQUEST_TIMED_OUT …`); anything else (no
    controller took it, the host unreachable) is UNREACHABLE, an answer that may still commit."""
    if result.ok:
        return VoterAnswer("NONE", result.stdout.strip())
    text = (result.stderr or result.stdout).strip()
    refused = VOTER_ERROR.search(text)
    return VoterAnswer(refused.group(1) if refused else "UNREACHABLE", text[-300:])


VOTER_COMMAND_SLACK_S = 5.0
VOTER_ERROR = re.compile(r" failed: ([A-Z][A-Z_]+)\b")


def quorum_leader(quorum: dict[str, Any]) -> int | None:
    """The leader id in describe-quorum JSON (None when there is none)."""
    for key in ("leader", "leader_id", "leaderId"):
        if key in quorum:
            value = quorum[key]
            if isinstance(value, dict):
                value = value.get("id", value.get("node_id"))
            return None if value is None or int(value) < 0 else int(value)
    raise ValueError(f"describe-quorum output has no leader: {quorum}")


def unfenced_brokers(cluster: dict[str, Any]) -> set[int]:
    """Ids of registered, unfenced brokers in describe-cluster JSON."""
    brokers = cluster.get("brokers")
    if not isinstance(brokers, list):
        raise ValueError(f"describe-cluster output has no brokers list: {cluster}")
    out = set()
    for b in brokers:
        bid = b.get("id", b.get("broker_id", b.get("node_id")))
        fenced = b.get("fenced", str(b.get("state", "")).upper() == "FENCED")
        if bid is not None and not fenced:
            out.add(int(bid))
    return out


@dataclass(frozen=True)
class Health:
    answered: bool  # a controller answered DescribeQuorum
    leader: int | None
    healthy: bool  # a leader, and every broker registered and unfenced
    why: str


def format_here(node: str, config_path: str, cluster_id: str, *, ignore_formatted: bool) -> None:
    """`kraft-node format` in this process, for hosts whose files are this machine's (namespaces): the
    same function the command calls, without starting a Python process per node."""
    from kraftlab.node.admin import AdminError, format_storage

    try:
        format_storage(config_path, cluster_id, ignore_formatted=ignore_formatted)
    except AdminError as exc:
        raise DeployError(f"{node}: kraft-node format failed: {exc}") from None


def load_deployment(lab: Lab) -> Deployment:
    return Deployment(lab, DeploymentState.load(lab.name))


# -- installing on SSH hosts -----------------------------------------------------------------------

def install_on_ssh_host(h: Host, wheelhouse: Path) -> None:
    """A virtualenv at <workdir>/venv with the wheels, installed offline (no index)."""
    remote = f"{h.workdir}/wheels"
    h.run(f"rm -rf {remote}", check=True)
    h.put(str(wheelhouse), remote)
    r = h.run(install_script(remote, f"{h.workdir}/venv"), timeout=600)
    if not r.ok:
        raise DeployError(f"{h.name}: installing the node failed: {r.stderr.strip()[-1000:]}")
