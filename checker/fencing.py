"""Fencing invariants over node journals (controller decisions, fences, applies) and the history.

- StaleEpochAccepted: a controller accepts a heartbeat carrying a broker epoch older than a
  registration of that broker it had already decided or applied (broker epochs are the offsets
  of RegisterBrokerRecords, so "older" is plain integer order).
- OldIncarnationAccepted: a controller accepts a registration from an incarnation that a newer
  registration of the same broker had replaced (since the broker's last unregistration that
  controller applied: an unregistration frees the id, as in Kafka).
- SessionNotFenced: a broker the active controller unfenced, or found unfenced in its committed
  image when it became active (its first high-water mark as leader), goes silent (no accepted
  heartbeat) longer than the session timeout plus the stated slack — counted from that unfence,
  heartbeat or activation — and that controller neither fences it nor loses leadership in that
  time (measured on the controller's own clock) — and is still active a second after its journal
  first shows that (a paused controller first acts after it resumes: its first steps may come
  before the tick that fences or resigns). A killed broker must be fenced like a silent one.
- FencedInIsr: after a controller fences or shuts down a broker (and before it unfences it),
  it accepts an AlterPartition that puts that broker in an ISR or makes it leader — within one
  term of that controller (another controller may unfence the broker between its terms). And
  from the committed records every node applies (`apply` events with `batch_end` and the state
  a record left): once a batch holding a FenceBrokerRecord is applied, the fenced broker is in
  no ISR and leads nothing (until an UnfenceBrokerRecord) — judged at the end of each batch,
  since the fence and the ISR changes it causes are written together.
- LeaderOutsideIsr: an accepted AlterPartition whose leader is not in its ISR, or whose ISR is
  not within the replicas (when the decision names them).
- EpochsGoBack: per partition, accepted AlterPartitions with partition epochs that do not grow
  strictly (an accepted no-op, `changed: false`, repeats the current one) or leader epochs that
  shrink as partition epochs grow (all controllers together).
- MetadataGoesBack: a node applies offsets out of order within one process life.
- EpochBumpedForSameIncarnation: in log order (decisions carry the offset their records
  commit at), a successful registration of the incarnation that holds the broker's live
  registration (no unregistration or other incarnation since) returns a different broker epoch.
- SelfFencing: a broker (its `heartbeat` outcomes and `broker_state`s) whose last successful
  heartbeat is older than its self-fence timeout plus the slack, twice in a row (two failure
  samples, since one sample's clock reading may differ from the step's it follows), while it is
  RUNNING and not FENCED_SELF — it kept accepting client requests it must refuse.
- UnfencedBeforeCaughtUp: a controller answers a heartbeat "unfenced" while the heartbeat's
  metadata offset is below the broker epoch (the offset of the broker's own registration record)
  and no heartbeat of that registration had shown it caught up before — on the same controller, or
  on any controller when the journals share one clock (KIP-631: a broker is unfenced only once it
  has replayed the metadata log up to its registration).
- FencedWithLiveSession: a controller fences a broker for "session timeout" less than the session
  timeout after it accepted a heartbeat of that registration, both read on that controller's own
  clock in one process life (`at_ms` of its heartbeat decisions and of the fence): a broker that
  heartbeats in time keeps its lease (KIP-631) — fencing it anyway takes a live broker out of every
  ISR and leadership.
- RegisteredOverLiveSession: a controller registers a new incarnation of a broker less than the
  session timeout after it accepted a heartbeat of the broker's current registration, on its own
  clock in one process life, with no unregistration or controlled shutdown of that registration in
  between (KIP-631: a new incarnation is refused, DUPLICATE_BROKER_REGISTRATION, while the old one's
  session is live — else two processes act as one broker).
- ControllerJournalFields, BrokerStateOrder, LeaseBound, FenceAlternates, DecisionsFromLeader: the controller's and
  brokers' lines these rules read keep their contract (checker.controller_journal).
- AckedLost: an acknowledged create (or registration) is missing from the last successful read
  of the topic list (or of the registry) though no delete (unregister) of it was attempted.
Also measured (reported, not judged): how far behind each node's last applied offset is at the
end, and the lag between a leader committing an offset and each node applying it.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Iterator
from typing import Any

from kraftlab.checker import controller_journal, op_words
from kraftlab.checker.history import History, pair_ops
from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals, cut_at
from kraftlab.checker.registrations import committed_broker_records

INVARIANTS = ["StaleEpochAccepted", "OldIncarnationAccepted", "SessionNotFenced", "FencedInIsr",
              "LeaderOutsideIsr", "EpochsGoBack", "MetadataGoesBack", "EpochBumpedForSameIncarnation", "SelfFencing",
              "UnfencedBeforeCaughtUp", "FencedWithLiveSession", "RegisteredOverLiveSession",
              *controller_journal.INVARIANTS, "AckedLost"]
SERVING = ("RUNNING", "PENDING_CONTROLLED_SHUTDOWN")
CONFIRM_MS = 1000.0
SLACK_MS = 3000.0
"""How much longer than the session a silent broker may stay unfenced before SessionNotFenced (the
active controller's tick and the journal's own delays), by default."""
TERM_ENDS = ("role", "start", "corruption")
"""Events that end a controller's term for SessionNotFenced: a resignation is the first step of a
controller that stalled past the limit, not a step it took while still active."""
BROKER_RECORDS = ("FenceBrokerRecord", "UnfenceBrokerRecord", "RegisterBrokerRecord", "UnregisterBrokerRecord",
                  "BrokerRegistrationChangeRecord")


def _ok(e: Entry, api: str) -> bool:
    return e.ev == "decision" and e.get("api") == api and e.get("error", "NONE") == "NONE"


def _known(decision: Entry, applied: int) -> int:
    """The applied offsets a decision could have seen: a controller journals a decision when it
    answers (once the decision's records committed), but took it on its state as of the decision's
    `offset` — records applied between the two came after it."""
    at = decision.get("offset")
    return applied if at is None else min(applied, int(at))


def _registrations(journals: Journals) -> list[Entry]:
    return [e for e in journals.all() if _ok(e, "BrokerRegistration")]


class _SeenRegistrations:
    """One controller's view of one broker's registrations: those it decided, and those it has applied
    (epoch ≤ its applied offset, which only grows), kept as each incarnation's highest epoch, so each
    decision asks "is there a newer one?" without rescanning every registration of the run (a 10-minute
    run has thousands, and a scan per heartbeat made this rule take most of its check)."""

    def __init__(self, by_epoch: list[Entry], epochs: list[int]) -> None:
        self._regs = by_epoch  # this broker's registrations (every controller's), sorted by epoch
        self._epochs = epochs  # their epochs, shared by every controller's view
        self._applied_upto = 0  # _regs[:_applied_upto] have epoch ≤ the controller's applied offset
        self._ids: set[int] = set()
        self._max_by_incarnation: dict[Any, int] = {}
        self.decided: list[Entry] = []
        self._max_decided = -1

    def advance(self, applied: int) -> None:
        while self._applied_upto < len(self._epochs) and self._epochs[self._applied_upto] <= applied:
            self._add(self._regs[self._applied_upto])
            self._applied_upto += 1

    def decide(self, e: Entry) -> None:
        self._add(e)
        self.decided.append(e)
        self._max_decided = max(self._max_decided, int(e["broker_epoch"]))

    def _add(self, r: Entry) -> None:
        if id(r) not in self._ids:
            self._ids.add(id(r))
            inc, epoch = r.get("incarnation"), int(r["broker_epoch"])
            self._max_by_incarnation[inc] = max(epoch, self._max_by_incarnation.get(inc, epoch))

    def newer_than(self, epoch: int, applied: int) -> bool:
        """A registration with a higher epoch that is applied here or was decided here."""
        i = bisect.bisect_right(self._epochs, epoch)
        return (i < len(self._epochs) and self._epochs[i] <= applied) or self._max_decided > epoch

    def replaced(self, incarnation: Any, since: int = -1) -> bool:
        """A registration of `incarnation` is seen, and one of another incarnation with a higher epoch —
        both after `since`, the offset of the broker's last unregistration this controller applied (an
        unregistration frees the id: the incarnations it had replaced may register again)."""
        mine = self._max_by_incarnation.get(incarnation)
        return mine is not None and mine > since and any(
            v > mine for inc, v in self._max_by_incarnation.items() if inc != incarnation)


def _check_epochs(journals: Journals, vs: list[Violation]) -> None:
    regs = _registrations(journals)
    by_broker: dict[int, list[Entry]] = {}
    for r in regs:
        by_broker.setdefault(int(r["broker"]), []).append(r)
    for rs in by_broker.values():
        rs.sort(key=lambda r: int(r["broker_epoch"]))
    epochs = {b: [int(r["broker_epoch"]) for r in rs] for b, rs in by_broker.items()}
    for nid, entries in journals.by_node.items():
        applied = -1
        seen = {b: _SeenRegistrations(rs, epochs[b]) for b, rs in by_broker.items()}  # broker → this controller's
        unregistered: dict[int, int] = {}  # broker → offset of its last unregistration applied here
        for e in entries:
            if e.ev == "apply":
                applied = max(applied, int(e["offset"]))
                if e.get("type") == "UnregisterBrokerRecord" and e.get("broker") is not None:
                    unregistered[int(e["broker"])] = int(e["offset"])
            elif _ok(e, "BrokerRegistration"):
                view = seen[int(e["broker"])]
                view.advance(_known(e, applied))
                if view.replaced(e.get("incarnation"), unregistered.get(int(e["broker"]), -1)):
                    older, newer = _incarnations(e, view.decided, by_broker[int(e["broker"])], applied)
                    vs.append(Violation("OldIncarnationAccepted",
                                        f"controller {nid} accepted broker {e['broker']}'s incarnation "
                                        f"{e.get('incarnation')} again after incarnation {newer.get('incarnation')} "
                                        "replaced it", [older, newer, e],
                                        before=f"broker {e['broker']} registered as incarnation "
                                               f"{newer.get('incarnation')}, which replaced {e.get('incarnation')}",
                                        after=f"the replaced incarnation {e.get('incarnation')} registered again"))
                view.decide(e)
            elif _ok(e, "BrokerHeartbeat"):
                b, ep = int(e["broker"]), int(e["broker_epoch"])
                known_view, known = seen.get(b), _known(e, applied)
                if known_view is not None and known_view.newer_than(ep, known):
                    later = [r for r in regs if int(r["broker"]) == b and ep < int(r["broker_epoch"])
                             and (int(r["broker_epoch"]) <= known or any(r is k for k in known_view.decided))]
                    vs.append(Violation("StaleEpochAccepted",
                                        f"controller {nid} accepted a heartbeat of broker {b} with epoch {ep} though "
                                        f"it knew registration epoch {later[-1]['broker_epoch']}", [later[-1], e],
                                        before=f"broker {b} registered at broker epoch {later[-1]['broker_epoch']}",
                                        after=f"a heartbeat at broker epoch {ep} accepted (Kafka answers "
                                              "STALE_BROKER_EPOCH)"))


def _incarnations(e: Entry, decided: list[Entry], regs: list[Entry], applied: int) -> tuple[Entry, Entry]:
    """For a violation `_SeenRegistrations.replaced` found: the latest registration of `e`'s incarnation
    and the latest of another one after it, among those decided here or applied here."""
    ids = {id(k) for k in decided}
    seen = decided + [r for r in regs if id(r) not in ids and int(r["broker_epoch"]) <= applied]
    seen.sort(key=lambda r: int(r["broker_epoch"]))
    older = [r for r in seen if r.get("incarnation") == e.get("incarnation")]
    newer = [r for r in seen if r.get("incarnation") != e.get("incarnation")
             and int(r["broker_epoch"]) > int(older[-1]["broker_epoch"])]
    return older[-1], newer[-1]


def _expire(watched: dict[int, Entry], overdue: dict[int, Entry], e: Entry, nid: int, limit_ns: float,
            vs: list[Violation], timeout_ms: float, slack_ms: float) -> None:
    """SessionNotFenced once the controller was still active CONFIRM_MS after it first showed a
    broker overdue: a controller paused past the limit gets its first steps after it resumes."""
    for b, last in list(watched.items()):
        if e.mono - last.mono <= limit_ns:
            continue
        first = overdue.setdefault(b, e)
        if e.mono - first.mono >= CONFIRM_MS * 1_000_000:
            since = ("since it became active with the broker unfenced in its image" if last.ev in ("hw", "apply")
                     else "after its last heartbeat")
            vs.append(Violation("SessionNotFenced",
                                f"controller {nid} kept broker {b} unfenced {(e.mono - last.mono) / 1e6:.0f} ms "
                                f"{since} (session {timeout_ms:g} ms + slack {slack_ms:g} ms)",
                                [last, first, e]))
            del watched[b], overdue[b]


def _broker_offsets(journals: Journals) -> dict[int, int]:
    """Log offset → broker of every committed registration and unregistration decision (they carry
    the offset of their record): names the broker of an `apply` from journals whose broker record
    applies do not carry it."""
    return {int(e["offset"]): int(e["broker"]) for e in journals.all()
            if (_ok(e, "BrokerRegistration") or _ok(e, "UnregisterBroker")) and e.get("offset") is not None}


def _applied_fenced(e: Entry, brokers: dict[int, int]) -> tuple[int, bool] | None:
    """The broker an applied broker record is about and whether it left it fenced (None: not a
    broker record, or its broker is unknown). An unregistration leaves no broker: fenced too."""
    kind = e.get("type")
    b = e.get("broker")
    if b is None and kind in ("RegisterBrokerRecord", "UnregisterBrokerRecord"):
        b = brokers.get(int(e["offset"]))
    if b is None or kind not in BROKER_RECORDS:
        return None
    if kind in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
        return int(b), kind == "FenceBrokerRecord"
    return int(b), bool(e.get("fenced", True))


class _Term:
    """One node's view for SessionNotFenced: the brokers its applied image holds unfenced, and
    while it is the active controller the brokers it must keep a session for, each with its last
    sign of life. Activation is the leader's first `hw` H in its epoch (the LeaderChange is
    committed: the controller takes over the committed image and leases every broker in it),
    or its last apply below H if its replay lags behind; from then on every broker unfenced in
    the image is watched from activation, except those this controller decided a fence or
    unfence for (its own events say what it did)."""

    def __init__(self) -> None:
        self.unfenced: set[int] = set()
        self.leading = False
        self.active: Entry | None = None  # the activation (then the last apply below its HW)
        self.active_hw = 0
        self.watched: dict[int, Entry] = {}  # broker → last sign of life (activation, unfence, heartbeat)
        self.overdue: dict[int, Entry] = {}  # broker → the first event that showed it overdue
        self.decided: dict[int, float] = {}  # broker → log offset of this term's last fence event for it

    def new_term(self, leading: bool) -> None:
        self.leading, self.active = leading, None
        self.watched.clear()
        self.overdue.clear()
        self.decided.clear()

    def activate(self, e: Entry) -> None:
        self.active, self.active_hw = e, int(e["hw"])
        for b in sorted(self.unfenced - set(self.decided) - set(self.watched)):
            self.watched[b] = e

    def replayed(self, e: Entry) -> None:
        """An apply below the activating HW: the controller is active once it has replayed it."""
        if self.active is None or int(e["offset"]) >= self.active_hw:
            return
        old, self.active = self.active, e
        for b, w in self.watched.items():
            if w is old:
                self.watched[b] = e

    def fence_event(self, e: Entry) -> None:
        b = int(e["broker"])
        self.decided[b] = float(e["offset"]) if e.get("offset") is not None else float("inf")
        self.overdue.pop(b, None)
        if e.get("action") == "unfence":
            self.watched[b] = e
        else:
            self.watched.pop(b, None)

    def applied(self, e: Entry, b: int, fenced: bool) -> None:
        if fenced:
            self.unfenced.discard(b)
        else:
            self.unfenced.add(b)
        if self.active is None or self.decided.get(b, -1.0) > int(e["offset"]):
            return  # not active yet, or this controller decided later what becomes of the broker
        if fenced:
            self.watched.pop(b, None)
            self.overdue.pop(b, None)
        elif b not in self.watched and b not in self.decided:
            self.watched[b] = self.active  # an older leader's unfence, committed as this one took over


def _check_sessions(journals: Journals, vs: list[Violation], timeout_ms: float, slack_ms: float) -> None:
    limit_ns = (timeout_ms + slack_ms) * 1_000_000
    brokers = _broker_offsets(journals)
    for nid, entries in journals.by_node.items():
        t = _Term()
        for e in entries:
            if t.leading and e.ev not in TERM_ENDS:  # the step that ends the term is no step of it
                _expire(t.watched, t.overdue, e, nid, limit_ns, vs, timeout_ms, slack_ms)
            if e.ev == "start" or (e.ev == "snapshot" and e.get("action") in ("load", "fetch")):
                t.unfenced.clear()  # a new image: only what is applied from now on is known
            if e.ev in TERM_ENDS:  # storage damage is found by a restarting process
                t.new_term(e.ev == "role" and e.get("role") == "leader")
            elif e.ev == "hw" and t.leading and t.active is None:
                t.activate(e)
            elif e.ev == "apply":
                t.replayed(e)
                change = _applied_fenced(e, brokers)
                if change is not None:
                    t.applied(e, *change)
            elif e.ev == "fence" and t.leading:
                t.fence_event(e)
            elif (_ok(e, "BrokerHeartbeat") or _ok(e, "BrokerRegistration")) and int(e["broker"]) in t.watched:
                # an accepted registration is a sign of life too: a retry of the live incarnation
                # renews its session (the controller's leases, as Kafka's heartbeat manager does)
                t.watched[int(e["broker"])] = e
                t.overdue.pop(int(e["broker"]), None)


def _in_log_order(entries: list[Entry]) -> list[Entry]:
    """Fence and decision events in the order their records take effect in the log. A node
    journals a fence when it decides it but a decision when its records commit, so journal
    order can put a fence before a decision whose records come earlier in the log; both carry
    `offset` (the log position they are in effect from), and a stable sort on it restores the
    log's order. Journals without offsets keep their line order."""
    if not all(e.get("offset") is not None for e in entries):
        return entries
    return sorted(entries, key=lambda e: int(e["offset"]))


