"""The Raft journal as a witness (node.sim.journal_truth): on the correct core every journalled step
is true and complete over faulty runs of the Raft and the membership simulators; a core that journals
a non-move, an off-by-one value, a wrong field, a kind nobody knows, or drops an event is caught; the
judges read every field the checker's journal contract names; and the journals, read back by the
checker's own reader (the real-run replay), give the state the cores hold."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft.journal_contract import CHANGE_FIELDS, FIELDS
from kraftlab.checker.raft.replay import Replay
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.output import Output
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.journal_truth import CHANGE_READS, JUDGES, facts_of
from kraftlab.node.sim.membership import MembershipParams, MembershipSimulation

FAULTS = ("partition", "crash", "wipe", "drop")


def _raft(seed: int, core_class: type[RaftCore] = RaftCore, **kw: Any) -> Simulation:
    params = SimParams(seed=seed, voters=3, observers=1, faults=kw.pop("faults", FAULTS), journal=True, **kw)
    return Simulation(params, core_class=core_class)


@pytest.mark.parametrize(("seed", "kw"), [(1, {}), (2, {"flush_delay_ms": 20}), (3, {"refusals": True}),
                                          (4, {"faults": ("flapping",)}), (5, {"retention_bytes": 200})])
def test_the_cores_journal_tells_every_step_truly(seed: int, kw: dict[str, Any]) -> None:
    s = _raft(seed, **kw)
    s.run()
    assert s.result.snapshots_loaded + sum(s.result.truncations.values()) > 0  # the rule saw more than appends


@pytest.mark.parametrize("seed", [1, 2])
def test_a_dynamic_quorums_journal_tells_every_step_truly(seed: int) -> None:
    params = MembershipParams(SimParams(seed=seed, voters=5, faults=("crash", "partition", "wipe"), journal=True),
                              initial=2, change_every_ms=300)
    s = MembershipSimulation(params)
    s.run()
    assert s.report.changes_committed > 0


# ------------------------------------------------------------------ wrong cores are caught


def _rewritten(ev: str, rewrite: Any) -> type[RaftCore]:
    """A core whose step output's `ev` lines go through `rewrite` (a line, or None: dropped)."""

    class Rewriting(RaftCore):
        def _end(self, now: int) -> Output:
            out = super()._end(now)
            out.events = [x for e in out.events if (x := rewrite(dict(e)) if e["ev"] == ev else e) is not None]
            return out

    return Rewriting


def _set(e: dict[str, Any], **kw: Any) -> dict[str, Any]:
    e.update(kw)
    return e


class RepeatsItsFlush(RaftCore):
    """Journals its durable end again with every high-water mark: a flush that moved nothing."""

    def _set_hw(self, hw: int) -> None:
        super()._set_hw(hw)
        self._event("flush", end=self._durable)


class JournalsACommit(RaftCore):
    """Journals a kind of event no rule knows."""

    def _set_hw(self, hw: int) -> None:
        super()._set_hw(hw)
        self._event("commit", offset=hw)


WRONG: list[tuple[str, type[RaftCore], str]] = [
    ("a non-move", RepeatsItsFlush, "JournalTrue"),
    ("a kind nobody knows", JournalsACommit, "JournalTrue"),
    ("an hw off by one", _rewritten("hw", lambda e: _set(e, hw=e["hw"] - 1)), "JournalTrue"),
    ("an append one further", _rewritten("append", lambda e: _set(e, base=e["base"] + 1)), "JournalTrue"),
    ("its vote as the leader", _rewritten("role", lambda e: _set(e, voted_for=e["leader"])), "JournalComplete"),
    ("the epoch before", _rewritten("role", lambda e: _set(e, epoch=max(0, e["epoch"] - 1))), "JournalComplete"),
    ("records reordered", _rewritten("append", lambda e: _set(e, crcs=[e["crcs"][0] ^ 1, *e["crcs"][1:]])),
     "JournalTrue"),
    ("no flush", _rewritten("flush", lambda e: None), "JournalComplete"),
    ("no snapshot deleted", _rewritten("snapshot", lambda e: None if e["action"] == "delete" else e),
     "JournalComplete"),
    ("no high-water mark", _rewritten("hw", lambda e: None if e["hw"] % 5 == 0 else e), "JournalComplete"),
    ("no truncation", _rewritten("truncate", lambda e: None), "JournalTrue"),
    ("a field missing", _rewritten("vote", lambda e: {k: v for k, v in e.items() if k != "pre_vote"}),
     "JournalTrue"),
]


@pytest.mark.parametrize(("what", "core_class", "rule"), WRONG, ids=[w[0] for w in WRONG])
def test_a_journal_that_lies_or_omits_is_caught(what: str, core_class: type[RaftCore], rule: str) -> None:
    with pytest.raises(InvariantViolation) as caught:
        _raft(1, core_class).run()
    assert caught.value.name == rule, str(caught.value)


def test_a_dynamic_quorum_journalling_the_set_it_had_is_caught() -> None:
    wrong = _rewritten("voters", lambda e: _set(e, offset=e["offset"] + 1))
    params = MembershipParams(SimParams(seed=1, voters=5, faults=("crash",), journal=True), initial=2,
                              change_every_ms=300)
    with pytest.raises(InvariantViolation) as caught:
        MembershipSimulation(params, core_class=wrong).run()
    assert caught.value.name in ("JournalComplete", "JournalTrue"), str(caught.value)


# ------------------------------------------------------------------ the same facts as the checker reads


def test_the_judges_read_every_field_the_checkers_contract_names() -> None:
    for kind, wanted in FIELDS.items():
        assert kind in JUDGES, kind
        assert set(wanted) <= set(JUDGES[kind].reads), (kind, set(wanted) - set(JUDGES[kind].reads))
    for action, wanted in CHANGE_FIELDS.items():
        assert set(wanted) <= set(CHANGE_READS[action]), action


class Recording(Simulation):
    """Keeps every node's journal lines as a real node writes them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[dict[str, Any]] = []

    def _dispatch(self, node: Any, out: Output, now: int) -> None:
        self.lines += [{"ts": now, "mono": now * 1_000_000, "node": node.node_id, **e} for e in out.events]
        super()._dispatch(node, out, now)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_checkers_replay_of_the_journals_is_the_cores_state(seed: int) -> None:
    s = Recording(SimParams(seed=seed, voters=3, observers=1, faults=FAULTS, journal=True,
                            flush_delay_ms=20 if seed == 2 else 0))
    s.run()
    replay = Replay(journals_from(s.lines, "sim"))
    for nid, node in s.nodes.items():
        core = node.core
        assert core is not None
        facts, told = facts_of(core), replay.nodes[nid]
        moment = told.end
        assert (moment.epoch, moment.hw, told.log_end) == (facts.epoch, facts.hw, facts.log_end), nid
        assert moment.role == (facts.role if core.is_voter else "observer"), nid
        assert moment.durable == facts.durable, nid
        held = {b.base_offset + i: (b.epoch, r.crc()) for b in node.log.batches() for i, r in enumerate(b.records)}
        assert {o: (ep, crc) for o, (ep, crc, _) in told.log.items() if o >= facts.log_start} == held, nid


def test_a_journalling_run_replays_from_its_command() -> None:
    from kraftlab.node.sim.replay import parse

    params = SimParams(seed=4, voters=3, observers=1, faults=("crash",), journal=True)
    assert parse(params.replay_command().split()[3:]) == params
