"""`kraftlab lab up | down | status | list`: bring a lab of hosts up, inspect it, take it down."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kraftlab.control.containers import DockerHost
from kraftlab.control.host import HostError
from kraftlab.control.labs import BACKENDS, lab_down, lab_up, load_lab
from kraftlab.control.preflight import SetupError
from kraftlab.control.state import list_states, load_state
from kraftlab.deploy import DEFAULT_TOPOLOGY, QUORUMS, TOPOLOGIES, DeployError, Deployment, load_deployment
from kraftlab.exits import EXIT_BAD_ARGS

NODE_ACTIONS = ["start", "stop", "kill", "pause", "resume", "restart", "wipe", "reformat"]

EXIT_OK = 0
EXIT_FAILED = 1

HELP = "bring a lab of hosts up or down, show its status"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("lab", help=HELP)
    sub = p.add_subparsers(dest="lab_command", metavar="ACTION", parser_class=type(p))
    up = sub.add_parser("up", help="create a lab")
    up.add_argument("--name", default="default")
    up.add_argument("--nodes", type=int, default=5)
    up.add_argument("--backend", choices=sorted(BACKENDS), default="netns")
    up.add_argument("--nodes-file", help="ssh backend: the nodes file (see docs in control/nodesfile.py)")
    up.add_argument("--accept-new-host-keys", action="store_true",
                    help="ssh/vagrant: trust and record host keys not yet in known_hosts (never silent otherwise)")
    up.add_argument("--vagrant-dir", help="vagrant backend: the folder with the Vagrantfile (default vagrant/)")
    up.add_argument("--diskfs", action="store_true",
                    help="docker backend: containers able to serve the disk-fault filesystem (`deploy --diskfs`; "
                         "their holders get /dev/fuse and CAP_SYS_ADMIN; docs/diskfs.md)")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="remove a lab and everything it created")
    down.add_argument("--name", default="default")
    down.set_defaults(func=_down)
    status = sub.add_parser("status", help="hosts, addresses and daemons of a lab")
    status.add_argument("--name", default="default")
    status.set_defaults(func=_status)
    lst = sub.add_parser("list", help="the labs on this machine")
    lst.set_defaults(func=_list)
    dep = sub.add_parser("deploy", help="deploy a fresh cluster on the lab and wait until it is healthy")
    dep.add_argument("--name", default="default")
    dep.add_argument("--topology", choices=sorted(TOPOLOGIES), default=DEFAULT_TOPOLOGY)
    dep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="a server.properties key for every node (repeatable)")
    dep.add_argument("--wait", type=float, default=60.0, help="seconds to wait for a healthy cluster")
    dep.add_argument("--diskfs", action="store_true",
                     help="each node's metadata.log.dir on the disk-fault FUSE filesystem (a kill loses "
                          "what was never fsynced; docs/diskfs.md)")
    dep.add_argument("--quorum", choices=QUORUMS, default="static",
                     help="dynamic: KIP-853 (controller.quorum.bootstrap.servers; nodes beyond the first controllers "
                          "are spare controllers, for `kraftlab nemesis membership`)")
    dep.set_defaults(func=_deploy)
    node = sub.add_parser("node", help="operate one deployed node")
    node.add_argument("action", choices=NODE_ACTIONS)
    node.add_argument("node", help="n1 … nN")
    node.add_argument("--name", default="default")
    node.set_defaults(func=_node)
    col = sub.add_parser("collect", help="copy every node's log, journal and config into a directory")
    col.add_argument("--name", default="default")
    col.add_argument("--out", required=True)
    col.set_defaults(func=_collect)
    p.set_defaults(func=lambda a: (p.print_help(), EXIT_BAD_ARGS)[1])


def _fail(exc: Exception) -> int:
    print(f"kraftlab lab: {exc}", file=sys.stderr)
    return EXIT_FAILED


def _up(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {}
    if args.backend == "ssh":
        if not args.nodes_file:
            print("kraftlab lab up: --backend ssh needs --nodes-file", file=sys.stderr)
            return EXIT_BAD_ARGS
        options = {"nodes_file": args.nodes_file, "accept_new_host_keys": args.accept_new_host_keys}
    elif args.backend == "vagrant":
        options = {"accept_new_host_keys": args.accept_new_host_keys}
        if args.vagrant_dir:
            options["vagrant_dir"] = args.vagrant_dir
    if args.diskfs:
        if args.backend != "docker":
            print("kraftlab lab up: --diskfs is for the docker backend (other backends need nothing at `up`)",
                  file=sys.stderr)
            return EXIT_BAD_ARGS
        options["diskfs"] = True
    start = time.monotonic()
    try:
        lab = lab_up(args.name, args.backend, args.nodes, **options)
    except (SetupError, HostError, ValueError, LookupError, OSError) as exc:
        return _fail(exc)
    with lab:
        print(f"lab {lab.name} ({lab.backend}) up in {time.monotonic() - start:.2f}s")
        for h in lab.hosts:
            print(f"  {h.name}\t{h.address}")
    return EXIT_OK


def _down(args: argparse.Namespace) -> int:
    from kraftlab.commands.clean import heal_faults

    try:
        if load_state(args.name).backend != "netns":  # hosts that outlive the lab: undo faults first
            print(heal_faults(args.name))
    except LookupError:
        pass
    try:
        lab_down(args.name)
    except (SetupError, HostError, ValueError, OSError) as exc:
        return _fail(exc)
    print(f"lab {args.name} removed")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    try:
        state = load_state(args.name)
        lab = load_lab(args.name)
    except (LookupError, HostError, SetupError) as exc:
        return _fail(exc)
    with lab:
        info = ", ".join(f"{k}={v}" for k, v in sorted(state.info.items()))
        print(f"lab {lab.name} ({lab.backend}) {info}")
        script = ('for f in "$0"/run/*.pid; do [ -s "$f" ] || continue; p=$(cat "$f"); n=$(basename "$f" .pid); '
                  's=$(sed "s/.*) //" /proc/$p/stat 2>/dev/null | cut -d" " -f1); echo "$n $p ${s:-gone}"; done')

        def daemons(h: Any) -> str:
            places = [h]
            if isinstance(h, DockerHost) and h.disk_dir is not None:  # the disk-fault filesystem's daemon
                places.append(h.disk_host())
            parts = []
            for place in places:
                r = place.run(f"sh -c '{script}' {place.workdir}", timeout=10)
                if not r.ok:
                    return f"unreachable: {r.stderr.strip()[-200:]}"
                for line in r.stdout.splitlines():
                    name, pid, st = line.split()
                    word = {"gone": "exited", "T": "paused", "t": "paused", "Z": "exited"}.get(st, "running")
                    parts.append(f"{name}[{pid}] {word}")
            return ", ".join(parts) or "no daemons"

        try:
            rows = lab.on(None, daemons)
        except HostError as exc:
            return _fail(exc)
        for h in lab.hosts:
            print(f"  {h.name}\t{h.address}\t{rows[h.name]}")
        try:
            dep = load_deployment(lab)
        except LookupError:
            return EXIT_OK
        roles = ", ".join(f"{s.name}={'+'.join(s.roles)}{' (spare)' if s.spare else ''}" for s in dep.state.specs)
        print(f"cluster {dep.state.cluster_id} ({dep.state.topology}, {dep.state.quorum} quorum): {roles}")
        try:
            metrics = dep.metrics_addresses()
        except HostError:
            metrics = {}
        for node, address in sorted(metrics.items()):
            print(f"  {node}\tmetrics {address or 'not served'}")
        ok, why = dep.health()
        print(f"  {'healthy' if ok else 'not healthy'}: {why}")
    return EXIT_OK


def _deploy(args: argparse.Namespace) -> int:
    try:
        overrides = dict(kv.split("=", 1) for kv in args.set)
    except ValueError:
        print("kraftlab lab deploy: --set wants KEY=VALUE", file=sys.stderr)
        return EXIT_BAD_ARGS
    start = time.monotonic()
    try:
        with load_lab(args.name) as lab:
            dep = Deployment.create(lab, args.topology, overrides, diskfs=args.diskfs, quorum=args.quorum)
            why = dep.deploy(wait=args.wait)
    except (LookupError, HostError, SetupError, DeployError, ValueError) as exc:
        return _fail(exc)
    print(f"cluster {dep.state.cluster_id} up in {time.monotonic() - start:.1f}s: {why}")
    return EXIT_OK


def _node(args: argparse.Namespace) -> int:
    try:
        with load_lab(args.name) as lab:
            dep = load_deployment(lab)
            getattr(dep, args.action)(args.node)
            state = "running" if dep.running(args.node) else "not running"
    except (LookupError, HostError, SetupError, DeployError) as exc:
        return _fail(exc)
    print(f"{args.node}: {args.action} done; kraft-node is {state}")
    return EXIT_OK


def _collect(args: argparse.Namespace) -> int:
    from pathlib import Path

    try:
        with load_lab(args.name) as lab:
            got = load_deployment(lab).collect(Path(args.out))
    except (LookupError, HostError, SetupError, DeployError, OSError) as exc:
        return _fail(exc)
    for node, files in sorted(got.items()):
        print(f"{node}: {', '.join(files) or 'nothing'}")
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    states = list_states()
    if not states:
        print("no labs")
    for s in states:
        print(f"{s.name}\t{s.backend}\t{len(s.hosts)} hosts\t{s.info.get('subnet', '')}\t{s.info.get('status', '')}")
    return EXIT_OK
