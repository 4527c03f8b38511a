"""Raft invariants over node journals (the checks of Kafka's RaftEventSimulationTest, offline).

Each node's journal is replayed in its own order to rebuild its log (appends, truncations,
snapshots, restarts), its epochs, roles and high-water marks. Then:

- SingleLeader: at most one node is leader in any epoch.
- MonotonicEpoch: a node's epoch never goes down (it is durable across restarts; a restart with
  an empty log — new or wiped storage — starts the node's history over).
- MonotonicHighWatermark: a node's high-water mark never goes down within one process life.
- MajorityReachedHighWatermark: when a leader advances its high-water mark to H, a majority of
  voters have appended the entry at H-1 (same epoch and CRC) or hold a snapshot covering it.
  Cross-node order is not trusted (clocks skew), so "have" means at some point in their journal.
- CommittedPrefixAgreement: every node that saw an offset committed saw the same CRC there, no
  node's final log differs from a committed CRC, and no node truncates an entry below its own
  high-water mark (except to replace its log with a snapshot, or to cut a corrupt tail found on
  recovery: storage damage is reported by its own `corruption` event).
- LeaderCompleteness: every entry committed in an epoch is in the log of every leader of a later
  epoch at the moment it became leader.
- NoUncommittedApply: a node applies an offset only below its high-water mark, with the
  committed CRC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checker.invariant import Violation, result
from checker.journal import Entry, Journals

INVARIANTS = ["SingleLeader", "MonotonicEpoch", "MonotonicHighWatermark", "MajorityReachedHighWatermark",
              "CommittedPrefixAgreement", "LeaderCompleteness", "NoUncommittedApply"]


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
    ever: dict[int, set[tuple[int, int]]] = field(default_factory=dict)  # offset → {(epoch, crc)} ever appended
    snap_max: int = 0


@dataclass
class _Commit:
    crc: int
    epoch: int  # the epoch of the entry
    hw_epoch: int  # the epoch of the high-water mark event that committed it
    entry: Entry  # that high-water mark event
    append: Entry  # the append that wrote the entry


def check_raft(journals: Journals, voters: list[int] | None = None) -> dict[str, Any]:
    """Check the invariants above; `voters` defaults to the union of `start` events' voters."""
    vs: list[Violation] = []
    nodes: dict[int, _Node] = {n: _Node() for n in journals.by_node}
    if voters is None:
        found = {v for e in journals.all() if e.ev == "start" for v in e.get("voters") or []}
        voters = sorted(found) or sorted(journals.by_node)
    leaders: dict[int, list[Entry]] = {}
    committed: dict[int, _Commit] = {}
    elections: list[tuple[Entry, dict[int, tuple[int, int, Entry]], int]] = []
    leader_hw: list[tuple[Entry, int, int, int]] = []  # (hw entry, hw, entry epoch, crc) on leaders
    applies: list[tuple[Entry, int]] = []  # (apply entry, node hw then)

    for nid, entries in journals.by_node.items():
        st = nodes[nid]
        for e in entries:
            ev = e.ev
            if ev == "start":
                st.log_start = int(e.get("log_start", 0))
                st.log_end = int(e.get("log_end", 0))
                if st.log_end == 0:  # new or wiped storage: this node's durable history starts over
                    st.epoch, st.epoch_entry = -1, None
                st.log = {o: x for o, x in st.log.items() if st.log_start <= o < st.log_end}
                st.hw = int(e.get("hw", 0) or 0)
                st.hw_entry = e
                st.role = "unattached"
            elif ev == "role":
                ep = int(e["epoch"])
                if ep < st.epoch and st.epoch_entry is not None:
                    vs.append(Violation("MonotonicEpoch", f"node {nid} went from epoch {st.epoch} back to {ep}",
                                        [st.epoch_entry, e]))
                st.epoch, st.epoch_entry, st.role = ep, e, str(e["role"])
                if st.role == "leader":
                    leaders.setdefault(ep, []).append(e)
                    elections.append((e, dict(st.log), st.log_start))
            elif ev == "append":
                base, ep = int(e["base"]), int(e["epoch"])
                for j, crc in enumerate(e["crcs"]):
                    st.log[base + j] = (ep, int(crc), e)
                    st.ever.setdefault(base + j, set()).add((ep, int(crc)))
                st.log_end = base + len(e["crcs"])
            elif ev == "truncate":
                to = int(e["to"])
                if e.get("reason") not in ("snapshot", "corrupt-tail") and to < st.hw:
                    vs.append(Violation("CommittedPrefixAgreement",
                                        f"node {nid} truncated its log to {to}, below its high-water mark {st.hw}",
                                        [x for x in (st.hw_entry, e) if x is not None]))
                st.log = {o: x for o, x in st.log.items() if o < to}
                st.log_end = to
            elif ev == "snapshot":
                if e.get("action") in ("load", "fetch"):
                    off = int(e["offset"])
                    st.log_start = max(st.log_start, off)
                    st.snap_max = max(st.snap_max, off)
                    st.log = {o: x for o, x in st.log.items() if o >= off}
                    st.log_end = max(st.log_end, off)
            elif ev == "hw":
                hw = int(e["hw"])
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
                if st.role == "leader" and hw > st.hw and hw - 1 in st.log:
                    ep, crc, _ = st.log[hw - 1]
                    leader_hw.append((e, hw, ep, crc))
                st.hw, st.hw_entry = max(st.hw, hw), e
            elif ev == "apply":
                applies.append((e, st.hw))

    for ep, es in sorted(leaders.items()):
        if len({x.node for x in es}) > 1:
            vs.append(Violation("SingleLeader", f"nodes {sorted({x.node for x in es})} were all leader in epoch {ep}",
                                es))

    majority = len(voters) // 2 + 1
    for e, hw, ep, crc in leader_hw:
        holders = [v for v in voters if v in nodes and ((ep, crc) in nodes[v].ever.get(hw - 1, set())
                                                       or nodes[v].snap_max >= hw)]
        if len(holders) < majority:
            vs.append(Violation("MajorityReachedHighWatermark",
                                f"leader {e.node} advanced the high-water mark to {hw} but only {holders} of voters "
                                f"{voters} ever held offset {hw - 1} (epoch {ep}); a majority is {majority}", [e]))

    for o, c in sorted(committed.items()):
        for nid, st in nodes.items():
            have = st.log.get(o)
            if have is not None and have[1] != c.crc:
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

    stats = {"nodes": len(nodes), "voters": voters, "epochs_with_leader": len(leaders),
             "committed_offsets": len(committed), "applies": len(applies)}
    return result(vs, INVARIANTS, stats=stats)
