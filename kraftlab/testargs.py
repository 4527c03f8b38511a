"""The Jepsen-like test flags shared by `kraftlab test` and `kraftlab test-all`."""

from __future__ import annotations

import argparse
from pathlib import Path

from kraftlab.config_swarm import TABLE
from kraftlab.deploy import QUORUMS, TOPOLOGIES
from kraftlab.nemesis.session import add_run_arguments
from kraftlab.runner import TestOptions
from kraftlab.store import DEFAULT_STORE
from kraftlab.topology_swarm import WEIGHTS


def _key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip(), v.strip()


def _positive(text: str) -> float:
    v = float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def add_test_arguments(p: argparse.ArgumentParser, *, matrix: bool = False) -> None:
    if not matrix:
        p.add_argument("--workload", default="mixed",
                       help="registry | topics | isr | acl | scram | queue | mixed (default mixed)")
        add_run_arguments(p, default="partition,kill,clock")
    p.add_argument("--time-limit", type=_positive, default=60.0, help="seconds of workload (default 60)")
    p.add_argument("--seed", type=int, default=None, help="seed for the workload and the nemesis schedule")
    p.add_argument("--nodes", type=int, default=5, help="hosts in a lab created for the run (default 5)")
    p.add_argument("--topology", default=None, choices=sorted(TOPOLOGIES),
                   help="roles of the nodes (default: each seed draws one among those the hosts allow, weighted "
                        + ", ".join(f"{t} {w:g}" for t, w in WEIGHTS) + "; a replayed schedule's own)")
    p.add_argument("--quorum", default=None, choices=QUORUMS,
                   help="static (controller.quorum.voters) or dynamic (KIP-853: bootstrap servers, the nodes beyond "
                        "the first controllers are spare controllers); default dynamic when --nemesis names membership")
    p.add_argument("--concurrency", type=int, default=None, help="client processes (default 2 per node)")
    p.add_argument("--rate", type=_positive, default=10.0, help="ops/s per client process (default 10)")
    if matrix:
        p.add_argument("--nemesis-interval", type=_positive, default=10.0, help="seconds between nemesis steps")
        p.add_argument("--replay-nemesis", default=None, metavar="RUN_DIR", help="replay that run's schedule")
    p.add_argument("--recovery-time", type=_positive, default=None, metavar="SECONDS",
                   help="after the final heal, how long the cluster gets to be healthy and caught up before "
                        "the run judges it unrecovered (default: derived from the node's timeouts, about 33 s "
                        "with the defaults); also the deploy's wait")
    p.add_argument("--availability", type=_positive, default=None, metavar="SECONDS",
                   help="judge availability: while a fault leaves a majority of voters connected, a client on "
                        "that side must succeed within SECONDS of the fault starting (off by default)")
    p.add_argument("--op-timeout", type=_positive, default=5.0, help="client call timeout in seconds")
    p.add_argument("--backend", default="netns", choices=["netns", "ssh", "docker", "vagrant"])
    p.add_argument("--lab", default=None, help="use this existing lab (kraftlab lab up) instead of a fresh one")
    p.add_argument("--nodes-file", default=None, help="SSH backend: the nodes file")
    p.add_argument("--accept-new-host-keys", action="store_true", help="SSH: accept unknown host keys")
    p.add_argument("--leave-running", action="store_true", help="keep the cluster and lab up afterwards")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    p.add_argument("--config", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="extra server.properties entry for every node (repeatable)")
    p.add_argument("--no-config-swarm", dest="config_swarm", action="store_false",
                   help="keep the node's defaults for the keys each seed otherwise draws ("
                        + ", ".join(row.key for row in TABLE) + "); a --config KEY=VALUE always wins")
    p.add_argument("--diskfs", action="store_true",
                   help="put each node's metadata.log.dir on the disk-fault FUSE filesystem: every kill also "
                        "loses what the node never fsynced (netns and SSH backends)")


def options_from(args: argparse.Namespace, **override: object) -> TestOptions:
    fields = dict(workload=getattr(args, "workload", "mixed"), nemesis=getattr(args, "nemesis", "none"),
                  time_limit=args.time_limit, seed=args.seed, nodes=args.nodes, topology=args.topology,
                  concurrency=args.concurrency, rate=args.rate, nemesis_interval=args.nemesis_interval,
                  swarm=getattr(args, "swarm", True), availability=getattr(args, "availability", None),
                  recovery_time=args.recovery_time, op_timeout=args.op_timeout, backend=args.backend,
                  lab=args.lab, nodes_file=args.nodes_file, accept_new_host_keys=args.accept_new_host_keys,
                  leave_running=args.leave_running, replay_nemesis=args.replay_nemesis, store=args.store,
                  config=dict(args.config), config_swarm=args.config_swarm, diskfs=getattr(args, "diskfs", False),
                  quorum=args.quorum)
    fields.update(override)
    return TestOptions(**fields)