def _fence_states(entries: list[Entry]) -> Iterator[tuple[Entry, dict[int, Entry]]]:
    """A node's fence and AlterPartition events, term by term (a `role` event ends a term), each
    with the brokers that node fenced in that term so far (the caller updates the dict). A
    controller knows only the fences and unfences it decided while active: another controller
    may unfence a broker between two of its terms, so its fences do not carry over."""
    term: list[Entry] = []
    for e in [*entries, None]:
        if e is None or e.ev == "role":
            fenced: dict[int, Entry] = {}
            for x in _in_log_order(term):
                yield x, fenced
            term = []
        elif e.ev == "fence" or _ok(e, "AlterPartition"):
            term.append(e)


def _partition_key(e: Entry) -> tuple[Any, int]:
    """A partition of one topic incarnation: a deleted topic's name comes back with a new topic id
    and partition epochs that start again at 0 (decisions before topic ids were journalled: the name)."""
    return (e.get("topic_id") or e.get("topic"), int(e.get("partition", 0)))


def _label(e: Entry) -> str:
    return f"{e.get('topic')}-{int(e.get('partition', 0))}"


def _check_partitions(journals: Journals, vs: list[Violation]) -> None:
    by_part: dict[tuple[Any, int], list[Entry]] = {}
    for nid, entries in journals.by_node.items():
        last: dict[tuple[Any, int], Entry] = {}
        for e, fenced in _fence_states(entries):
            if e.ev == "fence":
                b = int(e["broker"])
                if e.get("action") == "unfence":
                    fenced.pop(b, None)
                else:
                    fenced[b] = e
                continue
            if not _ok(e, "AlterPartition"):
                continue
            key = _partition_key(e)
            by_part.setdefault(key, []).append(e)
            isr = [int(x) for x in e.get("isr") or []]
            leader = e.get("leader")
            for b in sorted(set(isr + ([int(leader)] if leader is not None else []))):
                if b in fenced:
                    vs.append(Violation("FencedInIsr",
                                        f"controller {nid} put broker {b} in the ISR/leadership of {_label(e)} "
                                        f"after {fenced[b].get('action')}-ing it", [fenced[b], e]))
            if leader is not None and int(leader) >= 0 and int(leader) not in isr:
                vs.append(Violation("LeaderOutsideIsr", f"{_label(e)}: leader {leader} is not in ISR {isr}",
                                    [e]))
            replicas = e.get("replicas")
            if replicas is not None and not set(isr) <= {int(r) for r in replicas}:
                vs.append(Violation("LeaderOutsideIsr",
                                    f"{_label(e)}: ISR {isr} is not within replicas {replicas}", [e]))
            prev = last.get(key)
            pe = int(e["partition_epoch"])
            if prev is not None and (pe < int(prev["partition_epoch"]) or (
                    pe == int(prev["partition_epoch"]) and e.get("changed", True))):
                vs.append(Violation("EpochsGoBack",
                                    f"controller {nid}: {_label(e)} partition epoch went from "
                                    f"{prev['partition_epoch']} to {e['partition_epoch']}", [prev, e]))
            last[key] = e
    for es in by_part.values():
        at_epoch: dict[int, Entry] = {}
        for e in sorted(es, key=lambda x: int(x["partition_epoch"])):
            pe = int(e["partition_epoch"])
            other = at_epoch.get(pe)
            if other is not None and other.node != e.node and sorted(other.get("isr") or []) != sorted(
                    e.get("isr") or []):
                vs.append(Violation("EpochsGoBack", f"{_label(e)}: two different states accepted with "
                                                    f"partition epoch {pe}", [other, e]))
            at_epoch[pe] = e
        ordered = sorted(es, key=lambda x: int(x["partition_epoch"]))
        for earlier, later in itertools.pairwise(ordered):
            if int(later.get("leader_epoch", 0)) < int(earlier.get("leader_epoch", 0)):
                vs.append(Violation("EpochsGoBack", f"{_label(later)}: leader epoch fell from "
                                                    f"{earlier['leader_epoch']} to {later['leader_epoch']} as the "
                                                    "partition epoch grew", [earlier, later]))


