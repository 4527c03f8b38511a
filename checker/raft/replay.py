"""One replay of the node journals for the Raft rules: each node's journal in its own order rebuilds
its log (appends, truncations, snapshots, restarts), epochs, roles, durable end and high-water
marks — built once, then read (never changed) by every rule of checker.raft.rules.

What the rules read:
- `events(kind)`: every journal entry of that kind (`role`, `hw`, `apply`, …), node by node in
  each node's order, with the node's state just before it (`Moment`: process life, epoch, role,
  high-water mark, durable end, … and the entries that set them);
- `claims`: every offset some node saw committed (its `hw` passed it) with the entry it held;
  `committed`: the first claim of each offset (the epoch of the earliest `hw` that committed it);
- `elections`: each leader's log at the moment it became leader;
- `leader_hws`: each HW advance of a leader with the entry at HW-1 it claims committed;
- `nodes`: each node's final log and what it ever held durably;
- `dropped`: each truncation and snapshot load or fetch with the log entries it removed;
- `voters`: the static voter set (`start` lines' voters), which the majority rules count against
  unless the node journalled `voters` events (a dynamic quorum, KIP-853): then each `Moment` carries
  the node's own voter `History` (checker.raft.voters), rebuilt from its journal as it goes, and
  `sets_counted(m, offset)` gives the sets a leader in that state may have counted for `offset`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from kraftlab.checker.journal import Entry, Journals
from kraftlab.checker.raft import voters as vs

LogEntry = tuple[int, int, Entry]
"""(epoch, CRC, the append that wrote it) of one offset."""


class Moment(NamedTuple):
    """A node's replayed state just before one of its journal entries (a tuple: the replay makes
    one per state change, so it must be cheap to copy with a change)."""

    life: int = 0  # the process life (the number of `start` lines so far)
    epoch: int = -1
    epoch_entry: Entry | None = None
    role: str = "unattached"
    hw: int = 0
    hw_entry: Entry | None = None
    durable: int = 0  # the durable end offset (last flush, cut by truncations; a restart's log end)
    snap_max: int = 0  # the highest snapshot end the node ever loaded or fetched
    flush_entry: Entry | None = None
    voters: vs.History = ()  # the voter sets of the node's log (`voters` events; empty: a static quorum)
    directory: str | None = None  # the directory id this process runs on (its `start` line's)


@dataclass
class NodeLog:
    """A node's log as the replay goes, and at the end its final state."""

    reports_flush: bool  # the journal has `flush` events; else appends count as durable
    log: dict[int, LogEntry] = field(default_factory=dict)
    log_start: int = 0
    log_end: int = 0
    ever: dict[int, dict[tuple[int, int], tuple[int, int | None]]] = field(default_factory=dict)
    """offset → {(epoch, crc) ever durable → (the journal position where it first became durable, the
    host monotonic clock of that line)}"""
    top_hw: int = 0  # the highest high-water mark this node's journal ever shows
    snap_max: int = 0  # the highest snapshot end it ever loaded or fetched
    last_ts: float = 0.0  # the wall clock of its journal's last line
    last_rmono: int | None = None  # the host monotonic clock of its journal's last line
    end: Moment = field(default_factory=Moment)  # the node's state after its journal's last line

    def make_durable(self, start: int, end: int, pos: int, rmono: int | None) -> None:
        for o in range(start, end):
            have = self.log.get(o)
            if have is not None:
                self.ever.setdefault(o, {}).setdefault((have[0], have[1]), (pos, rmono))


@dataclass(frozen=True, slots=True)
class Claim:
    """A node's `hw` passed `offset` while it held (epoch, crc) there, written by `append`."""

    offset: int
    epoch: int
    crc: int
    hw_epoch: int  # the epoch of that `hw` event
    entry: Entry  # that `hw` event
    append: Entry


@dataclass(frozen=True, slots=True)
class LeaderHw:
    """A leader advanced its high-water mark to `hw` holding (epoch, crc) at `hw - 1`."""

    entry: Entry
    hw: int
    epoch: int
    crc: int
    pos: int  # the `hw` line's position in the leader's journal
    voters: vs.History  # the leader's voter sets then (empty: a static quorum)


@dataclass(frozen=True, slots=True)
class Election:
    entry: Entry  # the `role` line that made the node leader
    log: dict[int, LogEntry]
    log_start: int
    log_end: int  # offsets in [log_start, log_end) missing from `log` are on its disk, content unjournalled


