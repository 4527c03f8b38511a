"""The Raft journal held to its contract (docs/contracts.md, "Node journal"): what the other rules
read must be there, in order, with the fields the contract names and the values the node's own
journalled state implies. A journal that breaks it is a finding — "the checker cannot judge X
because Y is missing or wrong" —, never silently accepted: a rule that finds no `voters` line, or a
voter change with no `requested`, would otherwise judge nothing and pass.

- JournalFields: every Raft event (`start`, `role`, `vote`, `append`, `flush`, `truncate`, `hw`,
  `snapshot`, `voters`, `voter_change`) carries the fields the contract names, of the right type and
  from the contract's set of values (a `voter_change` the fields of its action).
- VotersAtStart: a node of a dynamic quorum (KIP-853: its journal has `voters` lines) journals, in
  every process life, the voter set in force at start (`voters`, reason `start`) right after its
  `start` line — before any role, vote, append, high-water mark, snapshot or voter change of that
  life — naming the same ids as the `start` line's `voters`; a static quorum's node names itself
  or the quorum's voters on `start` and journals no `voters` at all.
- VoterChangeSequence: the leader's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter, as it journals
  them: a change is `requested` only while leader and only when KIP-853 lets it take one — no
  other change of its leadership in progress, its high-water mark past its epoch's first offset
  (its LeaderChange) and past the offset of the voter set in force — and a leader refuses with
  REQUEST_TIMED_OUT only when one of these does not hold; then either
  `timed_out` (an add whose voter never caught up) or `appended` (the same kind and voter; at the
  log's end — the leader's next `append` starts there and its next `voters` names that offset and
  set —, the set being the one in force with the voter added, removed, or the same ids for an
  update), then `committed` (the same kind, voter and offset, once the leader's high-water mark
  passed that offset). An added voter was no voter when requested; a removed or updated one was.
  A `refused` change says why in Kafka's words: a leader never answers NOT_LEADER_OR_FOLLOWER, a
  node that is not the leader answers only that (or, to an UpdateRaftVoter of another epoch,
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
- RoleLines: each `role` line agrees with itself and with the one before it in that process life,
  as KIP-595 and KIP-996 define the states: a leader and a resigned leader name themselves as
  leader, a candidate has voted for itself and knows no leader, a follower names another node, an
  unattached node knows no leader; a candidate comes from a prospective state, one epoch later
  (pre-vote first, then the epoch bump), a leader from its candidacy in the same epoch, a resigned
  leader from its leadership in the same epoch (or at start: a restarted leader); and a node never
  learns two leaders for one epoch. (`observer` is the role of a node outside the voter set,
  whatever its state: only the one-leader-per-epoch part applies to it. The order of states is
  judged on journals that show the pre-vote states at all: one without is not every transition.)
- LogContinuity: within a process life the node's log, as its own journal tells it, has no gap and
  no overlap: a `start` line's `log_start` and `hw` are no later than its `log_end`; every
  `append` starts at the log's end — the `start` line's `log_end`, moved by each append (`base` +
  its records), truncation (`to`) and snapshot load or fetch (at least its `offset`) —; a
  `diverging` truncation cuts from that end (`from`) to no further than it; and a `flush`, an `hw`
  and a created snapshot never pass it. A line missing or misstated (an append
  unjournalled, a truncation at another offset) breaks the replay every other rule reads.
- LinesInTheirState: each line agrees with the node's state when it was written (the replay's, from
  its own journal): an append as leader comes from the leader, in its epoch; a follower's append
  carries no epoch above the node's; a voter's `hw` names its epoch; a `quorum` sample comes from
  the leader of its epoch; a created snapshot covers only what the node had committed (KIP-630).
  Judged, as RoleLines' order, on journals that show the pre-vote states.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import Entry, field_problems
from kraftlab.checker.raft import voters as vs
from kraftlab.checker.raft.replay import Moment, Replay
from kraftlab.checker.rules import NamedRule

ROLES = ("unattached", "prospective", "candidate", "leader", "follower", "resigned", "observer")
CHANGE_ACTIONS = ("requested", "appended", "committed", "timed_out", "refused")
CHANGE_KINDS = ("add", "remove", "update")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_int(v: Any) -> bool:
    return v is None or _int(v)


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(_int(x) for x in v)


def _one_of(*values: str) -> Any:
    return lambda v: v in values


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


FIELDS: dict[str, dict[str, Any]] = {
    "start": {"roles": lambda v: isinstance(v, list) and all(_str(x) for x in v), "voters": _ints,
              "log_start": _int, "log_end": _int, "hw": _int},
    "role": {"role": _one_of(*ROLES), "epoch": _int, "leader": _opt_int, "voted_for": _opt_int},
    "vote": {"epoch": _int, "candidate": _int, "granted": _bool, "pre_vote": _bool, "reason": _str},
    "append": {"base": _int, "epoch": _int, "crcs": lambda v: _ints(v) and len(v) > 0, "control": _bool,
               "leader": _bool},
    "flush": {"end": _int},
    "truncate": {"to": _int, "from": _int, "reason": _one_of("diverging", "snapshot", "corrupt-tail")},
    "hw": {"hw": _int, "epoch": _int},
    "snapshot": {"action": _one_of("create", "load", "fetch", "delete"), "offset": _int, "epoch": _int},
    "voters": {"offset": _int, "voters": _ints, "directory_ids": lambda v: isinstance(v, list),
               "kraft_version": _int, "reason": _one_of("start", "append", "truncate", "snapshot")},
    "voter_change": {"action": _one_of(*CHANGE_ACTIONS)},
}
"""Event kind → field → the test its value must pass (docs/contracts.md, the Raft events)."""

CHANGE_FIELDS: dict[str, dict[str, Any]] = {
    "requested": {"kind": _one_of(*CHANGE_KINDS), "voter": _int},
    "appended": {"kind": _one_of(*CHANGE_KINDS), "voter": _int, "offset": _int, "voters": _ints},
    "committed": {"kind": _one_of(*CHANGE_KINDS), "voter": _int, "offset": _int},
    "timed_out": {"kind": _one_of(*CHANGE_KINDS), "voter": _int},
    "refused": {"error": _str, "reason": _str},
}
"""A `voter_change` action → the fields that action carries."""

NOT_LEADER_ERRORS = ("NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH")
"""How a node that is not the leader refuses a voter change (an UpdateRaftVoter names its epoch)."""

AFTER_START = ("role", "vote", "append", "hw", "truncate", "snapshot", "voter_change", "quorum")
"""Raft events of a process life that come after the voter set it starts with."""


def _problems(e: Entry) -> list[str]:
    wanted = dict(FIELDS.get(e.ev, {}))
    if e.ev == "voter_change":
        wanted.update(CHANGE_FIELDS.get(str(e.get("action")), {}))
    out = field_problems(e, wanted)
    if e.ev == "voters" and not out and len(e["directory_ids"]) != len(e["voters"]):
        out.append(f"{len(e['directory_ids'])} directory ids for {len(e['voters'])} voters")
    return out


class JournalFields(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            reported: set[tuple[str, str]] = set()
            for e in entries:
                problems = _problems(e)
                key = (e.ev, str(e.get("action", "")))
                if problems and key not in reported:  # once per kind and node: one cause, one finding
                    reported.add(key)
                    yield Violation(self.name, (
                        f"node {e.node}'s `{e.ev}` line breaks the journal contract ({'; '.join(problems)}): the "
                        "checker cannot judge what the rules read from it"), [e])


def _lives(entries: list[Entry]) -> Iterator[list[Entry]]:
    """One node's journal from each `start` line on (a life's lines before it are its recovery)."""
    life: list[Entry] | None = None
    for e in entries:
        if e.ev == "start":
            if life is not None:
                yield life
            life = []
        if life is not None:
            life.append(e)
    if life is not None:
        yield life


class VotersAtStart(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            dynamic = any(e.ev == "voters" for e in entries)
            if not dynamic:
                continue
            for life in _lives(entries):
                start = life[0]
                first = next((e for e in life[1:] if e.ev == "voters" or e.ev in AFTER_START), None)
                if first is None:
                    continue  # the life journalled nothing more (its journal ends here)
                if first.ev != "voters" or first.get("reason") != "start":
                    yield Violation(self.name, (
                        f"node {start.node} (a dynamic quorum's) started without journalling the voter set in force "
                        f"(`voters`, reason `start`) before its first `{first.ev}`: the checker cannot tell which "
                        "majority its elections and commits counted"), [start, first])
                elif sorted(first.get("voters") or []) != sorted(start.get("voters") or []):
                    yield Violation(self.name, (
                        f"node {start.node}'s `start` line names voters {start.get('voters')} but the set it journals "
                        f"in force at start is {first.get('voters')}"), [start, first])


def _busy(replay: Replay, m: Moment, pending: Entry | None, epoch_start: int | None) -> str | None:
    """Why a leader in state `m` may take no voter change now (KIP-853; None: it may)."""
    if pending is not None:
        return f"the {pending['kind']} of voter {pending['voter']} was not over yet"
    if epoch_start is None or m.hw <= epoch_start:
        return f"the leader had not committed in its epoch (high-water mark {m.hw}, epoch start {epoch_start})"
    if m.voters and m.voters[-1][0] >= m.hw:
        return f"the voter set at offset {m.voters[-1][0]} had not committed (high-water mark {m.hw})"
    return None


class VoterChangeSequence(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        moments: dict[int, Moment] = {id(e): m for kind in ("voter_change", "start", "role", "append", "voters")
                                      for e, m in replay.events(kind)}
        for entries in replay.journals.by_node.values():
            yield from self._node(replay, entries, moments)

    def _node(self, replay: Replay, entries: list[Entry], moments: dict[int, Moment]) -> Iterator[Violation]:
        pending: Entry | None = None  # the change requested (or appended) and not yet over, in this term
        appended: Entry | None = None  # its `appended` line, until the leader's `append` and `voters` show it
        append_seen = voters_seen = False
        epoch_start: int | None = None  # the offset of the leader's first append of its term (its LeaderChange)
        for e in entries:
            if e.ev in ("start", "role"):
                pending, appended, epoch_start = None, None, None
                continue
            if e.ev == "append" and e.get("leader") and epoch_start is None and not _problems(e):
                epoch_start = int(e["base"])
            if appended is not None and e.ev == "append" and not append_seen:
                append_seen = True
                if int(e["base"]) != int(appended["offset"]):
                    yield self._bad(appended, e, f"its record was appended at {e['base']}, not at the offset it names")
            if appended is not None and e.ev == "voters" and not voters_seen:
                voters_seen = True
                if int(e["offset"]) != int(appended["offset"]) or sorted(e["voters"]) != sorted(appended["voters"]):
                    yield self._bad(appended, e, f"the set then in force is {e['voters']} from offset {e['offset']}")
            if e.ev != "voter_change" or _problems(e):
                continue
            m = moments[id(e)]
            action = e["action"]
            busy = _busy(replay, m, pending, epoch_start)
            if action == "refused":
                leading = m.role == "leader"
                if leading and e["error"] == "REQUEST_TIMED_OUT" and busy is None and m.voters:
                    yield Violation(self.name, (
                        f"leader {e.node} refused a voter change with REQUEST_TIMED_OUT though no change was in "
                        f"progress, its last voter set had committed and it had committed in its epoch (high-water "
                        f"mark {m.hw})"), [e])
                elif leading and e["error"] == "NOT_LEADER_OR_FOLLOWER":
                    yield Violation(self.name, f"node {e.node} refused a voter change as not the leader while it led",
                                    [e])
                elif not leading and e["error"] not in NOT_LEADER_ERRORS:
                    yield Violation(self.name, (
                        f"node {e.node} refused a voter change with {e['error']} while it was no leader: only the "
                        f"leader looks at a change (Kafka answers {' or '.join(NOT_LEADER_ERRORS)})"), [e])
                continue
            if action == "requested":
                ids = vs.ids(replay.set_in_force(m))
                if m.role != "leader":
                    yield self._bad(e, e, f"node {e.node} was {m.role}: only the leader takes a change")
                elif busy is not None:
                    yield self._bad(e, e, busy, pending)
                elif (e["voter"] in ids) == (e["kind"] == "add"):
                    yield self._bad(e, e, f"voter {e['voter']} {'already is' if e['kind'] == 'add' else 'is not'} "
                                    f"in the set in force {ids}")
                pending, appended = e, None
                continue
            if pending is None or (pending["kind"], pending["voter"]) != (e["kind"], e["voter"]):
                yield Violation(self.name, (
                    f"node {e.node} journalled a voter change `{action}` ({e['kind']} of {e['voter']}) that it never "
                    "journalled `requested` in this leadership: the checker cannot tell which request it answers"),
                    [x for x in (pending, e) if x is not None])
                pending = appended = None
                continue
            if action == "appended":
                if pending["action"] != "requested":
                    yield self._bad(e, e, "it was appended twice", pending)
                had = set(vs.ids(replay.set_in_force(m)))
                expected = (had | {e["voter"]} if e["kind"] == "add" else had - {e["voter"]} if e["kind"] == "remove"
                            else had)
                if sorted(expected) != sorted(e["voters"]):
                    yield self._bad(e, e, f"the set in force was {sorted(had)}, so the {e['kind']} of {e['voter']} "
                                    f"makes {sorted(expected)}, not {sorted(e['voters'])}")
                pending, appended, append_seen, voters_seen = e, e, False, False
            elif action == "committed":
                if pending["action"] != "appended" or int(pending["offset"]) != int(e["offset"]):
                    yield self._bad(e, e, "it commits a record the leader did not journal appending there", pending)
                elif m.hw <= int(e["offset"]):
                    yield self._bad(e, e, f"the leader's high-water mark was {m.hw}, not past offset {e['offset']}")
                pending = appended = None
            else:  # timed_out
                if pending["action"] != "requested":
                    yield self._bad(e, e, "its record was already appended", pending)
                pending = appended = None

    def _bad(self, change: Entry, shown: Entry, why: str, before: Entry | None = None) -> Violation:
        what = f"{change.get('kind')} of voter {change.get('voter')}"
        entries = [x for x in (before, change, shown) if x is not None]
        return Violation(self.name, f"node {change.node}'s voter change `{change['action']}` ({what}): {why}",
                         [x for i, x in enumerate(entries) if all(x is not y for y in entries[:i])])


def _journals_pre_votes(entries: list[Entry]) -> bool:
    """Whether a node journals its pre-vote states (KIP-996): only then are its role lines every
    transition it made (a hand-built or older node's journal may skip some), so that the order of its
    states, and its other lines against them, can be judged."""
    return any(e.ev == "role" and e.get("role") == "prospective" for e in entries)


def _role_problem(e: Entry, before: Entry | None) -> str | None:
    """What is wrong with voter role line `e` after `before` (the life's previous role line, None at start)."""
    role, node, leader, voted = e["role"], e.node, e["leader"], e["voted_for"]
    if role in ("leader", "resigned") and leader != node:
        return f"a {role} naming {leader} as leader"
    if role == "candidate" and (voted != node or leader is not None):
        return f"a candidate that voted for {voted} and knows leader {leader}"
    if role == "follower" and (leader is None or leader == node):
        return f"a follower of {leader}"
    if role == "unattached" and leader is not None:
        return f"unattached, knowing leader {leader}"
    if before is None or before["role"] == "observer":
        return None
    was, epoch, was_epoch = before["role"], e["epoch"], before["epoch"]
    if role == "candidate" and (was != "prospective" or epoch != was_epoch + 1):
        return (f"a candidate of epoch {epoch} right after {was} of epoch {was_epoch} (a prospective one of epoch "
                f"{epoch - 1})")
    if role == "leader" and (was != "candidate" or epoch != was_epoch):
        return f"a leader of epoch {epoch} right after {was} of epoch {was_epoch} (its candidacy in that epoch)"
    if role == "resigned" and (was != "leader" or epoch != was_epoch):
        return f"resigned in epoch {epoch} right after {was} of epoch {was_epoch} (its leadership in that epoch)"
    return None


class RoleLines(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            leaders: dict[int, Entry] = {}  # epoch → the first line naming its leader
            before: Entry | None = None
            ordered = _journals_pre_votes(entries)
            for e in entries:
                if e.ev == "start":
                    before = None
                    continue
                if e.ev != "role" or _problems(e):
                    continue
                leader = e["leader"]
                # (what it learnt from others: its own leadership of an epoch is SingleLeader's to judge)
                learnt = leader is not None and leader != e.node
                known = leaders.setdefault(e["epoch"], e) if learnt else None
                if known is not None and known["leader"] != leader:
                    yield Violation(self.name, (
                        f"node {e.node} learnt two leaders of epoch {e['epoch']}: {known['leader']}, then {leader}"),
                        [known, e])
                problem = None if e["role"] == "observer" else _role_problem(e, before if ordered else None)
                if problem is not None:
                    yield Violation(self.name, (
                        f"node {e.node}'s role line is {problem}: not a state KIP-595/KIP-996 allow"),
                        [x for x in (before, e) if x is not None])
                before = e


class LogContinuity(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            yield from self._node(entries)

    def _node(self, entries: list[Entry]) -> Iterator[Violation]:
        end: int | None = None  # the log's end offset as the journal tells it (None: before `start`)
        moved: Entry | None = None  # the line that put it there
        for e in entries:
            if e.ev == "start" and not _problems(e):
                end, moved = int(e["log_end"]), e
                if not e["log_start"] <= end or not e["hw"] <= end:
                    yield Violation(self.name, (
                        f"node {e.node} started with log [{e['log_start']}, {end}) and high-water mark {e['hw']}: "
                        "a log starts no later than it ends, and its high-water mark is no later than its end"), [e])
                continue
            if end is None or e.ev not in ("append", "truncate", "snapshot", "flush", "hw") or _problems(e):
                continue
            problem = None
            if e.ev == "append":
                if e["base"] != end:
                    problem = f"an append at offset {e['base']}"
                end, moved = e["base"] + len(e["crcs"]), e
            elif e.ev == "truncate":
                if e["reason"] == "diverging" and (e["from"] != end or e["to"] > end):
                    problem = f"a truncation from {e['from']} to {e['to']}"
                end, moved = int(e["to"]), e
            elif e.ev == "snapshot":
                if e["action"] in ("load", "fetch"):
                    end, moved = max(end, int(e["offset"])), e
                elif e["action"] == "create" and e["offset"] > end:
                    problem = f"a snapshot up to {e['offset']}"
            elif (e["end"] if e.ev == "flush" else e["hw"]) > end:
                problem = f"a {e.ev} to {e['end'] if e.ev == 'flush' else e['hw']}"
            if problem is not None:
                yield Violation(self.name, (
                    f"node {e.node}'s journal shows {problem} where its log ended at {end}: a line is missing or "
                    "misstated, so the log every rule replays is not the node's"),
                    [x for x in (moved, e) if x is not None])


class LinesInTheirState(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        complete = {n for n, entries in replay.journals.by_node.items() if _journals_pre_votes(entries)}
        for kind in ("append", "hw", "quorum", "snapshot"):
            for e, m in replay.events(kind):
                if _problems(e) or m.life == 0 or e.node not in complete:
                    continue
                problem = _out_of_state(e, m)
                if problem is not None:
                    yield Violation(self.name, (
                        f"node {e.node} journalled {problem} while it was {m.role} in epoch {m.epoch} with high-water "
                        f"mark {m.hw}"), [x for x in (m.epoch_entry, e) if x is not None])


def _out_of_state(e: Entry, m: Moment) -> str | None:
    if e.ev == "append" and e["leader"] and (m.role != "leader" or e["epoch"] != m.epoch):
        return f"an append as leader in epoch {e['epoch']}"
    if e.ev == "append" and not e["leader"] and e["epoch"] > m.epoch:
        return f"a replicated append of epoch {e['epoch']}"
    if e.ev == "hw" and m.role not in ("observer", "unattached") and e["epoch"] != m.epoch:
        return f"a high-water mark of epoch {e['epoch']}"
    if e.ev == "quorum" and (m.role != "leader" or e.get("epoch") != m.epoch):
        return f"a quorum sample of epoch {e.get('epoch')}"
    if e.ev == "snapshot" and e["action"] == "create" and e["offset"] > m.hw:
        return f"a snapshot up to {e['offset']}"
    return None