def _judge_batch(fenced: dict[int, Entry], parts: dict[tuple[str, int], Entry],
                 reported: set[tuple[int, int, str, int]], vs: list[Violation]) -> None:
    """At the end of an applied batch: no fenced broker in an ISR or leading."""
    for b, f in fenced.items():
        for key, p in parts.items():
            if b not in [int(x) for x in p.get("isr") or []] and int(p.get("leader", -1)) != b:
                continue
            tag = (b, int(f["offset"]), key[0], key[1])
            if tag not in reported:
                reported.add(tag)
                vs.append(Violation("FencedInIsr", f"broker {b} was fenced at offset {f['offset']} but "
                                                   f"{p.get('topic')}-{key[1]} kept it (ISR {p.get('isr')}, leader "
                                                   f"{p.get('leader')}) after that batch, as node {f.node} applied it",
                                    [f, p]))


def _check_applied_fences(journals: Journals, vs: list[Violation]) -> None:
    """FencedInIsr over the committed records each node applied, judged at batch ends. Only
    partition applies that carry the topic id count (a deleted topic's name can come back)."""
    reported: set[tuple[int, int, str, int]] = set()
    for entries in journals.by_node.values():
        fenced: dict[int, Entry] = {}  # broker → the apply of its FenceBrokerRecord
        parts: dict[tuple[str, int], Entry] = {}  # (topic id, partition) → the apply that left its state
        batch: int | None = None
        for e in entries:
            if e.ev == "start" or (e.ev == "snapshot" and e.get("action") in ("load", "fetch")):
                fenced, parts, batch = {}, {}, None  # a new image; a crash may have cut the last batch short
                continue
            if e.ev != "apply" or e.get("batch_end") is None:
                continue
            if batch is not None and int(e["batch_end"]) != batch:
                _judge_batch(fenced, parts, reported, vs)
            batch = int(e["batch_end"])
            kind = e.get("type")
            if kind == "FenceBrokerRecord" and e.get("broker") is not None:
                fenced[int(e["broker"])] = e
            elif kind == "UnfenceBrokerRecord" and e.get("broker") is not None:
                fenced.pop(int(e["broker"]), None)
            elif kind == "RemoveTopicRecord" and e.get("topic_id") is not None:
                parts = {k: p for k, p in parts.items() if k[0] != e["topic_id"]}
            elif e.get("isr") is not None and e.get("topic_id") is not None:
                parts[(str(e["topic_id"]), int(e.get("partition", 0)))] = e