class Replay:
    """The journals replayed once; see the module docstring for what it offers."""

    def __init__(self, journals: Journals, voters: list[int] | None = None) -> None:
        self.journals = journals
        self.shared_clock = journals.shared_clock
        if voters is None:
            found = {v for e in journals.all() if e.ev == "start" for v in e.get("voters") or []}
            voters = sorted(found) or sorted(journals.by_node)
        self.voters = voters
        self.nodes: dict[int, NodeLog] = {}
        self._events: dict[str, list[tuple[Entry, Moment]]] = {}
        self.claims: list[Claim] = []
        self.elections: list[Election] = []
        self.leader_hws: list[LeaderHw] = []
        self.dropped: list[tuple[Entry, dict[int, LogEntry]]] = []
        """Each `truncate` and each snapshot load or fetch, node by node in journal order, with the
        entries of the node's log it removed."""
        for nid, entries in journals.by_node.items():
            self._replay_node(nid, entries)

    def events(self, kind: str) -> list[tuple[Entry, Moment]]:
        """The entries of one kind with the state before each, node by node in journal order."""
        return self._events.get(kind, [])

    def sets_counted(self, history: vs.History, offset: int) -> list[vs.VoterSet]:
        """The voter sets a leader holding `history` may have counted a majority of to commit
        `offset` (the static set when the node journalled none)."""
        return vs.counted_at(history, offset) or [vs.static_set(self.voters)]

    def set_in_force(self, m: Moment) -> vs.VoterSet:
        """The voter set at a node's log end in state `m` (the static set when it journalled none)."""
        return m.voters[-1][1] if m.voters else vs.static_set(self.voters)

    @functools.cached_property
    def committed(self) -> dict[int, Claim]:
        """Offset → the first claim of it, with the earliest `hw` epoch of the claims that agree."""
        out: dict[int, Claim] = {}
        for c in self.claims:
            first = out.get(c.offset)
            if first is None:
                out[c.offset] = c
            elif first.crc == c.crc and c.hw_epoch < first.hw_epoch:
                out[c.offset] = replace(first, hw_epoch=c.hw_epoch, entry=c.entry)
        return out

    def _replay_node(self, nid: int, entries: list[Entry]) -> None:
        st = NodeLog(reports_flush=any(e.ev == "flush" for e in entries))
        self.nodes[nid] = st
        events = self._events
        if entries:
            st.last_ts, st.last_rmono = entries[-1].ts, entries[-1].rmono
        m = Moment()
        for pos, e in enumerate(entries):
            ev = e.ev
            at = events.get(ev)
            if at is None:
                at = events[ev] = []
            at.append((e, m))
            if ev == "launch":
                # a new process life: its first high-water mark is not compared with the last life's
                # (it may journal one while recovering, and die before its `start`, refusing its storage)
                m = m._replace(hw_entry=e)
            elif ev == "start":
                st.log_start = int(e.get("log_start", 0))
                st.log_end = int(e.get("log_end", 0))
                fresh = st.log_end == 0 or nid not in (e.get("voters") or [nid])
                # new or wiped storage: this node's durable history starts over; an observer's
                # epoch is not durable at all (it never votes or leads: it learns it from the leader)
                st.log = {o: x for o, x in st.log.items() if st.log_start <= o < st.log_end}
                st.make_durable(0, st.log_end, pos, e.rmono)  # what a restart recovers is on disk
                hw = int(e.get("hw", 0) or 0)
                st.top_hw = max(st.top_hw, hw)
                m = Moment(life=m.life + 1, epoch=-1 if fresh else m.epoch,
                           epoch_entry=None if fresh else m.epoch_entry, role="unattached", hw=hw, hw_entry=e,
                           durable=st.log_end, snap_max=m.snap_max, flush_entry=e,
                           voters=() if st.log_end == 0 else m.voters, directory=e.get("directory_id"))
            elif ev == "role":
                m = m._replace(epoch=int(e["epoch"]), epoch_entry=e, role=str(e["role"]))
                if m.role == "leader":
                    self.elections.append(Election(e, dict(st.log), st.log_start, st.log_end))
            elif ev == "append":
                base = int(e["base"])
                for j, crc in enumerate(e["crcs"]):
                    st.log[base + j] = (int(e["epoch"]), int(crc), e)
                st.log_end = base + len(e["crcs"])
                durable = min(m.durable, base)
                if not st.reports_flush:
                    st.make_durable(durable, st.log_end, pos, e.rmono)
                    durable = st.log_end
                m = m._replace(durable=durable)
            elif ev == "flush":
                durable = min(m.durable, st.log_end)
                end = min(int(e["end"]), st.log_end)
                st.make_durable(durable, end, pos, e.rmono)
                m = m._replace(durable=end, flush_entry=e)
            elif ev == "truncate":
                to = int(e["to"])
                self.dropped.append((e, {o: x for o, x in st.log.items() if o >= to}))
                st.log = {o: x for o, x in st.log.items() if o < to}
                st.log_end = to
                m = m._replace(durable=min(m.durable, to), voters=tuple(x for x in m.voters if x[0] < to))
            elif ev == "voters":
                m = m._replace(voters=vs.after_event(m.voters, int(e["offset"]), vs.voter_set(e.fields)))
            elif ev == "snapshot" and e.get("action") in ("load", "fetch"):
                off = int(e["offset"])
                self.dropped.append((e, {o: x for o, x in st.log.items() if o < off}))
                st.log_start = max(st.log_start, off)
                st.top_hw = max(st.top_hw, off)
                st.snap_max = max(st.snap_max, off)
                st.log = {o: x for o, x in st.log.items() if o >= off}
                st.log_end = max(st.log_end, off)
                # a snapshot is durable before it is loaded
                m = m._replace(snap_max=max(m.snap_max, off), durable=max(m.durable, off))
            elif ev == "hw":
                m = self._advance_hw(st, m, e, pos)
        st.end = m

    def _advance_hw(self, st: NodeLog, m: Moment, e: Entry, pos: int) -> Moment:
        hw = int(e["hw"])
        st.top_hw = max(st.top_hw, hw)
        hw_epoch = int(e.get("epoch", m.epoch))
        for o in range(max(m.hw, st.log_start), hw):
            have = st.log.get(o)
            if have is not None:
                self.claims.append(Claim(o, have[0], have[1], hw_epoch, e, have[2]))
        if m.role == "leader" and hw > m.hw and hw - 1 in st.log:
            ep, crc, _ = st.log[hw - 1]
            self.leader_hws.append(LeaderHw(e, hw, ep, crc, pos, m.voters))
        return m._replace(hw=max(m.hw, hw), hw_entry=e)
