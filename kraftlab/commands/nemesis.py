"""`kraftlab nemesis …`: apply, heal and inspect faults by hand against a lab that `kraftlab lab up`
keeps up — how an engineer reproduces a partition. Each op prints as a history line (JSON)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from kraftlab.checker.history import Completion
from kraftlab.control.host import HostError
from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.nemesis.cleanup import ledger_for
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.disk import CORRUPTION_MODES, DAMAGES, ZONES
from kraftlab.nemesis.grudge import TOPOLOGIES
from kraftlab.nemesis.ports import NodeControl, VoterControl
from kraftlab.nemesis.runner import ScheduleRunner, guarded
from kraftlab.nemesis.schedule import ScheduleError, load
from kraftlab.nemesis.targets import TARGETS

EXIT_OK, EXIT_NOT_APPLIED = 0, 1  # every op applied / some op not applied (bad arguments: EXIT_BAD_ARGS)
_DURATION = re.compile(r"^([+-]?\d+(?:\.\d+)?)(ms|s|m|min|h)?$")
_NEGATIVE_DURATION = re.compile(r"^-\d+(?:\.\d+)?(ms|s|m|min|h)?$")
_UNIT_MS = {"ms": 1.0, "s": 1000.0, None: 1000.0, "m": 60_000.0, "min": 60_000.0, "h": 3_600_000.0}


def parse_duration_ms(text: str) -> float:
    """`+30s`, `-1500ms`, `2m`, `1.5` (seconds) → milliseconds."""
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (e.g. +30s, -1500ms, 2m)")
    return float(m.group(1)) * _UNIT_MS[m.group(2)]


def _nodes(text: str) -> list[str]:
    return [n for n in text.split(",") if n]

HELP = "apply, heal and inspect faults by hand on a running lab"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("nemesis", help=HELP)
    p.add_argument("--lab", default="default", help="the lab's name (as given to `kraftlab lab up`)")
    p.set_defaults(func=main)
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    part = sub.add_parser("partition", help="cut the network along a topology")
    part.add_argument("--topology", choices=TOPOLOGIES, default="random-halves")
    part.add_argument("--nodes", type=_nodes, default=[], help="isolate-node: the nodes to isolate")
    part.add_argument("--from", dest="senders", type=_nodes, default=[], help="one-way: the senders")
    part.add_argument("--to", dest="receivers", type=_nodes, default=[], help="one-way: the receivers")
    part.add_argument("--seed", type=int)
    sub.add_parser("heal", help="undo every fault in force on the lab")
    status = sub.add_parser("status", help="what is in force on which host")
    status.add_argument("--live", action="store_true", help="also show the rules, qdiscs and clock files on the hosts")

    for name, text in (("kill", "SIGKILL"), ("stop", "graceful stop (SIGTERM)"), ("pause", "SIGSTOP"),
                       ("restart", "start killed/stopped"), ("resume", "SIGCONT")):
        q = sub.add_parser(name, help=f"{text} nodes")
        q.add_argument("nodes", nargs="*")
        q.add_argument("--target", choices=TARGETS)

    clock = sub.add_parser("clock", help="skew a node's clock").add_subparsers(dest="clock", required=True)
    bump = clock.add_parser("bump", help="offset a node's clock (e.g. +30s)")
    bump.add_argument("node")
    bump.add_argument("delta", type=parse_duration_ms)
    rate = clock.add_parser("rate", help="make a node's clock run fast or slow (e.g. 1.5)")
    rate.add_argument("node")
    rate.add_argument("rate", type=float)
    strobe = clock.add_parser("strobe", help="flip a node's clock offset between 0 and HIGH until --duration ends")
    strobe.add_argument("node")
    strobe.add_argument("high", type=parse_duration_ms)
    strobe.add_argument("--period", type=parse_duration_ms, default=200.0)
    strobe.add_argument("--duration", type=parse_duration_ms, default=30_000.0)
    step = clock.add_parser("step", help="step a VM's real clock (SSH hosts only)")
    step.add_argument("node")
    step.add_argument("delta", type=parse_duration_ms)
    for negative_ok in (bump, step):  # let `-30s` be a value, not an option
        negative_ok._negative_number_matcher = _NEGATIVE_DURATION
    reset = clock.add_parser("reset", help="undo clock faults (all nodes, or the given ones)")
    reset.add_argument("nodes", nargs="*")

    packet = sub.add_parser("packet", help="loss, bandwidth, delay, duplication, reordering")
    packet.add_argument("kind", choices=("loss", "bandwidth", "delay", "duplicate", "reorder", "heal"))
    packet.add_argument("amount", nargs="?", help="loss: probability; bandwidth: rate (1mbit); delay: ms; "
                                                  "duplicate/reorder: percent")
    packet.add_argument("--nodes", type=_nodes, default=[])

    disk = sub.add_parser("disk", help="damage a node's metadata log (the node is killed), or restore (restart)")
    disk.add_argument("damage", choices=sorted({*DAMAGES, *CORRUPTION_MODES, "restore"}))
    disk.add_argument("node", nargs="?")
    disk.add_argument("--seed", type=int)
    disk.add_argument("--zone", choices=ZONES, help="corrupt this KRaft zone's files (modes "
                      + ", ".join(CORRUPTION_MODES) + "; snapshot keeps a copy, rollback puts it back)")
    disk.add_argument("--nodes", type=_nodes, default=[], help="several nodes (with --zone)")
    disk.add_argument("--helix", action="store_true",
                      help="with --zone: every node named (default all), each damaged in its own region")
    disk.add_argument("--amount", type=int, help="bits to flip, bytes to zero or copy")

    member = sub.add_parser("membership", help="change a dynamic quorum's voters (KIP-853), as Kafka's tools do")
    verbs = member.add_subparsers(dest="membership", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="add running controllers as voters (add-controller), one at a time")
    add.add_argument("nodes", nargs="+")
    remove = verbs.add_parser("remove", help="remove voters (remove-controller), one at a time")
    remove.add_argument("nodes", nargs="*")
    replace = verbs.add_parser("replace", help="replace a voter's disk: kill, wipe and format its metadata "
                                               "directory (a new directory id), start, remove the old, add the new")
    replace.add_argument("nodes", nargs="?")
    for verb in (remove, replace):
        verb.add_argument("--target", choices=("controller",), help="the active controller")
    replace.add_argument("--split", action="store_true",
                         help="leave the old voter in the set and pause the active controller --elect seconds (an "
                              "election the new disk must not vote in); `heal` then removes the old, adds the new")
    replace.add_argument("--elect", type=float, default=5.5, help="with --split: seconds the leader stays paused")
    together = verbs.add_parser("together", help="two voter changes sent to the leader at the same moment (it must "
                                                 "take one at a time); `heal` undoes them")
    together.add_argument("--pair", choices=("add+add", "add+remove", "remove+remove"))
    together.add_argument("--seed", type=int)
    for name, text in (("shrink", "remove voters until TO remain"), ("grow", "add spare controllers until TO")):
        change = verbs.add_parser(name, help=text)
        change.add_argument("--to", type=int, required=True)
        change.add_argument("--seed", type=int)
        if name == "shrink":
            change.add_argument("--target", choices=("controller", "voter"), default="voter",
                                help="controller: the active controller first")
    verbs.add_parser("heal", help="back to the voter set before the first change")
    verbs.add_parser("describe", help="the voter set in force (JSON: leader, voters → directory id, spares)")

    replay = sub.add_parser("replay", help="replay a run's nemesis schedule against the lab, then heal")
    replay.add_argument("run_dir")


def _op(args: argparse.Namespace) -> tuple[str, dict[str, Any]] | None:
    """The nemesis op an action stands for (None: handled elsewhere)."""
    who: dict[str, Any] = {"target": args.target} if getattr(args, "target", None) else {}
    if getattr(args, "nodes", None) and args.action != "partition":
        who = {"nodes": args.nodes}
    match args.action:
        case "partition":
            value: dict[str, Any] = {"topology": args.topology}
            value.update({k: v for k, v in (("nodes", args.nodes), ("from", args.senders),
                                            ("to", args.receivers)) if v})
            if args.seed is not None:
                value["seed"] = args.seed
            return "start-partition", value
        case "kill" | "pause":
            return args.action, who or {"target": "one"}
        case "stop":
            return "graceful-stop", who or {"target": "one"}
        case "restart" | "resume":
            return args.action, who
        case "clock":
            return _clock_op(args)
        case "packet":
            return _packet_op(args)
        case "membership":
            return _membership_op(args)
        case "disk":
            if args.damage == "restore":
                return "stop-disk", {}
            nodes = [args.node] if args.node else list(args.nodes)
            if args.zone is None and args.damage not in DAMAGES:
                raise ValueError(f"disk {args.damage} needs --zone ({', '.join(ZONES)})")
            if not nodes and not (args.zone and args.helix):
                raise ValueError("disk DAMAGE needs a NODE")
            value = {"nodes": nodes} if nodes else {"target": "all"}
            value["damage"] = args.damage
            if args.zone is not None:
                value.update(zone=args.zone, **({"helix": True} if args.helix else {}))
            if args.amount is not None:
                value["amount"] = args.amount
            return "start-disk", value if args.seed is None else {**value, "seed": args.seed}
    return None


BY_HAND_WAIT = {"deadline_s": 30.0, "wait_s": 30.0}
"""By hand nothing else waits on an op: each voter change and the wait for a leader get 30 s."""


def _membership_op(args: argparse.Namespace) -> tuple[str, dict[str, Any]] | None:
    op = _membership_verb(args)
    return None if op is None else (op[0], {**op[1], **BY_HAND_WAIT})


def _membership_verb(args: argparse.Namespace) -> tuple[str, dict[str, Any]] | None:
    verb = args.membership
    value: dict[str, Any]
    if verb == "replace" and args.split:
        if args.target is not None:
            raise ValueError("membership replace --split replaces a follower's disk: name a NODE or none")
        split: dict[str, Any] = {"change": "replace-split", "elect_s": args.elect}
        return "start-membership", {**split, "nodes": [args.nodes]} if args.nodes else split
    if verb == "together":
        value = {"change": "concurrent", **({"pair": args.pair} if args.pair else {}),
                 **({"seed": args.seed} if args.seed is not None else {})}
        return "start-membership", value
    if verb in ("add", "remove", "replace"):
        nodes = [args.nodes] if isinstance(args.nodes, str) else list(args.nodes or ())
        if not nodes and getattr(args, "target", None) is None:
            raise ValueError(f"membership {verb} needs a NODE (or --target controller)")
        f = {"add": "add-controller", "remove": "remove-controller", "replace": "replace-disk"}[verb]
        return f, {"nodes": nodes} if nodes else {"target": args.target}
    if verb in ("shrink", "grow"):
        value = {"change": verb, "to": args.to}
        if verb == "shrink":
            value["target"] = args.target
        return "start-membership", value if args.seed is None else {**value, "seed": args.seed}
    if verb == "heal":
        return "stop-membership", {}
    return None  # describe: not an op


def describe_membership(control: NodeControl) -> dict[str, Any]:
    """The voter set in force, by node name (ValueError on a static quorum)."""
    if not isinstance(control, VoterControl) or not control.dynamic_quorum():
        raise ValueError("the lab's quorum is static (controller.quorum.voters); deploy it with --quorum dynamic")
    view = control.describe_voters()
    return {"leader": view.leader, "voters": view.voters,
            "spares": [n for n in control.controllers() if n not in view.voters]}


def _clock_op(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    match args.clock:
        case "bump":
            return "clock-bump", {"nodes": [args.node], "delta_ms": args.delta}
        case "rate":
            return "clock-rate", {"nodes": [args.node], "rate": args.rate}
        case "strobe":
            return "clock-strobe", {"nodes": [args.node], "low_ms": 0.0, "high_ms": args.high,
                                    "period_ms": args.period}
        case "step":
            return "clock-step", {"nodes": [args.node], "delta_s": args.delta / 1000.0}
    return "clock-reset", {"nodes": args.nodes} if args.nodes else {}


def _packet_op(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.kind == "heal":
        return "stop-packet", {}
    value: dict[str, Any] = {"kind": args.kind}
    if args.nodes:
        value["nodes"] = args.nodes
    if args.amount is not None:
        key = {"loss": "probability", "bandwidth": "rate", "delay": "delay_ms"}.get(args.kind, "percent")
        value[key] = args.amount if key == "rate" else float(args.amount)
    return "start-packet", value


def node_control(lab: Any) -> NodeControl:
    """The lab's deployed node (kraftlab.deploy); without a deployment, plain daemons named kraft-node
    (signals and network/clock faults work, starting a node does not)."""
    from kraftlab.deploy import DAEMON, load_deployment

    try:
        return load_deployment(lab)
    except LookupError:
        from kraftlab.nemesis.daemon_control import DaemonNodeControl

        return DaemonNodeControl(lab.hosts, daemon=DAEMON)


def _print(type_: str, f: str, value: Any = None, *, node: str | None = None, error: str | None = None) -> None:
    print(json.dumps({"process": "nemesis", "type": type_, "f": f, "value": value, "node": node, "error": error},
                     default=str), flush=True)


def main(args: argparse.Namespace) -> int:
    from kraftlab.control.labs import load_lab

    try:
        lab = load_lab(args.lab)
    except (LookupError, ValueError) as exc:
        print(f"kraftlab nemesis: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        nemesis = Nemesis(lab.name, node_control(lab), recorder=_print, ledger=ledger_for(lab.name),
                          seed=time.monotonic_ns())
        if args.action == "status":
            shown: dict[str, Any] = nemesis.status()
            if args.live:
                shown = {"in_force": shown, "hosts": nemesis.observed()}
            print(json.dumps(shown, indent=1, sort_keys=True))
            return EXIT_OK
        if args.action == "heal":
            return _exit(nemesis.heal_all())
        if args.action == "replay":
            try:
                schedule = load(args.run_dir)
            except ScheduleError as exc:
                print(f"kraftlab nemesis: {exc}", file=sys.stderr)
                return EXIT_BAD_ARGS
            with guarded(nemesis):
                return _exit(ScheduleRunner(nemesis, schedule).run())
        try:
            op = _op(args)
            if op is None:  # membership describe
                print(json.dumps(describe_membership(nemesis.control), indent=1, sort_keys=True))
                return EXIT_OK
        except ValueError as exc:
            print(f"kraftlab nemesis: {exc}", file=sys.stderr)
            return EXIT_BAD_ARGS
        except HostError as exc:
            print(f"kraftlab nemesis: {exc}", file=sys.stderr)
            return EXIT_NOT_APPLIED
        if op[0] == "clock-strobe":  # the strobe lives in this process: run it, then reset
            with guarded(nemesis):
                done = nemesis.invoke(*op)
                if done.type == "ok":
                    time.sleep(args.duration / 1000.0)
            return _exit([done])
        return _exit([nemesis.invoke(*op)])
    finally:
        lab.close()


def _exit(done: list[Completion]) -> int:
    return EXIT_OK if all(c.type == "ok" for c in done) else EXIT_NOT_APPLIED