def _check_reregistration(journals: Journals, vs: list[Violation]) -> None:
    """EpochBumpedForSameIncarnation: registrations and unregistrations in log order. An
    unregistration ends the live registration when it was answered, and also when its record
    committed (an `apply` of UnregisterBrokerRecord on any node): a request answered NOT_CONTROLLER
    by a controller that resigned may still commit under the next leader, a write in doubt."""
    events = [e for e in journals.all() if _ok(e, "BrokerRegistration") or _ok(e, "UnregisterBroker")]
    if all(e.get("offset") is not None for e in events):
        committed = committed_broker_records(journals, ("UnregisterBrokerRecord",))
        events = sorted([*events, *committed], key=lambda e: int(e["offset"]))
    live: dict[int, Entry] = {}  # broker → its live registration
    for e in events:
        b = int(e["broker"])
        if e.get("api") == "UnregisterBroker" or e.ev == "apply":
            live.pop(b, None)
            continue
        held = live.get(b)
        if held is not None and held.get("incarnation") == e.get("incarnation") and int(
                held["broker_epoch"]) != int(e["broker_epoch"]):
            vs.append(Violation("EpochBumpedForSameIncarnation",
                                f"controller {e.node} registered broker {b}'s incarnation {e.get('incarnation')} "
                                f"again with epoch {e['broker_epoch']}, though it held epoch {held['broker_epoch']}",
                                [held, e]))
        live[b] = e


