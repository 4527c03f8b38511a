"""What a leader says of its quorum (DescribeQuorum, KIP-595), judged against what each replica
journalled: the replica states an operator reads with `describe-quorum --replication`, and that
KIP-853's AddRaftVoter trusts to decide that a new voter has caught up.

- ReplicaProgressHeld: every log end offset a leader reports for another replica (voter or
  observer) was reached by that replica's own log at or before the moment the leader reported it.
  A leader learns a replica's log end only from that replica's Fetch, which the replica sends after
  it journalled the appends (or the snapshot, or the restart) that took its log there; a report
  beyond anything the replica ever held is made up — replica progress assumed, not learned.

Leaders journal a `quorum` sample about once a second with `replicas` (replica id → the log end
offset their DescribeQuorum answer gives). The rule orders one node's journal against another's,
so it is judged only when the journals share a clock (`Journals.shared_clock`: one kernel's
`rmono`, the namespace lab), and only for replicas whose journal began before the reporting leader's
term (a wiped data directory starts its node's journal afresh, and a leader keeps the progress it
learned from the replica's earlier life until its term ends); "ever held" keeps it sound across
truncations, restarts and lost unflushed writes (a replica that once held an offset may have lost
it since; the leader's record of it is stale then, not invented).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["ReplicaProgressHeld"]


@dataclass
class _Reach:
    """How far one node's log ever reached, over its journal's `rmono` times."""

    since: int | None = None  # the journal's first `rmono`: before it, the replica's past is unknown
    times: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # the highest log end reached at or before times[i]
    entries: list[Entry] = field(default_factory=list)

    def note(self, e: Entry, end: int) -> None:
        assert e.rmono is not None
        top = max(end, self.ends[-1]) if self.ends else end
        self.times.append(e.rmono)
        self.ends.append(top)
        self.entries.append(e)

    def at(self, rmono: int) -> tuple[int, Entry | None]:
        """The highest log end reached at or before `rmono`, and the entry that last raised it."""
        i = bisect.bisect_right(self.times, rmono) - 1
        if i < 0:
            return 0, None
        top = self.ends[i]
        j = i
        while j > 0 and self.ends[j - 1] == top:
            j -= 1
        return top, self.entries[j]


def _reach(entries: list[Entry]) -> _Reach:
    reach, end = _Reach(since=entries[0].rmono if entries else None), 0
    for e in entries:
        if e.ev == "start":
            end = int(e.get("log_end", 0) or 0)
        elif e.ev == "append":
            end = int(e["base"]) + len(e["crcs"])
        elif e.ev == "truncate":
            end = int(e["to"])
        elif e.ev == "snapshot" and e.get("action") in ("load", "fetch"):
            end = max(end, int(e["offset"]))
        else:
            continue
        reach.note(e, end)
    return reach


def check_quorum(journals: Journals) -> dict[str, Any]:
    samples = [e for e in journals.all() if e.ev == "quorum" and isinstance(e.get("replicas"), dict)]
    if not samples:
        return result([], [], {"ReplicaProgressHeld": "no leader journalled the replica states it reports"})
    if not journals.shared_clock:
        return result([], [], {"ReplicaProgressHeld": "the journals share no clock (nodes on different hosts): "
                                                      "one node's events cannot be ordered against another's"})
    reach = {nid: _reach(es) for nid, es in journals.by_node.items()}
    terms = {nid: [e.rmono for e in es if e.ev == "role" and e.get("role") == "leader" and e.rmono is not None]
             for nid, es in journals.by_node.items()}
    vs: list[Violation] = []
    reported: set[tuple[int, int]] = set()  # (leader, replica): one report per pair
    judged = 0
    for s in samples:
        assert s.rmono is not None
        for rid_text, offset in sorted(s["replicas"].items()):
            rid, claimed = int(rid_text), int(offset)
            known = reach.get(rid)
            began = [t for t in terms.get(s.node, []) if t <= s.rmono]
            term_start = began[-1] if began else s.rmono
            if rid == s.node or known is None or known.since is None or known.since > term_start or claimed <= 0:
                continue  # the leader itself, a replica without a journal, or one whose journal began in this term
            judged += 1
            held, where = known.at(s.rmono)
            if claimed > held and (s.node, rid) not in reported:
                reported.add((s.node, rid))
                vs.append(Violation(
                    "ReplicaProgressHeld",
                    f"leader {s.node} (epoch {s.get('epoch')}) reported replica {rid}'s log end offset as {claimed}, "
                    f"but replica {rid}'s log had never reached beyond {held} by then: the leader assumed progress it "
                    "never learned from a Fetch (describe-quorum shows it; AddRaftVoter would take the replica for "
                    "caught up)",
                    [x for x in (where, s) if x is not None],
                    before=f"replica {rid} holds its log up to offset {held}",
                    after=f"leader {s.node} reports replica {rid} at log end offset {claimed}"))
    return result(vs, INVARIANTS, stats={"replica_states_judged": judged})
