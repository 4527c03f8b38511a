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
                                          (4, {"faults": ("flapping",)}), (5, {"retention_bytes": 200}),
                                          (6, {"rogue": True, "first_id": 0})])
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


class FlushesInWords(RaftCore):
    """A follower that journals (and counts) what it appends as flushed, without flushing it."""

    def _append_local(self, batches: Any, leader: bool) -> None:
        if leader:
            return super()._append_local(batches, leader)
        log = self.log
        durable = log.flushed_end_offset()
        super()._append_local(batches, leader)
        self._durable = log.end_offset()
        log._flushed = durable  # type: ignore[attr-defined]  # the in-memory log: as if never flushed
        self._out.events[-1]["end"] = self._durable


class _KeepsNoVotes:
    """A quorum-state file that loses every write of a vote for another node."""

    def __init__(self, store: Any, node_id: int) -> None:
        self.store, self.node_id = store, node_id

    def read(self) -> Any:
        return self.store.read()

    def write(self, state: Any) -> None:
        if state.voted_id in (None, self.node_id):
            self.store.write(state)


class VotesWithoutWriting(RaftCore):
    """Grants votes without persisting them (its quorum-state file never holds a vote for another)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quorum_state.store = _KeepsNoVotes(self.quorum_state.store, self.node_id)


WRONG: list[tuple[str, type[RaftCore], str]] = [
    ("a flush it never did", FlushesInWords, "JournalTrue"),
    ("a vote it never wrote", VotesWithoutWriting, "JournalTrue"),
    ("voters at start it does not have", _rewritten("start", lambda e: _set(e, voters=e["voters"][1:])), "JournalTrue"),
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
    # a step that truncates and appends shows the lie in its append line (JournalTrue); one that only
    # truncates (a crash right after it, say) leaves the replay longer than the log (JournalComplete)
    ("no truncation", _rewritten("truncate", lambda e: None), "JournalTrue or JournalComplete"),
    ("a field missing", _rewritten("vote", lambda e: {k: v for k, v in e.items() if k != "pre_vote"}),
     "JournalTrue"),
    ("a refusal in another state", _rewritten("vote", lambda e: _set(e, reason="already resigned in epoch")
                                               if e["reason"].startswith("already ") else e), "JournalTrue"),
    ("a refusal said granted", _rewritten("vote", lambda e: _set(e, granted=True) if e["reason"] == "log behind"
                                           else e), "JournalTrue"),
    ("a refusal no rule knows", _rewritten("vote", lambda e: _set(e, reason="busy") if not e["granted"] else e),
     "JournalTrue"),
    ("a refusal as another role", _rewritten("vote", lambda e: _set(e, reason="leader")
                                              if e["reason"] == "following a live leader" else e), "JournalTrue"),
]


@pytest.mark.parametrize(("what", "core_class", "rule"), WRONG, ids=[w[0] for w in WRONG])
def test_a_journal_that_lies_or_omits_is_caught(what: str, core_class: type[RaftCore], rule: str) -> None:
    assert _first_finding(lambda seed: _raft(seed, core_class, flush_delay_ms=20).run()) in rule.split(" or ")


def _first_finding(run: Any, seeds: range = range(1, 6)) -> str:
    """The rule the first of `seeds` whose run breaks one names (a run may not reach the lie)."""
    for seed in seeds:
        try:
            run(seed)
        except InvariantViolation as caught:
            return caught.name
    return "nothing"


def _appends_the_set_it_had(e: dict[str, Any]) -> dict[str, Any]:
    return _set(e, voters=e["voters"][:-1]) if e["action"] == "appended" and e["kind"] == "add" else e


@pytest.mark.parametrize(("what", "core_class", "rule"), [
    ("a set one offset later", _rewritten("voters", lambda e: _set(e, offset=e["offset"] + 1)), "JournalComplete"),
    ("an added voter missing", _rewritten("voter_change", _appends_the_set_it_had), "JournalTrue"),
    ("a start on another disk", _rewritten("start", lambda e: _set(e, directory_id="AAAAAAAAAAAAAAAAAAAAAA")),
     "JournalTrue"),
    ("a set appended told truncated",
     _rewritten("voters", lambda e: _set(e, reason="truncate") if e["reason"] == "append" else e), "JournalTrue"),
])
def test_a_dynamic_quorums_lying_journal_is_caught(what: str, core_class: type[RaftCore], rule: str) -> None:
    def run(seed: int) -> None:
        params = MembershipParams(SimParams(seed=seed, voters=5, faults=("crash",), journal=True), initial=2,
                                  change_every_ms=300)
        MembershipSimulation(params, core_class=core_class).run()

    assert _first_finding(run) == rule


# ------------------------------------------------------------------ the same facts as the checker reads


def test_the_judges_read_every_field_the_checkers_contract_names() -> None:
    for kind, wanted in FIELDS.items():
        assert kind in JUDGES, kind
        assert set(wanted) <= set(JUDGES[kind].reads), (kind, set(wanted) - set(JUDGES[kind].reads))
    for action, wanted in CHANGE_FIELDS.items():
        assert set(wanted) <= set(CHANGE_READS[action]), action


class Recording:
    """Keeps every node's journal lines as a real node writes them, and before a node crashes and at
    the end compares what the checker's replay of its journal so far says with the core's state."""

    lines: list[dict[str, Any]]
    compared: int = 0

    def _dispatch(self, node: Any, out: Output, now: int) -> None:
        self.lines += [{"ts": now, "mono": now * 1_000_000, "node": node.node_id, **e} for e in out.events]
        super()._dispatch(node, out, now)  # type: ignore[misc]

    def crash_node(self, node: Any, wipe: bool) -> None:
        self.agree(node)
        super().crash_node(node, wipe)  # type: ignore[misc]

    def agree(self, node: Any) -> None:
        nid, core = node.node_id, node.core
        if core is None:
            return
        lines = [x for x in self.lines if x["node"] == nid]
        told = Replay(journals_from(lines, "sim")).nodes[nid]
        facts, moment = facts_of(core), told.end
        life = lines[max(i for i, x in enumerate(lines) if x["ev"] == "start"):]
        # (the replay forgets the entries a loaded snapshot covers; the log may still hold them)
        known = max([facts.log_start] + [x["offset"] for x in life if x["ev"] == "snapshot" and
                                          x["action"] in ("load", "fetch")])
        assert (moment.epoch, moment.hw, told.log_end, moment.durable) == (
            facts.epoch, facts.hw, facts.log_end, facts.durable), nid
        assert moment.role == (facts.role if core.is_voter else "observer"), nid
        held = {o: (b.epoch, r.crc()) for b in node.log.batches() for o, r in enumerate(b.records, b.base_offset)}
        assert {o: (ep, crc) for o, (ep, crc, _) in told.log.items() if o >= known} == {
            o: x for o, x in held.items() if o >= known}, nid
        if facts.voters is not None:
            offset, ids, dirs, _ = facts.voters
            assert moment.voters[-1] == (offset, frozenset(zip(ids, dirs, strict=True))), nid
        self.compared += 1


class RecordingRaft(Recording, Simulation):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines = []


class RecordingMembership(Recording, MembershipSimulation):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines = []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_checkers_replay_of_the_journals_is_the_cores_state(seed: int) -> None:
    s = RecordingRaft(SimParams(seed=seed, voters=3, observers=1, faults=FAULTS, journal=True,
                                flush_delay_ms=20 if seed == 2 else 0))
    s.run()
    for node in s.nodes.values():
        s.agree(node)
    assert s.compared > len(s.nodes)  # crashes were compared too


def test_the_checkers_replay_of_a_dynamic_quorums_journals_is_the_cores_state() -> None:
    params = MembershipParams(SimParams(seed=2, voters=5, faults=("crash", "wipe"), journal=True), initial=2,
                              change_every_ms=300)
    s = RecordingMembership(params)
    s.run()
    for node in s.nodes.values():
        s.agree(node)
    assert s.compared > len(s.nodes)


def test_a_journalling_run_replays_from_its_command() -> None:
    from kraftlab.node.sim.replay import parse

    params = SimParams(seed=4, voters=3, observers=1, faults=("crash",), journal=True)
    assert parse(params.replay_command().split()[3:]) == params