def _check_caught_up(journals: Journals, vs: list[Violation]) -> None:
    """UnfencedBeforeCaughtUp (heartbeat decisions that journal the request's metadata offset, and
    unfences that journal the offset of the heartbeat that caused them: a controller that loses its
    leadership before answering leaves no decision, only its unfence, which a later controller's
    answer "unfenced" rests on)."""
    beats = [e for e in journals.all() if e.get("metadata_offset") is not None and (
        _ok(e, "BrokerHeartbeat") or (e.ev == "fence" and e.get("action") == "unfence"))]
    # (a controller's unfence and its answer carry the same offset: the unfence comes first)
    shared = journals.shared_clock
    if shared:
        beats.sort(key=lambda e: e.rmono or 0)
    caught: set[tuple[Any, int, int]] = set()  # (controller or "any", broker, epoch) shown caught up
    reported: set[tuple[int, int]] = set()
    for e in beats:
        unfence = e.ev == "fence"
        key = (int(e["broker"]), int(e["epoch"] if unfence else e["broker_epoch"]))
        scope = "any" if shared else e.node
        if int(e["metadata_offset"]) >= key[1]:
            caught.add((scope, *key))
        elif (unfence or e.get("fenced") is False) and (scope, *key) not in caught and key not in reported:
            reported.add(key)
            what = "unfenced" if unfence else "answered"
            vs.append(Violation("UnfencedBeforeCaughtUp", (
                f"controller {e.node} {what} broker {key[0]} (broker epoch {key[1]}) unfenced on a heartbeat "
                f"at metadata offset {e['metadata_offset']}, below its registration at offset {key[1]}, and no "
                "heartbeat of that registration had shown it caught up"), [e]))


