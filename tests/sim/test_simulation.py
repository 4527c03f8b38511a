"""The simulator itself: determinism, replay, scripted scenarios and the journal it can record."""

from __future__ import annotations

import pytest
from sim_journal import Journal, run_recording

from kraftlab.node.raft import messages as m
from kraftlab.node.sim.cluster import SimParams, Simulation, run
from kraftlab.node.sim.faults import FaultEvent
from kraftlab.node.sim.replay import main as replay_main


def test_same_parameters_same_run() -> None:
    params = SimParams(seed=11, voters=3, observers=1, faults=("partition", "crash", "drop", "duplicate"))
    a, b = run(params), run(params)
    assert (a.events, a.appended, a.committed_offset, a.max_epoch) == (
        b.events,
        b.appended,
        b.committed_offset,
        b.max_epoch,
    )
    other = run(SimParams(seed=12, voters=3, observers=1, faults=params.faults))
    assert (other.events, other.committed_offset) != (a.events, a.committed_offset)


def test_replay_command_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    params = SimParams(seed=5, voters=3, observers=1, faults=("crash", "oneway"), flush_delay_ms=5, refusals=True)
    command = params.replay_command()
    assert command.startswith(".venv/bin/python -m kraftlab.node.sim.replay --seed 5 --voters 3 --observers 1")
    args = command.split("kraftlab.node.sim.replay ", 1)[1].split()
    assert replay_main(args) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def journaled(faults: list[FaultEvent], **kw: int) -> tuple[Simulation, Journal]:
    sim = Simulation(SimParams(seed=1, voters=3, observers=1, journal=True, **kw), faults=faults)
    return sim, run_recording(sim)


def test_isolated_leader_is_replaced_and_its_tail_discarded() -> None:
    _, seen = journaled([FaultEvent(3000, "isolate", ("leader", 1)), FaultEvent(9000, "rejoin", (1,))], fault_ms=9000)
    leaders = {(e["epoch"], n) for _, n, e in seen if e["ev"] == "role" and e["role"] == "leader"}
    assert len({epoch for epoch, _ in leaders}) == len(leaders) >= 2
    first_leader = min(leaders)[1]
    resigned = [t for t, n, e in seen if n == first_leader and e["ev"] == "role" and e["role"] == "resigned"]
    # check-quorum: 1.5 × fetch timeout after the last Fetch, which came at most a long poll before the cut
    assert resigned and 3000 + 3000 - 500 <= resigned[0] <= 3000 + 3000 + 100
    dropped = [e for _, n, e in seen if n == first_leader and e["ev"] == "truncate"]
    assert dropped and dropped[0]["reason"] in ("diverging", "snapshot")


@pytest.mark.parametrize("flush_delay_ms", [0, 10])
def test_journal_events_follow_the_contract(flush_delay_ms: int) -> None:
    _, seen = journaled(  # no log kept behind snapshots: the restarted node catches up by FetchSnapshot
        [FaultEvent(4000, "crash", ("leader", 1)), FaultEvent(7000, "restart", ("leader", 1))],
        flush_delay_ms=flush_delay_ms,
        retention_bytes=0,
    )
    fields = {
        "start": {"roles", "voters", "log_start", "log_end", "hw", "stored_epoch", "stored_vote", "directory_id"},
        "role": {"role", "epoch", "leader", "voted_for"},
        "vote": {"epoch", "candidate", "granted", "pre_vote", "reason"},
        "append": {"base", "epoch", "crcs", "control", "leader"},
        "flush": {"end"},
        "truncate": {"to", "from", "reason"},
        "hw": {"hw", "epoch"},
        "snapshot": {"action", "offset", "epoch"},
        "retention": {"log_start", "from", "reason"},
    }
    kinds = set()
    for _, _, event in seen:
        kinds.add(event["ev"])
        assert set(event) - {"ev"} == fields[event["ev"]], event
    assert {"start", "role", "vote", "append", "flush", "hw", "snapshot", "retention"} <= kinds
    roles = {e["role"] for _, _, e in seen if e["ev"] == "role"}
    assert {"unattached", "prospective", "candidate", "leader", "follower", "resigned", "observer"} <= roles
    actions = {e["action"] for _, _, e in seen if e["ev"] == "snapshot"}
    assert {"create", "fetch", "load", "delete"} <= actions
    # The journalled durable end: with every append flushed in its step, no node's HW passes its own;
    # with the deferred leader flush, a leader's may (a majority of followers holds it durably).
    flushed: dict[int, int] = {}
    beyond = 0
    for _, node, e in seen:
        if e["ev"] == "flush":
            flushed[node] = e["end"]
        elif e["ev"] == "start":
            flushed[node] = e["log_end"]  # recovery keeps only the durable log
        elif e["ev"] == "truncate":
            flushed[node] = min(flushed.get(node, 0), e["to"]) if e["reason"] != "snapshot" else e["to"]
        elif e["ev"] == "hw" and e["hw"] > flushed.get(node, 0):
            beyond += 1
    assert beyond == 0 if not flush_delay_ms else beyond > 0


def test_requests_to_a_crashed_node_are_refused_and_the_cluster_goes_on() -> None:
    params = SimParams(seed=3, voters=3, fault_ms=6000, refusals=True)
    sim = Simulation(params, faults=[FaultEvent(2000, "crash", ("leader", 1))])
    refused = 0
    refuse = sim._refuse

    def count(env, now):  # type: ignore[no-untyped-def]
        nonlocal refused
        refused += m.is_request(env.message)
        refuse(env, now)

    sim._refuse = count  # type: ignore[method-assign]
    result = sim.run()
    assert refused > 0
    assert result.max_epoch >= 2 and result.committed_offset > 0
