"""`kraftlab nemesis`: argument parsing into nemesis ops, and durations."""

from __future__ import annotations

import argparse

import pytest

from kraftlab.cli import build_parser
from kraftlab.commands.nemesis import _op, describe_membership, parse_duration_ms
from kraftlab.nemesis.fakes import FakeNodeControl, FakeQuorumControl

WAIT = {"deadline_s": 30.0, "wait_s": 30.0}  # by hand, a membership op waits longer than in a run


def op(*argv: str) -> tuple[str, dict] | None:
    return _op(build_parser().parse_args(["nemesis", *argv]))


def test_durations() -> None:
    assert parse_duration_ms("+30s") == 30_000.0
    assert parse_duration_ms("-1500ms") == -1500.0
    assert parse_duration_ms("2m") == 120_000.0
    assert parse_duration_ms("1.5") == 1500.0
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms("soon")


@pytest.mark.parametrize(("argv", "expected"), [
    (["partition", "--topology", "isolate-controller"], ("start-partition", {"topology": "isolate-controller"})),
    (["partition", "--topology", "one-way", "--from", "n1", "--to", "n2,n3"],
     ("start-partition", {"topology": "one-way", "from": ["n1"], "to": ["n2", "n3"]})),
    (["partition", "--topology", "isolate-node", "--nodes", "n4", "--seed", "3"],
     ("start-partition", {"topology": "isolate-node", "nodes": ["n4"], "seed": 3})),
    (["kill", "n2"], ("kill", {"nodes": ["n2"]})),
    (["kill"], ("kill", {"target": "one"})),
    (["pause", "--target", "controller"], ("pause", {"target": "controller"})),
    (["stop", "n1", "n2"], ("graceful-stop", {"nodes": ["n1", "n2"]})),
    (["restart"], ("restart", {})),
    (["resume", "n3"], ("resume", {"nodes": ["n3"]})),
    (["clock", "bump", "n3", "+30s"], ("clock-bump", {"nodes": ["n3"], "delta_ms": 30_000.0})),
    (["clock", "rate", "n1", "1.5"], ("clock-rate", {"nodes": ["n1"], "rate": 1.5})),
    (["clock", "strobe", "n2", "5s", "--period", "100ms"],
     ("clock-strobe", {"nodes": ["n2"], "low_ms": 0.0, "high_ms": 5000.0, "period_ms": 100.0})),
    (["clock", "step", "n2", "-10s"], ("clock-step", {"nodes": ["n2"], "delta_s": -10.0})),
    (["clock", "bump", "n1", "-1500ms"], ("clock-bump", {"nodes": ["n1"], "delta_ms": -1500.0})),
    (["clock", "reset"], ("clock-reset", {})),
    (["packet", "loss", "0.2", "--nodes", "n1"], ("start-packet", {"kind": "loss", "probability": 0.2,
                                                                  "nodes": ["n1"]})),
    (["packet", "bandwidth", "1mbit"], ("start-packet", {"kind": "bandwidth", "rate": "1mbit"})),
    (["packet", "heal"], ("stop-packet", {})),
    (["disk", "flip-bits", "n2", "--seed", "4"], ("start-disk", {"nodes": ["n2"], "damage": "flip-bits", "seed": 4})),
    (["disk", "restore"], ("stop-disk", {})),
    (["disk", "zero", "n1", "--zone", "active-segment", "--amount", "32"],
     ("start-disk", {"nodes": ["n1"], "damage": "zero", "zone": "active-segment", "amount": 32})),
    (["disk", "flip-bits", "--zone", "snapshot", "--helix"],
     ("start-disk", {"target": "all", "damage": "flip-bits", "zone": "snapshot", "helix": True})),
    (["disk", "rollback", "--nodes", "n1,n2", "--zone", "quorum-state"],
     ("start-disk", {"nodes": ["n1", "n2"], "damage": "rollback", "zone": "quorum-state"})),
    (["membership", "add", "n4", "n5"], ("add-controller", {"nodes": ["n4", "n5"], **WAIT})),
    (["membership", "remove", "--target", "controller"], ("remove-controller", {"target": "controller", **WAIT})),
    (["membership", "remove", "n2"], ("remove-controller", {"nodes": ["n2"], **WAIT})),
    (["membership", "replace", "n3"], ("replace-disk", {"nodes": ["n3"], **WAIT})),
    (["membership", "shrink", "--to", "1", "--target", "controller", "--seed", "2"],
     ("start-membership", {"change": "shrink", "to": 1, "target": "controller", "seed": 2, **WAIT})),
    (["membership", "grow", "--to", "5"], ("start-membership", {"change": "grow", "to": 5, **WAIT})),
    (["membership", "heal"], ("stop-membership", WAIT)),
    (["membership", "together", "--pair", "add+add", "--seed", "3"],
     ("start-membership", {"change": "concurrent", "pair": "add+add", "seed": 3, **WAIT})),
    (["membership", "replace", "n2", "--split"],
     ("start-membership", {"change": "replace-split", "elect_s": 5.5, "nodes": ["n2"], **WAIT})),
    (["membership", "replace", "--split", "--elect", "7"], ("start-membership", {"change": "replace-split",
                                                                                "elect_s": 7.0, **WAIT})),
    (["membership", "describe"], None),
])
def test_actions_map_to_ops(argv: list[str], expected: tuple[str, dict] | None) -> None:
    assert op(*argv) == expected


def test_bad_arguments_exit_254() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["nemesis", "partition", "--topology", "moon"])
    assert exc.value.code == 254
    with pytest.raises(ValueError, match="needs a NODE"):
        op("disk", "wipe")
    with pytest.raises(ValueError, match="needs --zone"):
        op("disk", "copy-chunk", "n1")
    with pytest.raises(ValueError, match="needs a NODE"):
        op("membership", "replace")
    with pytest.raises(ValueError, match="replaces a follower"):
        op("membership", "replace", "--split", "--target", "controller")


def test_membership_describe_names_the_leader_voters_and_spares() -> None:
    control = FakeQuorumControl(leader="n2")
    assert describe_membership(control) == {"leader": "n2", "voters": dict(control.voters), "spares": ["n4", "n5"]}
    with pytest.raises(ValueError, match="static"):
        describe_membership(FakeNodeControl())


def test_run_arguments_for_the_test_command() -> None:
    from kraftlab.cli import _Parser
    from kraftlab.nemesis.session import add_run_arguments

    parser = _Parser(prog="t")
    add_run_arguments(parser)
    args = parser.parse_args(["--nemesis", "partition,kill", "--nemesis-interval", "5", "--replay-nemesis", "d"])
    assert (args.nemesis, args.nemesis_interval, args.replay_nemesis) == ("partition,kill", 5.0, "d")
    assert parser.parse_args([]).nemesis == "none"
    for bad in (["--nemesis", "meteor"], ["--nemesis-interval", "0"]):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(bad)
        assert exc.value.code == 254