def _check_live_session_fences(journals: Journals, vs: list[Violation], session_timeout_ms: float) -> None:
    """FencedWithLiveSession (decisions and fences that journal the controller's clock, `at_ms`). A
    heartbeat's decision is journalled when its answer goes out (after commit), so it may come after
    a fence in the journal: the accepted heartbeats of a process life are gathered first."""
    for entries in journals.by_node.values():
        for life in cut_at(entries, ("start",)):
            beats: dict[tuple[int, int], list[int]] = {}
            for e in life:
                if _ok(e, "BrokerHeartbeat") and e.get("at_ms") is not None:
                    beats.setdefault((int(e["broker"]), int(e["broker_epoch"])), []).append(int(e["at_ms"]))
            for e in life:
                if e.ev != "fence" or e.get("action") != "fence" or e.get("reason") != "session timeout" \
                        or e.get("at_ms") is None:
                    continue
                at = int(e["at_ms"])
                before = [h for h in beats.get((int(e["broker"]), int(e["epoch"])), []) if h <= at]
                if before and at - max(before) < session_timeout_ms:
                    vs.append(Violation("FencedWithLiveSession", (
                        f"controller {e.node} fenced broker {e['broker']} (broker epoch {e['epoch']}) for session "
                        f"timeout {at - max(before)} ms after accepting its heartbeat, by its own clock — the "
                        f"session is {session_timeout_ms:.0f} ms: a broker that heartbeats in time keeps its lease"),
                        [e]))


