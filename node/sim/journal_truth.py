"""The Raft journal as a witness: every line true, nothing missing (judged on every simulated step).

Real runs are judged from the node journals alone (the checker's Raft rules replay them); the
simulator judges the core's state. This module ties the two: after every step of a journalling core
it compares the core's observable state before and after the step (`Facts`: role, epoch, leader,
vote, high-water mark, log start and end, the log's last epoch, the durable end the core counts,
the snapshots it stores, the voter set in force) with what the step's `Output.events` claim.

- JournalTrue: each event describes a transition that happened in that step, with the values the
  core holds: folded in order over the state before the step, a line must move something (a `role`
  line naming the state the node was already in, an `hw` not above the last one, a `flush` to the
  durable end already counted, a `voters` line naming the set already in force are lies), and agree
  with where the fold stands (an append at the log's end, as leader only while leader and in its
  epoch, with the epoch, CRCs and control flag of the batch the log holds; a truncation from the
  log's end with the epoch the log ended with; a granted vote the state holds, a refused one for a
  known reason the state bears out (stale epoch, the vote held, the role); a snapshot created,
  fetched or deleted that the store did not or did hold; a snapshot loaded that is the latest it
  holds; a `start` line naming the storage, quorum-state file, voters, directory id and roles it
  started on; a `voters` line, or a truncation for a snapshot, naming a cause the step journalled); and what
  the step leaves must be on disk as told: no durable end beyond the log's own durable end, and the
  quorum-state file holding the epoch, leader and vote of the last `role` line.
- JournalComplete: once the step's events are folded, the fold equals the core's state after the
  step: every change of those quantities has its event (the fields the checkers read included).

The event kinds are `JUDGES`' keys, each with the fields it reads (a test holds them to the
checker's journal contract, so the two cannot drift apart); an event of a kind no judge knows, or
missing a field its judge reads, is itself a JournalTrue violation — a new event cannot slip past.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.ports import OffsetAndEpoch, StateMachine
from kraftlab.node.sim.journal_judging import Judge, judge_lines

if TYPE_CHECKING:
    from kraftlab.node.raft.core import RaftCore

Fail = Callable[[str, str], None]
VoterFacts = tuple[int, tuple[int, ...], tuple[str | None, ...], int]
"""(offset of the record that brought the set in force, ids, directory ids, kraft.version)."""


class Facts(NamedTuple):
    """What a core holds that its journal must tell (None: not known, as a node's role before its
    first `role` line of a process life, or its log's last epoch after a truncation)."""

    role: str | None
    """The state's role (the journal says `observer` instead for a node outside the voter set)."""
    epoch: int | None
    leader: int | None
    voted: int | None
    hw: int
    log_start: int
    log_end: int
    last_epoch: int | None
    durable: int
    snapshots: frozenset[OffsetAndEpoch]
    voters: VoterFacts | None
    """The voter set in force (a dynamic quorum's; None for a static quorum, which never journals it)."""


def _voter_facts(core: RaftCore) -> VoterFacts | None:
    if core._journalled_voters is None and not core._dynamic and core.control.kraft_version == 0:
        return None
    history = core.voter_history
    latest = history.latest
    dirs = tuple(None if (v := latest.voter(i)) is None or v.directory_id is None else uuid_to_kafka(v.directory_id)
                 for i in latest.ids)
    return (history.last_offset, tuple(latest.ids), dirs, core.control.kraft_version)


def facts_of(core: RaftCore) -> Facts:
    """The core's observable state now."""
    state = core.state
    log = core.log
    return Facts(
        role=state.role.value,
        epoch=state.epoch,
        leader=state.leader_id,
        voted=state.voted_id,
        hw=core.high_watermark,
        log_start=log.start_offset(),
        log_end=log.end_offset(),
        last_epoch=log.last_epoch(),
        durable=core._durable,
        snapshots=frozenset(core.snapshots.ids()),
        voters=_voter_facts(core),
    )


def storage_facts(core: RaftCore) -> Facts:
    """What a core about to `start` finds on its storage (its state is not known until it journals it)."""
    log = core.log
    return Facts(None, None, None, None, 0, log.start_offset(), log.end_offset(), log.last_epoch(),
                 log.flushed_end_offset(), frozenset(core.snapshots.ids()), None)


@dataclass(slots=True)
class Step:
    """One step being judged: the fold of its events so far (`now`) and the core after it."""

    core: RaftCore
    now: Facts
    stored: tuple[int | None, int | None] | None = None
    """A `start` step's: the (epoch, vote) its quorum-state file held ((None, None): no file)."""
    appends: list[dict[str, Any]] | None = None
    """The step's appends, judged against the log it leaves (None: a truncation in the step may have
    cut them, so the log no longer tells)."""
    causes: frozenset[str] = frozenset()
    """What the step journalled that a `voters` or a snapshot truncation names as its cause: `start`,
    `append` (of a control batch), `truncate`, `snapshot` (fetched)."""
    change: dict[str, Any] | None = None
    """The voter change the step journalled `appended`, until the `voters` line its record brings."""

    def voter(self) -> bool:
        """Whether the node is in the voter set the fold has in force."""
        core = self.core
        voters = self.now.voters
        if voters is None:
            return core.node_id in core.voter_set.ids
        mine = None if core.directory_id is None else uuid_to_kafka(core.directory_id)
        named = zip(voters[1], voters[2], strict=True)
        return any(i == core.node_id and (d is None or mine is None or d == mine) for i, d in named)




def _start(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    if s.stored is None:
        return "a `start` line in the middle of a process life"
    claimed = (e["log_start"], e["log_end"])
    if claimed != (n.log_start, n.log_end):
        return f"a start on log [{claimed[0]}, {claimed[1]}) where the storage holds [{n.log_start}, {n.log_end})"
    stored = (e["stored_epoch"], e["stored_vote"])
    if stored != s.stored:
        return f"a start reading quorum-state (epoch, vote) {stored} where the file held {s.stored}"
    core = s.core
    if sorted(e["voters"]) != sorted(core.voters):
        return f"a start naming voters {e['voters']} where the set in force is {list(core.voters)}"
    directory = None if core.directory_id is None else uuid_to_kafka(core.directory_id)
    if (e["directory_id"], e["roles"]) != (directory, core.roles):
        return f"a start on directory {e['directory_id']} as {e['roles']} where the node is {directory} as {core.roles}"
    s.now = n._replace(hw=e["hw"])
    return None


def _role(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    role, epoch, leader, voted = e["role"], e["epoch"], e["leader"], e["voted_for"]
    if (role, epoch, leader, voted) == (n.role, n.epoch, n.leader, n.voted) and role != "prospective":
        # (a prospective node whose pre-vote round ended starts the next round: a new state)
        return f"a role line naming the state the node was already in ({role} of epoch {epoch})"
    if n.epoch is not None and epoch < n.epoch:
        return f"a role line of epoch {epoch} after epoch {n.epoch}"
    if (role == "observer") == s.voter():
        return f"a role line `{role}` for a node {'in' if s.voter() else 'outside'} the voter set in force"
    s.now = n._replace(role=role, epoch=epoch, leader=leader, voted=voted)
    return None


def _vote(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    if e["granted"] and not e["pre_vote"] and (n.epoch, n.voted) != (e["epoch"], e["candidate"]):
        return (f"a vote granted to {e['candidate']} in epoch {e['epoch']} while the node's state holds a vote "
                f"for {n.voted} in epoch {n.epoch}")
    if e["granted"] != (e["reason"] == "ok"):
        return f"a vote {'granted' if e['granted'] else 'refused'} for the reason {e['reason']!r}"
    return None if e["granted"] else _refusal(n, e)


REFUSALS = ("ok", "invalid log position", "invalid candidate id", "stale epoch", "not a voter", "another directory id",
            "log behind", "voted for ", "already ", "leader", "following a live leader")
"""The reasons a `vote` line gives (the coverage tells the refusals taken before the vote was weighed)."""


def _refusal(n: Facts, e: dict[str, Any]) -> str | None:
    """What is false in refused vote `e` about the state `n` it was refused in."""
    reason, role = e["reason"], n.role
    if not any(reason == r or (r.endswith(" ") and reason.startswith(r)) for r in REFUSALS):
        return f"a vote refused for a reason no rule knows, {reason!r} (a new one goes into REFUSALS)"
    if reason == "stale epoch":
        # A pre-vote asks for its candidate's epoch + 1: it is stale when the candidate's own epoch is.
        asked = e["epoch"] - 1 if e["pre_vote"] else e["epoch"]
        return None if n.epoch is None or asked < n.epoch else (
            f"a vote refused for a stale epoch {asked} while the node was in epoch {n.epoch}")
    if reason.startswith("voted for ") and reason != f"voted for {n.voted}":
        return f"a vote refused as `{reason}` while the node's vote was for {n.voted}"
    if role == "observer":
        return None  # (its state's role is not journalled)
    if reason.startswith("already ") and reason != f"already {role} in epoch":
        return f"a vote refused as `{reason}` by a {role}"
    refuser = {"leader": "leader", "following a live leader": "follower"}.get(reason)
    if refuser is not None and role != refuser:
        return f"a pre-vote refused as `{reason}` by a {role}"
    return None


def _append(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    base, epoch, crcs = e["base"], e["epoch"], e["crcs"]
    if base != n.log_end:
        return f"an append at {base} where the log ended at {n.log_end}"
    if e["leader"] != (n.role == "leader"):
        return f"an append {'as' if e['leader'] else 'not as'} leader by a {n.role}"
    if e["leader"] and epoch != n.epoch:
        return f"an append as leader of epoch {epoch} in epoch {n.epoch}"
    if not crcs:
        return "an append of no records"
    if s.appends is not None:
        s.appends.append(e)
    s.now = n._replace(log_end=base + len(crcs), last_epoch=epoch)
    return None


def _flush(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    end = e["end"]
    if end == n.durable:
        return f"a flush to {end}, the durable end already counted"
    if end > n.log_end:
        return f"a flush to {end} past the log's end {n.log_end}"
    s.now = n._replace(durable=end)
    return None


def _truncate(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    to, reason = e["to"], e["reason"]
    s.appends = None
    if e["from"] != n.log_end:
        return f"a truncation from {e['from']} where the log ended at {n.log_end}"
    if reason == "diverging":
        if to >= n.log_end:
            return f"a truncation to {to} that cuts nothing of the log ending at {n.log_end}"
        if to > e["diverging_end_offset"]:
            return f"a truncation to {to} past the diverging end offset {e['diverging_end_offset']}"
        if n.last_epoch is not None and e["last_fetched_epoch"] != n.last_epoch:
            return f"a truncation naming last fetched epoch {e['last_fetched_epoch']}, the log's being {n.last_epoch}"
        s.now = n._replace(log_end=to, durable=min(n.durable, to), last_epoch=None)
    elif reason == "snapshot":
        if "snapshot" not in s.causes:
            return "a truncation for a snapshot in a step that fetched none"
        s.now = n._replace(log_start=to, log_end=to, durable=to, last_epoch=None)
    else:
        s.now = n._replace(log_end=to, durable=min(n.durable, to), last_epoch=None)
    return None


def _hw(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    hw = e["hw"]
    if hw <= n.hw:
        return f"a high-water mark {hw} not above the last one, {n.hw}"
    if hw > n.log_end:
        return f"a high-water mark {hw} past the log's end {n.log_end}"
    if e["epoch"] != n.epoch:
        return f"a high-water mark of epoch {e['epoch']} in epoch {n.epoch}"
    s.now = n._replace(hw=hw)
    return None


def _snapshot(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    action, sid = e["action"], OffsetAndEpoch(e["offset"], e["epoch"])
    held = sid in n.snapshots
    if action == "load":
        if not held or sid != max(n.snapshots):
            return f"a snapshot {sid} loaded where the latest the store holds is {max(n.snapshots, default=None)}"
        return None
    if action == "delete":
        if not held:
            return f"a snapshot {sid} deleted that the store does not hold"
        s.now = n._replace(snapshots=n.snapshots - {sid})
        return None
    if held:
        return f"a snapshot {sid} {action}ed that the store already held"
    if action == "create" and e["offset"] > n.hw:
        return f"a snapshot created up to {e['offset']} beyond the high-water mark {n.hw}"
    s.now = n._replace(snapshots=n.snapshots | {sid})
    return None


def _retention(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    if e["from"] != n.log_start or e["log_start"] <= n.log_start:
        return f"a retention from {e['from']} to {e['log_start']} where the log started at {n.log_start}"
    s.now = n._replace(log_start=e["log_start"])
    return None


def _voters(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    claimed: VoterFacts = (e["offset"], tuple(e["voters"]), tuple(e["directory_ids"]), e["kraft_version"])
    if claimed == n.voters:
        return f"a voters line naming the set already in force ({claimed[1]} from offset {claimed[0]})"
    if e["reason"] not in s.causes:
        return f"a voters line for a{'n' if e['reason'][0] in 'aeiou' else ''} {e['reason']} in a step without one"
    change, s.change = s.change, None
    if change is not None and (change["offset"], sorted(change["voters"])) != (e["offset"], sorted(e["voters"])):
        return (f"a voter set appended at {change['offset']} naming {sorted(change['voters'])} where the record it "
                f"wrote brings {sorted(e['voters'])} into force at {e['offset']}")
    s.now = n._replace(voters=claimed)
    return None


def _voter_change(s: Step, e: dict[str, Any]) -> str | None:
    n = s.now
    action = e["action"]
    if action in ("requested", "appended", "committed", "timed_out") and n.role != "leader":
        return f"a voter change `{action}` by a {n.role}"
    if action == "appended" and e["offset"] != n.log_end:
        return f"a voter set appended at {e['offset']} where the log ended at {n.log_end}"
    if action == "appended":
        s.change = e
    if action == "committed" and e["offset"] >= n.hw:
        return f"a voter set at {e['offset']} committed below the high-water mark {n.hw}"
    return None


def _said(s: Step, e: dict[str, Any]) -> str | None:
    return None  # a finding of the node's own (damaged storage): no state of the core moves


JUDGES: dict[str, Judge[Step]] = {
    "start": Judge(("roles", "voters", "log_start", "log_end", "hw", "stored_epoch", "stored_vote", "directory_id"),
                   _start),
    "role": Judge(("role", "epoch", "leader", "voted_for"), _role),
    "vote": Judge(("epoch", "candidate", "granted", "pre_vote", "reason"), _vote),
    "append": Judge(("base", "epoch", "crcs", "control", "leader"), _append),
    "flush": Judge(("end",), _flush),
    "truncate": Judge(("to", "from", "reason"), _truncate),
    "hw": Judge(("hw", "epoch"), _hw),
    "snapshot": Judge(("action", "offset", "epoch"), _snapshot),
    "retention": Judge(("log_start", "from", "reason"), _retention),
    "voters": Judge(("offset", "voters", "directory_ids", "kraft_version", "reason"), _voters),
    "voter_change": Judge(("action",), _voter_change),
    "corruption": Judge(("path", "offset", "reason", "below_hw"), _said),
}
"""Event kind → the fields the checkers read and the judge of its truth."""

CHANGE_READS: dict[str, tuple[str, ...]] = {
    "requested": ("kind", "voter"),
    "appended": ("kind", "voter", "offset", "voters"),
    "committed": ("kind", "voter", "offset"),
    "timed_out": ("kind", "voter"),
    "refused": ("error", "reason"),
}
"""A `voter_change` action → the further fields it carries."""

DIVERGING_READS = ("diverging_epoch", "diverging_end_offset", "last_fetched_epoch")
"""A diverging truncation's further fields (the coverage counts truncations by them)."""


def reads(e: dict[str, Any]) -> tuple[str, ...] | None:
    """The fields event `e` must carry (None: a kind no judge knows)."""
    judge = JUDGES.get(str(e.get("ev")))
    if judge is None:
        return None
    if e.get("ev") == "voter_change":
        return judge.reads + CHANGE_READS.get(str(e.get("action")), ("unknown action",))
    if e.get("ev") == "truncate" and e.get("reason") == "diverging":
        return judge.reads + DIVERGING_READS
    return judge.reads


def _causes(events: list[dict[str, Any]]) -> frozenset[str]:
    out = set()
    for e in events:
        ev = e.get("ev")
        if ev in ("start", "truncate") or (ev == "append" and e.get("control")):
            out.add(str(ev))
        elif ev == "snapshot" and e.get("action") == "fetch":
            out.add("snapshot")
    return frozenset(out)


def _held(core: RaftCore, e: dict[str, Any]) -> str | None:
    """What is false in append `e` about the batch the log holds at its base after the step."""
    log = core.log
    base = e["base"]
    if base < log.start_offset() or base >= log.end_offset():
        return None  # gone behind the log start (retention in the same step)
    batch = log.read(base, 1)[0]
    if (batch.epoch, [r.crc() for r in batch.records], batch.control) != (e["epoch"], e["crcs"], e["control"]):
        return (f"an append at {base} of epoch {e['epoch']} ({len(e['crcs'])} records, control {e['control']}) where "
                f"the log holds a batch of epoch {batch.epoch} ({len(batch.records)} records, control {batch.control}) "
                "with other CRCs")
    return None


def _kept(core: RaftCore, told: Facts) -> str | None:
    """What the journal of a step claims is on disk and is not: its durable end (a `flush` says the log
    is durable that far) and its election state (a `role` line's epoch, leader and vote are in the
    quorum-state file before anything the step sends can imply them)."""
    flushed = core.log.flushed_end_offset()
    if told.durable > flushed:
        return f"a durable end {told.durable} where the log is durable to {flushed}"
    stored = core.quorum.read()
    held = None if stored is None else (stored.leader_epoch, stored.leader_id, stored.voted_id)
    if told.epoch is not None and held != (told.epoch, told.leader, told.voted):
        return f"epoch {told.epoch}, leader {told.leader}, vote {told.voted} where the quorum-state file holds {held}"
    return None


def _complete(before: Facts, folded: Facts, after: Facts) -> list[str]:
    """The quantities whose change the step's events do not tell (or tell wrong)."""
    if folded == after:
        return []
    out = []
    for name in Facts._fields:
        told, held = getattr(folded, name), getattr(after, name)
        if (told is None and name in ("last_epoch", "role", "epoch")) or (name == "role" and told == "observer"):
            continue  # not known from the journal alone (after a truncation; before the first role line)
        if told != held:
            out.append(f"{name} went from {getattr(before, name)} to {held} but the journal tells {told}")
    return out


class JournalTruth:
    """JournalTrue and JournalComplete over every step of every journalling core (module docstring)."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self._facts: dict[int, Facts] = {}
        self._stored: dict[int, tuple[int | None, int | None]] = {}

    def starting(self, node_id: int, core: RaftCore) -> None:
        """`core` is about to `start`: its next step begins from its storage."""
        self._facts[node_id] = storage_facts(core)
        stored = core.quorum.read()
        self._stored[node_id] = (None, None) if stored is None else (stored.leader_epoch, stored.voted_id)

    def stepped(self, node_id: int, core: RaftCore, out: Output) -> None:
        """Judge the events of the step `core` just took against its state before and after."""
        if not core.journal:
            return
        before = self._facts.get(node_id)
        after = facts_of(core)
        if before is None:  # a core this judge did not see start: judged from its next step on
            self._facts[node_id] = after
            return
        step = Step(core, before, self._stored.pop(node_id, None), [], _causes(out.events))
        judge_lines(JUDGES, reads, step, out.events,
                    lambda problem: self.fail("JournalTrue", f"node {node_id} {problem}"))
        for e in step.appends or ():
            problem = _held(core, e)
            if problem is not None:
                self.fail("JournalTrue", f"node {node_id} journalled {problem}: {e}")
        wrong = _complete(before, step.now, after)
        if wrong:
            self.fail("JournalComplete", f"node {node_id}'s step journalled {[e.get('ev') for e in out.events]}: "
                      + "; ".join(wrong))
        problem = _kept(core, step.now)
        if problem is not None:
            self.fail("JournalTrue", f"node {node_id}'s journal tells {problem}")
        self._facts[node_id] = after

    def crashed(self, node_id: int) -> None:
        self._facts.pop(node_id, None)
        self._stored.pop(node_id, None)


class JudgedRaftNode(RaftNode):
    """A RaftNode whose core's every step is judged by `truth` as it returns, before the state machine
    sees it (and the snapshot the machine then asks for as a step of its own). A driver whose machine
    appends from within a step (the cluster simulator's controllers) hands out those appends' outputs
    before the step's own, so judging what it dispatches would take the steps out of order."""

    def __init__(self, core: RaftCore, machine: StateMachine, snapshot_every_records: int, truth: JournalTruth,
                 node_id: int) -> None:
        super().__init__(core, machine, snapshot_every_records)
        self.truth, self.node_id = truth, node_id

    def _apply(self, out: Output, now: int) -> Output:
        self.truth.stepped(self.node_id, self.core, out)
        told = len(out.events)
        out = super()._apply(out, now)
        if len(out.events) > told:  # a snapshot the machine asked for: the core's next step
            self.truth.stepped(self.node_id, self.core, Output(events=out.events[told:]))
        return out
