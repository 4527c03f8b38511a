"""Raft invariants over node journals (the checks of Kafka's RaftEventSimulationTest, offline).

Each node's journal is replayed in its own order to rebuild its log (appends, truncations,
snapshots, restarts), its epochs, roles and high-water marks. Then:

- SingleLeader: at most one node is leader in any epoch.
- MonotonicEpoch: a node's epoch never goes down (for a voter it is durable across restarts — an
  observer learns it again from the leader; a restart with
  an empty log — new or wiped storage — starts the node's history over).
- DurableVote: a restarted node's quorum-state (as its `start` line reports what it read) still
  holds the last vote it granted before the restart — the same candidate in that epoch, or a later
  epoch — unless its quorum-state was found damaged.
- CheckpointedHighWatermark: the high-water mark a node recovers from its checkpoint (`recovery`)
  is one it had journalled before (an `hw`, or a snapshot's end on `start`).
- MonotonicHighWatermark: a node's high-water mark never goes down within one process life.
- MajorityReachedHighWatermark: when a leader advances its high-water mark to H, a majority of
  voters hold the entry at H-1 (same epoch and CRC) durably — appended and covered by a later
  `flush` (the durable end), or by a snapshot. When the journals share one kernel's clock
  (`Journals.shared_clock`, the namespace lab), "hold" means before the leader's `hw` line by that
  clock: each follower journals its flush before it sends the Fetch that acknowledges it, so a
  leader that counts an offset no majority had flushed yet is caught even if they flush it later.
  Otherwise cross-node order is not trusted (clocks skew), and
  for the other voters "hold" means at some point in their journal; the leader's own copy counts
  only if its flush is journalled before that `hw` line (the core counts its own durable end
  only from flushes it journalled). A journal may be cut early (copied from a live node), so a
  voter whose journal ends before the leader's `hw` line (by the wall clock) and never shows a
  high-water mark of H or more (which would come after the leader's) is unknown, and the HW is
  reported only if the holders and the unknown together are no majority. And a follower's high-water mark never goes
  beyond its own durable end: it journals `flush` before the Fetch that acknowledges the offsets
  (a node writes a step's journal events before it sends the step's messages) and learns a HW
  no higher than its log. (A leader may: with a deferred leader flush, as in Kafka, a majority
  of followers can commit what the leader has not flushed yet.) A journal with no `flush` event
  at all (older nodes, hand-built journals) counts appends as durable.
- CommittedPrefixAgreement: every node that saw an offset committed saw the same CRC there, no
  node's final log differs from a committed CRC below that node's own high-water mark (beyond it,
  a node cut off when the journals end may still hold a tail it has not learned is divergent),
  and no node truncates an entry below its own
  high-water mark (except to replace its log with a snapshot, or to cut a corrupt tail found on
  recovery: storage damage is reported by its own `corruption` event).
- LeaderCompleteness: every entry committed in an epoch is in the log of every leader of a later
  epoch at the moment it became leader.
- NoUncommittedApply: a node applies an offset only below its high-water mark, with the
  committed CRC.
- StaleLeader: a leader's `quorum` samples (the age of each voter's last Fetch) never show,
  twice in a row in one epoch, fewer than a majority (counting the leader) heard from within the
  check-quorum timeout (1.5 × fetch timeout) plus a slack: such a leader must have resigned.
  Two samples, because one sample's clock reading may differ from the step's it follows.
- AnsweredBeforeCommit: a controller journals a successful `decision` (written when it answers the
  request, with the last offset of the records it wrote) while its own high-water mark is not yet
  past that offset: it answered before its records were committed, so a failover can lose what a
  client was told succeeded (KIP-631: the active controller responds once the records commit).
  Reported once per process life.
- NodeStoppedOnSafetyError: a node journalled `fatal` — its Raft core hit a safety error or an
  unexpected exception (for example a read at an offset that is not a batch boundary): the node
  stops or is stuck, which is a finding, not an inconclusive run — unless that process life also
  journalled `corruption` (damaged storage, as the disk nemesis makes, may fail anywhere).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["SingleLeader", "MonotonicEpoch", "DurableVote", "CheckpointedHighWatermark", "MonotonicHighWatermark",
              "MajorityReachedHighWatermark",
              "CommittedPrefixAgreement", "LeaderCompleteness", "NoUncommittedApply", "StaleLeader",
              "AnsweredBeforeCommit", "NodeStoppedOnSafetyError"]
STALE_LEADER_SLACK_MS = 1000.0


@dataclass
class _Node:
    log: dict[int, tuple[int, int, Entry]] = field(default_factory=dict)  # offset → (epoch, crc, entry)
    log_start: int = 0
    log_end: int = 0
    hw: int = 0
    hw_entry: Entry | None = None
    epoch: int = -1
    epoch_entry: Entry | None = None
    role: str = "unattached"
    ever: dict[int, dict[tuple[int, int], tuple[int, int | None]]] = field(default_factory=dict)
    # offset → {(epoch, crc) ever durable → (the journal position where it first became durable, the
    # host monotonic clock of that line)}
    pos: int = 0  # the position of the journal line being replayed
    rmono: int | None = None  # the host monotonic clock of the line being replayed
    top_hw: int = 0  # the highest high-water mark this node's journal ever shows (its journal reaches that far)
    last_ts: float = 0.0  # the wall clock of its journal's last line
    last_rmono: int | None = None  # the host monotonic clock of its journal's last line
    snap_max: int = 0
    durable: int = 0  # the durable end offset (last flush, cut by truncations; a restart's log end)
    flush_entry: Entry | None = None
    reports_flush: bool = False  # the journal has `flush` events; else appends count as durable
    durable_reported: bool = False
    stale_sample: Entry | None = None  # the last `quorum` sample, if it showed no majority
    stale_reported: int = -1  # the epoch whose StaleLeader is reported already

    def make_durable(self, end: int) -> None:
        """Everything in the log below `end` is durable from now on."""
        for o in range(self.durable, end):
            have = self.log.get(o)
            if have is not None:
                self.ever.setdefault(o, {}).setdefault((have[0], have[1]), (self.pos, self.rmono))
        self.durable = end


@dataclass
class _Commit:
    crc: int
    epoch: int  # the epoch of the entry
    hw_epoch: int  # the epoch of the high-water mark event that committed it
    entry: Entry  # that high-water mark event
    append: Entry  # the append that wrote the entry


def _held(st: _Node, hw: int, epoch: int, crc: int, before: int | None, before_rmono: int | None = None) -> bool:
    """Whether a node held the entry at `hw - 1` durably (flushed, or under a snapshot) at some point
    of its journal, or — for the leader judging its own HW (`before`: that `hw` line's position) —
    before that line: the leader journals the flush that counts its own log before the `hw` it allows;
    with a shared clock (`before_rmono`: that line's), any voter only before that instant."""
    first = st.ever.get(hw - 1, {}).get((epoch, crc))
    if first is not None and before_rmono is not None and first[1] is not None:
        return first[1] < before_rmono
    return (first is not None and (before is None or first[0] < before)) or st.snap_max >= hw


def _maybe_cut(st: _Node | None, e: Entry, hw: int, shared_clock: bool = False) -> bool:
    """Whether a voter's journal may end before a leader's `hw` line `e` (copied from a live node):
    it never shows a high-water mark of `hw` or more (which only comes after the leader's) and its
    last line is not later than `e` by the wall clocks (skewed clocks make this lenient, not wrong,
    once the clock faults are healed at the end of a run) — or by the shared clock when there is one."""
    if st is None:
        return True
    if shared_clock and st.last_rmono is not None and e.rmono is not None:
        return st.top_hw < hw and st.last_rmono <= e.rmono
    return st.top_hw < hw and st.last_ts <= e.ts


def _answered_uncommitted(e: Entry, hw: int) -> bool:
    """A successful decision whose records (ending at `offset`) are not below the high-water mark."""
    return e.get("error", "NONE") == "NONE" and e.get("offset") is not None and int(e["offset"]) >= hw


def _fatal(e: Entry) -> Violation:
    return Violation("NodeStoppedOnSafetyError",
                     f"node {e.node} {'stopped' if e.get('stopped') else 'is stuck'} on an internal error of its "
                     f"Raft core: {e.get('error')} (epoch {e.get('epoch')}, applied up to {e.get('applied')}, "
                     f"high-water mark {e.get('hw')}, log end {e.get('log_end')})", [e])


def _sample_quorum(st: _Node, e: Entry, slack_ms: float, vs: list[Violation]) -> None:
    """A leader's `quorum` sample: the voters it heard a Fetch from within the check-quorum
    timeout plus slack, itself included; StaleLeader on the second stale sample of an epoch."""
    ages = {int(v): float(a) for v, a in (e.get("fetch_age_ms") or {}).items()}
    limit = float(e["check_quorum_ms"]) + slack_ms
    heard = 1 + sum(1 for a in ages.values() if a <= limit)
    need = (len(ages) + 1) // 2 + 1
    if heard >= need:
        st.stale_sample = None
        return
    prev = st.stale_sample
    st.stale_sample = e
    epoch = int(e["epoch"])
    if prev is None or int(prev["epoch"]) != epoch or st.stale_reported == epoch:
        return
    st.stale_reported = epoch
    silent = sorted(v for v, a in ages.items() if a > limit)
    vs.append(Violation("StaleLeader",
                        f"node {e.node} still led epoch {epoch} though it had heard no Fetch from voters {silent} "
                        f"for over {limit:g} ms (check-quorum {e['check_quorum_ms']} ms + slack {slack_ms:g} ms): "
                        f"{heard} of {len(ages) + 1} voters, a majority is {need}", [prev, e]))


def check_raft(journals: Journals, voters: list[int] | None = None,
               stale_leader_slack_ms: float = STALE_LEADER_SLACK_MS) -> dict[str, Any]:
    """Check the invariants above; `voters` defaults to the union of `start` events' voters."""
    vs: list[Violation] = []
    nodes: dict[int, _Node] = {n: _Node(reports_flush=any(e.ev == "flush" for e in es))
                               for n, es in journals.by_node.items()}
    if voters is None:
        found = {v for e in journals.all() if e.ev == "start" for v in e.get("voters") or []}
        voters = sorted(found) or sorted(journals.by_node)
    leaders: dict[int, list[Entry]] = {}
    committed: dict[int, _Commit] = {}
    elections: list[tuple[Entry, dict[int, tuple[int, int, Entry]], int]] = []
    leader_hw: list[tuple[Entry, int, int, int, int]] = []  # (hw entry, hw, entry epoch, crc, position) on leaders
    applies: list[tuple[Entry, int]] = []  # (apply entry, node hw then)

    shared_clock = journals.shared_clock
    for nid, entries in journals.by_node.items():
        st = nodes[nid]
        life_fatal: list[Entry] = []
        life_damaged = False
        early_answer_reported = False
        st.last_ts = entries[-1].ts if entries else 0.0
        st.last_rmono = entries[-1].rmono if entries else None
        for pos, e in enumerate([*entries, None]):
            st.pos = pos
            st.rmono = e.rmono if e is not None else None
            if e is None or e.ev == "start":
                if not life_damaged:
                    vs.extend(_fatal(x) for x in life_fatal)
                life_fatal, life_damaged, early_answer_reported = [], False, False
                if e is None:
                    break
            ev = e.ev
            if ev in ("start", "role"):
                st.stale_sample = None
            if ev == "start":
                st.log_start = int(e.get("log_start", 0))
                st.log_end = int(e.get("log_end", 0))
                if st.log_end == 0 or nid not in (e.get("voters") or [nid]):
                    # new or wiped storage: this node's durable history starts over; an observer's
                    # epoch is not durable at all (it never votes or leads: it learns it from the leader)
                    st.epoch, st.epoch_entry = -1, None
                st.log = {o: x for o, x in st.log.items() if st.log_start <= o < st.log_end}
                st.durable, st.flush_entry, st.durable_reported = 0, e, False
                st.make_durable(st.log_end)  # what a restart recovers is on disk
                st.hw = int(e.get("hw", 0) or 0)
                st.top_hw = max(st.top_hw, st.hw)
                st.hw_entry = e
                st.role = "unattached"
            elif ev == "role":
                ep = int(e["epoch"])
                if ep < st.epoch and st.epoch_entry is not None:
                    vs.append(Violation("MonotonicEpoch", f"node {nid} went from epoch {st.epoch} back to {ep}",
                                        [st.epoch_entry, e], before=f"node {nid} {st.role} in epoch {st.epoch}",
                                        after=f"node {nid} {e['role']} in epoch {ep}"))
                st.epoch, st.epoch_entry, st.role = ep, e, str(e["role"])
                if st.role == "leader":
                    leaders.setdefault(ep, []).append(e)
                    elections.append((e, dict(st.log), st.log_start))
            elif ev == "append":
                base, ep = int(e["base"]), int(e["epoch"])
                for j, crc in enumerate(e["crcs"]):
                    st.log[base + j] = (ep, int(crc), e)
                st.log_end = base + len(e["crcs"])
                st.durable = min(st.durable, base)
                if not st.reports_flush:
                    st.make_durable(st.log_end)
            elif ev == "flush":
                st.durable = min(st.durable, st.log_end)
                st.make_durable(min(int(e["end"]), st.log_end))
                st.flush_entry = e
            elif ev == "truncate":
                to = int(e["to"])
                if e.get("reason") not in ("snapshot", "corrupt-tail") and to < st.hw:
                    vs.append(Violation("CommittedPrefixAgreement",
                                        f"node {nid} truncated its log to {to}, below its high-water mark {st.hw}",
                                        [x for x in (st.hw_entry, e) if x is not None]))
                st.log = {o: x for o, x in st.log.items() if o < to}
                st.log_end = to
                st.durable = min(st.durable, to)
            elif ev == "snapshot":
                if e.get("action") in ("load", "fetch"):
                    off = int(e["offset"])
                    st.log_start = max(st.log_start, off)
                    st.snap_max = max(st.snap_max, off)
                    st.top_hw = max(st.top_hw, off)
                    st.log = {o: x for o, x in st.log.items() if o >= off}
                    st.log_end = max(st.log_end, off)
                    st.durable = max(st.durable, off)  # a snapshot is durable before it is loaded
            elif ev == "hw":
                hw = int(e["hw"])
                st.top_hw = max(st.top_hw, hw)
                if hw < st.hw and st.hw_entry is not None and st.hw_entry.ev == "hw":
                    vs.append(Violation("MonotonicHighWatermark",
                                        f"node {nid} high-water mark went from {st.hw} back to {hw}",
                                        [st.hw_entry, e]))
                hw_epoch = int(e.get("epoch", st.epoch))
                for o in range(max(st.hw, st.log_start), hw):
                    have = st.log.get(o)
                    if have is None:
                        continue
                    c = committed.get(o)
                    if c is None:
                        committed[o] = _Commit(have[1], have[0], hw_epoch, e, have[2])
                    elif c.crc != have[1]:
                        vs.append(Violation("CommittedPrefixAgreement",
                                            f"offset {o} committed with CRC {c.crc} on node {c.entry.node} "
                                            f"but with CRC {have[1]} on node {nid}", [c.append, c.entry, have[2], e]))
                    elif hw_epoch < c.hw_epoch:
                        committed[o] = _Commit(c.crc, c.epoch, hw_epoch, e, c.append)
                if st.role != "leader" and hw > max(st.durable, st.snap_max) and not st.durable_reported:
                    st.durable_reported = True  # once per process life: every later HW repeats it
                    vs.append(Violation("MajorityReachedHighWatermark",
                                        f"node {nid} ({st.role}) took high-water mark {hw} while its durable (flushed) "
                                        f"log ended at {st.durable}: the Fetch that acknowledged those offsets came "
                                        "before their flush", [x for x in (st.flush_entry, e) if x is not None]))
                if st.role == "leader" and hw > st.hw and hw - 1 in st.log:
                    ep, crc, _ = st.log[hw - 1]
                    leader_hw.append((e, hw, ep, crc, pos))
                st.hw, st.hw_entry = max(st.hw, hw), e
            elif ev == "quorum":
                _sample_quorum(st, e, stale_leader_slack_ms, vs)
            elif ev == "fatal":
                life_fatal.append(e)
            elif ev == "corruption":
                life_damaged = True
            elif ev == "apply":
                applies.append((e, st.hw))
            elif ev == "decision" and not early_answer_reported and _answered_uncommitted(e, st.hw):
                early_answer_reported = True  # once per process life: every later answer repeats it
                vs.append(Violation("AnsweredBeforeCommit",
                                    f"node {nid} answered {e.get('api', 'a request')} successfully with its records "
                                    f"ending at offset {e['offset']} while its high-water mark was {st.hw}",
                                    [x for x in (st.hw_entry, e) if x is not None]))

    for ep, es in sorted(leaders.items()):
        if len({x.node for x in es}) > 1:
            vs.append(Violation("SingleLeader", f"nodes {sorted({x.node for x in es})} were all leader in epoch {ep}",
                                es))

    majority = len(voters) // 2 + 1
    for e, hw, ep, crc, pos in leader_hw:
        at = e.rmono if shared_clock else None
        holders = [v for v in voters if v in nodes and _held(nodes[v], hw, ep, crc, pos if v == e.node else None, at)]
        unknown = [v for v in voters if v not in holders and _maybe_cut(nodes.get(v), e, hw, shared_clock)]
        if len(holders) + len(unknown) < majority:
            vs.append(Violation("MajorityReachedHighWatermark",
                                f"leader {e.node} advanced the high-water mark to {hw} but only {holders} of voters "
                                f"{voters} {'had flushed' if at is not None else 'ever held'} offset {hw - 1} "
                                f"(epoch {ep}){' by then' if at is not None else ''}; a majority is {majority}", [e]))

    for o, c in sorted(committed.items()):
        for nid, st in nodes.items():
            have = st.log.get(o)
            # only below the node's own high-water mark: a node cut off when the journals end (a killed
            # run, collected before any heal) may still hold a divergent tail it has not learned about
            if have is not None and have[1] != c.crc and o < st.hw:
                vs.append(Violation("CommittedPrefixAgreement",
                                    f"node {nid} ends with CRC {have[1]} at committed offset {o} (committed: {c.crc})",
                                    [c.append, c.entry, have[2]]))

    for e, log, start in elections:
        for o, c in committed.items():
            if c.hw_epoch < int(e["epoch"]) and o >= start:
                have = log.get(o)
                if have is None or have[1] != c.crc:
                    what = "lacks" if have is None else f"has CRC {have[1]} at"
                    vs.append(Violation("LeaderCompleteness",
                                        f"node {e.node} became leader of epoch {e['epoch']} but {what} offset {o}, "
                                        f"committed in epoch {c.hw_epoch} with CRC {c.crc}", [c.entry, e]))
                    break

    for e, hw in applies:
        o = int(e["offset"])
        c = committed.get(o)
        if o >= hw:
            vs.append(Violation("NoUncommittedApply",
                                f"node {e.node} applied offset {o} while its high-water mark was {hw}", [e]))
        elif c is not None and e.get("crc") is not None and int(e["crc"]) != c.crc:
            vs.append(Violation("NoUncommittedApply",
                                f"node {e.node} applied CRC {e['crc']} at offset {o}; the committed CRC is {c.crc}",
                                [c.entry, e]))

    _check_durable_votes(journals, vs)
    _check_checkpointed_hw(journals, vs)
    stats = {"nodes": len(nodes), "voters": voters, "epochs_with_leader": len(leaders),
             "committed_offsets": len(committed), "applies": len(applies)}
    return result(vs, INVARIANTS, stats=stats)


def _check_durable_votes(journals: Journals, vs: list[Violation]) -> None:
    """DurableVote: what a restarted node read from its quorum-state (`start`'s `stored_epoch` and
    `stored_vote`) still holds the last vote it granted before (unless it had moved to a later epoch)."""
    for entries in journals.by_node.values():
        last: Entry | None = None  # the last granted (non-pre-) vote of the current process life
        damaged = False
        for e in entries:
            if e.ev == "start":
                if last is not None and not damaged and "stored_epoch" in e.fields:
                    _judge_vote(last, e, vs)
                last, damaged = None, False
            elif e.ev == "vote" and e.get("granted") and not e.get("pre_vote"):
                last = e
            elif e.ev == "corruption" and "quorum-state" in str(e.get("path", "")):
                damaged = True


def _check_checkpointed_hw(journals: Journals, vs: list[Violation]) -> None:
    """CheckpointedHighWatermark: the high-water mark a node reads back from its checkpoint when it
    recovers its log (`recovery`'s `hw_checkpoint`) is one it had journalled (`hw`, or a snapshot's
    end at `start`) in an earlier process life: a checkpoint beyond any HW the node knew claims
    uncommitted entries are committed (recovery then refuses to cut a damaged uncommitted tail)."""
    for entries in journals.by_node.values():
        known, known_entry = 0, None
        for e in entries:
            if e.ev == "hw" or (e.ev == "start" and e.get("hw")):
                if int(e["hw"]) > known:
                    known, known_entry = int(e["hw"]), e
            elif e.ev == "recovery" and int(e.get("hw_checkpoint") or 0) > known:
                vs.append(Violation("CheckpointedHighWatermark", (
                    f"node {e.node} recovered a high-water mark checkpoint of {e['hw_checkpoint']}, beyond the "
                    f"highest high-water mark it had ever known ({known}): its checkpoint claims uncommitted "
                    "entries are committed"), [x for x in (known_entry, e) if x is not None]))


def _judge_vote(vote: Entry, start: Entry, vs: list[Violation]) -> None:
    epoch, candidate = int(vote["epoch"]), vote["candidate"]
    stored_epoch, stored_vote = start.get("stored_epoch"), start.get("stored_vote")
    if stored_epoch is not None and (int(stored_epoch) > epoch or (int(stored_epoch) == epoch
                                                                   and stored_vote == candidate)):
        return
    held = "no quorum-state" if stored_epoch is None else f"epoch {stored_epoch}, voted for {stored_vote}"
    vs.append(Violation("DurableVote", (
        f"node {vote.node} granted its vote in epoch {epoch} to {candidate}, but after its restart its "
        f"quorum-state held {held}: it may vote again in that epoch, and two leaders can be elected "
        "(KIP-595: the vote is persisted before it is answered)"), [vote, start]))