def _check_live_session_registrations(journals: Journals, vs: list[Violation], session_timeout_ms: float) -> None:
    """RegisteredOverLiveSession (decisions that journal the controller's clock, `at_ms`). Judged per
    term of activity: a controller's successful decisions are journalled before the `role` event that
    ends its leadership (a held request is failed then), so the role events cut the journal into terms,
    each with its own leases; within a term, events are put in the order they were decided (a decision
    is journalled when answered, after commit)."""
    for entries in journals.by_node.values():
        for term in cut_at(entries, ("start", "role")):
            timed = sorted((int(e["at_ms"]), i, e) for i, e in enumerate(term)
                           if e.get("at_ms") is not None and (e.ev == "decision" or e.ev == "fence"))
            current: dict[int, tuple[str, int]] = {}  # broker -> (incarnation, epoch) registered here
            beat: dict[tuple[int, int], int] = {}  # (broker, epoch) -> last accepted heartbeat (ms)
            for at, _, e in timed:
                b = int(e["broker"])
                if _ok(e, "BrokerRegistration"):
                    held = current.get(b)
                    last = beat.get((b, held[1])) if held is not None else None
                    if held is not None and held[0] != e.get("incarnation") and last is not None \
                            and at - last < session_timeout_ms:
                        vs.append(Violation("RegisteredOverLiveSession", (
                            f"controller {e.node} registered a new incarnation of broker {b} "
                            f"({str(e.get('incarnation'))[:8]}) {at - last} ms after accepting a heartbeat of "
                            f"incarnation {held[0][:8]} (broker epoch {held[1]}), by its own clock — the session "
                            f"is {session_timeout_ms:.0f} ms: Kafka answers DUPLICATE_BROKER_REGISTRATION"), [e]))
                    current[b] = (str(e.get("incarnation")), int(e["broker_epoch"]))
                elif _ok(e, "BrokerHeartbeat"):
                    beat[(b, int(e["broker_epoch"]))] = at
                elif _ok(e, "UnregisterBroker") or (e.ev == "fence" and e.get("action") == "shutdown"):
                    current.pop(b, None)


def _check_self_fencing(journals: Journals, vs: list[Violation], slack_ms: float) -> None:
    for nid, entries in journals.by_node.items():
        serving = self_fenced = False
        last_ok: Entry | None = None
        late: Entry | None = None  # a first failure sample past the limit
        for e in entries:
            if e.ev == "start":
                serving = self_fenced = False
                last_ok = late = None
            elif e.ev == "broker_state" and int(e.get("broker", nid)) == nid:
                state = e.get("state")
                if state in ("FENCED_SELF", "UNFENCED_SELF"):
                    self_fenced = state == "FENCED_SELF"
                else:
                    serving = state in SERVING
            elif e.ev == "heartbeat" and e.get("ok"):
                last_ok, late = e, None
            elif e.ev == "heartbeat" and last_ok is not None and serving and not self_fenced:
                limit = float(e["self_fence_ms"]) + slack_ms
                silent = (e.mono - last_ok.mono) / 1e6
                if silent <= limit:
                    continue
                if late is None:
                    late = e
                    continue
                vs.append(Violation("SelfFencing",
                                    f"broker {nid} kept serving (RUNNING, not FENCED_SELF) {silent:.0f} ms after its "
                                    f"last successful heartbeat (self-fence timeout {e['self_fence_ms']} ms + slack "
                                    f"{slack_ms:g} ms)", [last_ok, late, e]))
                last_ok = late = None  # once per silence


def _check_metadata(journals: Journals, vs: list[Violation]) -> dict[str, Any]:
    commit_ts: dict[int, float] = {}
    for entries in journals.by_node.values():
        leading = False
        prev_hw = 0
        for e in entries:
            if e.ev == "role":
                leading = e.get("role") == "leader"
            elif e.ev == "start":
                leading, prev_hw = False, 0
            elif e.ev == "hw" and leading:
                for o in range(prev_hw, int(e["hw"])):
                    commit_ts.setdefault(o, e.ts)
                prev_hw = max(prev_hw, int(e["hw"]))
    lags: list[float] = []
    behind: dict[int, int] = {}
    end = max(commit_ts) + 1 if commit_ts else 0
    for nid, entries in journals.by_node.items():
        last: Entry | None = None
        for e in entries:
            if e.ev == "start":
                last = None
            elif e.ev == "snapshot" and e.get("action") in ("load", "fetch"):
                last = e  # a snapshot moves the view to its offset
            elif e.ev == "apply":
                o = int(e["offset"])
                prev_off = int(last["offset"]) if last is not None and last.ev == "apply" else (
                    int(last["offset"]) - 1 if last is not None else -1)
                if o <= prev_off:
                    vs.append(Violation("MetadataGoesBack", f"node {nid} applied offset {o} after {prev_off}",
                                        [x for x in (last, e) if x is not None]))
                last = e
                if o in commit_ts:
                    lags.append(max(0.0, e.ts - commit_ts[o]))
        applied = [int(e["offset"]) for e in entries if e.ev == "apply"]
        if applied:
            behind[nid] = max(0, end - 1 - max(applied))
    stats: dict[str, Any] = {"offsets_behind_at_end": behind}
    if lags:
        lags.sort()
        stats["apply_lag_ms"] = {"median": statistics.median(lags), "p99": lags[int(0.99 * (len(lags) - 1))],
                                 "max": lags[-1], "samples": len(lags)}
    return stats


def _check_acked(history: History, vs: list[Violation]) -> None:
    ops = pair_ops(history)
    # the topics workload's lists only: other workloads list other things (the acl workload its ACLs)
    reads = [o for o in ops if o.status == "ok" and o.f == "list" and isinstance(o.output, dict)
             and "topics" in o.output]
    if reads:
        final = reads[-1]
        listed = set(final.output["topics"])
        deleted = {o.value.get("topic") for o in ops if o.f == "delete" and isinstance(o.value, dict)}
        for o in ops:
            if o.f == "create" and o.status == "ok" and o.ret is not None and o.ret < final.call \
                    and isinstance(o.value, dict) and "topic" in o.value:
                t = o.value["topic"]
                if t not in listed and t not in deleted:
                    vs.append(Violation("AckedLost", f"topic {t} was created ({o.label(op_words.topics)}, history line "
                                                     f"{o.ret_line}) but the final list (line {final.ret_line}) "
                                                     "lacks it and nobody deleted it"))
    reads = [o for o in ops if o.status == "ok" and o.f == "read" and isinstance(o.output, dict)
             and "brokers" in o.output]
    if reads:
        final = reads[-1]
        present = {int(b) for b in final.output["brokers"]}
        gone = {int(o.value["broker"]) for o in ops if o.f == "unregister"}
        for o in ops:
            if o.f == "register" and o.status == "ok" and o.ret is not None and o.ret < final.call:
                b = int(o.value["broker"])
                if b not in present and b not in gone:
                    said = o.label(op_words.registry)
                    vs.append(Violation("AckedLost", f"broker {b}'s registration ({said}, history line "
                                                     f"{o.ret_line}) is missing from the final read "
                                                     f"(line {final.ret_line}) and nobody unregistered it"))


def check_fencing(journals: Journals, history: History | None = None, session_timeout_ms: float = 9000.0,
                  slack_ms: float = SLACK_MS) -> dict[str, Any]:
    """Check the invariants above; the history part runs only when a history is given."""
    vs: list[Violation] = []
    _check_epochs(journals, vs)
    _check_sessions(journals, vs, session_timeout_ms, slack_ms)
    _check_partitions(journals, vs)
    _check_applied_fences(journals, vs)
    _check_reregistration(journals, vs)
    _check_self_fencing(journals, vs, slack_ms)
    _check_caught_up(journals, vs)
    _check_live_session_fences(journals, vs, session_timeout_ms)
    _check_live_session_registrations(journals, vs, session_timeout_ms)
    controller_journal.check_fields(journals, vs)
    controller_journal.check_broker_states(journals, vs)
    controller_journal.check_leases(journals, vs, session_timeout_ms)
    controller_journal.check_fence_alternation(journals, vs)
    controller_journal.check_decisions_from_leader(journals, vs)
    stats = _check_metadata(journals, vs)
    if history is not None:
        _check_acked(history, vs)
    stats["session_timeout_ms"], stats["slack_ms"] = session_timeout_ms, slack_ms
    return result(vs, INVARIANTS if history is not None else INVARIANTS[:-1], None, stats)
