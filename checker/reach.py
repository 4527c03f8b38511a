"""Rule reach: how often a run put the node in the position to break each controller and broker
rule (the `rules` part of results.json's `coverage`; docs/contracts.md, "Coverage", and
docs/power.md).

A rule the checkers judge says nothing about a run that never gave the node the chance to break it:
a controller that would let a fenced broker into an ISR is only caught by a run in which someone
asked it to. Reach counts those chances — opportunities — per rule, with the state each request
met taken from the committed metadata log, decoded and replayed by the checker (`ImageModel`), not
from the controller's answer. What was asked comes from the controller's `decision` events (the
request's fields: broker epochs, requested ISR and epochs, incarnation, metadata offset); the state
it was decided on is the replay up to the decision's `offset` (a decision is taken on the
controller's image holding every record up to it), or, for a decision that wrote records, the
replay before its own first record.

Opportunities, per rule (`RULES`), with a breakdown (`how`) by kind:
- IsrJoinersEligible: an AlterPartition from the partition's leader at its current leader and
  partition epochs whose ISR adds a broker that is unregistered, fenced, in controlled shutdown
  or named with another broker epoch than its registration's — counted, by that kind, only where
  exactly one joiner is ineligible for exactly one of these reasons: a controller that skipped that
  one check would admit it, while a joiner both fenced and named with an old epoch is refused by
  either check (one at stale epochs or from a non-leader is refused before its members are looked
  at, and is not counted).
- EpochsGoBack: an AlterPartition at a stale partition epoch or leader epoch.
- LeaderOutsideIsr: an AlterPartition from a broker that is not the leader, or whose ISR leaves
  the leader out.
- IsrWithinReplicas: an AlterPartition whose ISR names a non-replica or a broker twice.
- LeaderFromIsr: a committed partition leader election while a replica outside the ISR (and the
  last known ELR) was eligible — an unclean candidate was available.
- LeaderEligible: a committed election while some replica was ineligible.
- FencedLeavesIsr, NoIneligibleLeader: a committed fence, controlled shutdown or unregistration of
  a broker that held an ISR place / led a partition since its last registration change.
- StaleEpochAccepted: a heartbeat naming a broker epoch older than the broker's registration.
- UnfencedBeforeCaughtUp: a heartbeat of the current registration of a fenced broker reporting a
  metadata offset short of its registration's offset.
- ShutDownWhileLeading: a heartbeat asking to shut down from a broker that leads a partition.
- SessionNotFenced: a silence long enough for the rule to be judged — longer than the session
  timeout plus the checker's slack and confirmation — of a broker an active controller had
  accepted heartbeats from: between two of its accepted heartbeats, or from the last one to the
  end of that controller's term (on its own clock).
- RegisteredOverLiveSession: a registration of another incarnation while the registered one's last
  accepted heartbeat (same controller, same term, its own clock) is within the session timeout and
  it is not shutting down.
- ZombieRegistered: a registration of an incarnation a newer registration had replaced.
- EpochBumpedForSameIncarnation: a registration retried by the registered incarnation.
- TopicNameUnique: a CreateTopics of a name that exists.
- RemovesLiveTopic: a DeleteTopics of a name that does not exist.

A rule with no opportunity in a run is listed in `not_reached`; one whose inputs the journals lack
(journals from before the request fields were journalled) in `unknown`.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraftlab.checker.fencing import CONFIRM_MS, SLACK_MS
from kraftlab.checker.journal import Entry, Journals, cut_at
from kraftlab.checker.metadata.check import committed_log
from kraftlab.checker.metadata.decode import NO_LEADER_CHANGE, DecodeError, decode
from kraftlab.checker.metadata.model import NO_LEADER, ImageModel

RULES: dict[str, str] = {
    "IsrJoinersEligible": "AlterPartitions at the current epochs adding an ineligible broker to the ISR",
    "EpochsGoBack": "AlterPartitions at a stale partition or leader epoch",
    "LeaderOutsideIsr": "AlterPartitions from a non-leader, or leaving the leader out of the ISR",
    "IsrWithinReplicas": "AlterPartitions naming a non-replica or a broker twice",
    "LeaderFromIsr": "partition elections while an eligible replica was outside the ISR",
    "LeaderEligible": "partition elections while a replica was ineligible",
    "FencedLeavesIsr": "fences/shutdowns/unregistrations of a broker holding ISR places",
    "NoIneligibleLeader": "fences/shutdowns/unregistrations of a broker leading partitions",
    "StaleEpochAccepted": "heartbeats of an old broker epoch",
    "UnfencedBeforeCaughtUp": "heartbeats of a fenced broker short of its registration offset",
    "ShutDownWhileLeading": "heartbeats asking to shut down from a partition leader",
    "SessionNotFenced": "silences of a heartbeating broker past the session, slack and confirmation",
    "RegisteredOverLiveSession": "registrations of another incarnation while the old session lives",
    "ZombieRegistered": "registrations of a replaced incarnation",
    "EpochBumpedForSameIncarnation": "registrations retried by the registered incarnation",
    "TopicNameUnique": "CreateTopics of an existing name",
    "RemovesLiveTopic": "DeleteTopics of a missing name",
}
"""Each counted rule and what counts as one opportunity to break it."""

BROKER_RECORDS = ("RegisterBrokerRecord", "UnregisterBrokerRecord", "FenceBrokerRecord", "UnfenceBrokerRecord",
                  "BrokerRegistrationChangeRecord")


@dataclass(frozen=True, slots=True)
class BrokerView:
    """A broker's registration as the replay has it after some offset."""

    epoch: int
    incarnation: str
    fenced: bool
    shutting_down: bool
    retired: frozenset[str]

    @property
    def eligible(self) -> bool:
        return not self.fenced and not self.shutting_down


@dataclass(frozen=True, slots=True)
class PartView:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


class Timeline:
    """Values keyed by the offset of the record that set them; `before(o)` is the value the records
    below `o` left (None: never set, or removed)."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.values: list[Any] = []

    def set(self, offset: int, value: Any) -> None:
        if self.offsets and self.offsets[-1] == offset:
            self.values[-1] = value
        else:
            self.offsets.append(offset)
            self.values.append(value)

    def before(self, offset: int) -> Any:
        i = bisect.bisect_left(self.offsets, offset)
        return self.values[i - 1] if i else None

    def last_at_or_below(self, offset: int) -> int | None:
        """The offset of the last change at or below `offset`."""
        i = bisect.bisect_right(self.offsets, offset)
        return self.offsets[i - 1] if i else None


class Replay:
    """The committed log replayed once, with each broker's, partition's and topic name's history,
    and the opportunities the records themselves offer (elections, fences)."""

    def __init__(self, journals: Journals, counts: dict[str, Counter[str]]) -> None:
        self.brokers: dict[int, Timeline] = defaultdict(Timeline)
        self.parts: dict[tuple[str, int], Timeline] = defaultdict(Timeline)
        self.topics: dict[str, Timeline] = defaultdict(Timeline)
        self.batch_start: dict[int, int] = {}
        log, _ = committed_log(journals, [])
        self._batches(journals)
        model = ImageModel()
        held_isr: set[int] = set()  # brokers that held an ISR place since their last broker record
        led: set[int] = set()
        for off in sorted(log):
            try:
                rec = decode(log[off][0])
            except DecodeError:
                break  # the metadata checker reports it; nothing after it is judged
            f = rec.fields
            if rec.type == "PartitionChangeRecord":
                key = (f["topic_id"], f["partition_id"])
                p = model.partitions.get(key)
                if p is not None and f["leader"] not in (NO_LEADER_CHANGE, p.leader):
                    self._election(model, p.replicas, p.isr, p.elr, counts)
            if rec.type in ("FenceBrokerRecord", "UnregisterBrokerRecord", "BrokerRegistrationChangeRecord"):
                self._leaving(rec.type, f, held_isr, led, counts)
            removed = model.topic_names.get(f["topic_id"]) if rec.type == "RemoveTopicRecord" else None
            model.apply(rec, off)
            if rec.type in BROKER_RECORDS:
                bid = f["broker_id"]
                held_isr.discard(bid)
                led.discard(bid)
                b = model.brokers.get(bid)
                self.brokers[bid].set(off, None if b is None else BrokerView(
                    b.epoch, str(b.incarnation), b.fenced, b.in_controlled_shutdown,
                    frozenset(str(i) for i in model.retired.get(bid, ()))))
            elif rec.type in ("PartitionRecord", "PartitionChangeRecord"):
                p = model.partitions.get((f["topic_id"], f["partition_id"]))
                name = model.topic_names.get(f["topic_id"])
                if p is not None and name is not None:
                    held_isr.update(p.isr)
                    if p.leader != NO_LEADER:
                        led.add(p.leader)
                    self.parts[(name, f["partition_id"])].set(off, PartView(
                        tuple(p.replicas), tuple(p.isr), tuple(p.elr), p.leader, p.leader_epoch, p.partition_epoch))
            elif rec.type == "TopicRecord":
                self.topics[f["name"]].set(off, True)
            elif removed is not None:
                self.topics[removed].set(off, False)
                for (name, _), tl in self.parts.items():
                    if name == removed:
                        tl.set(off, None)

    @staticmethod
    def _leaving(kind: str, f: dict[str, Any], held_isr: set[int], led: set[int],
                 counts: dict[str, Counter[str]]) -> None:
        """A fence, controlled shutdown or unregistration of a broker that held ISR places or led."""
        if kind == "BrokerRegistrationChangeRecord":
            if f["fenced"] != 1 and f.get("in_controlled_shutdown") != 1:
                return
            kind = "fence" if f["fenced"] == 1 else "controlled_shutdown"
        else:
            kind = "fence" if kind == "FenceBrokerRecord" else "unregistration"
        if f["broker_id"] in held_isr:
            counts["FencedLeavesIsr"][kind] += 1
        if f["broker_id"] in led:
            counts["NoIneligibleLeader"][kind] += 1

    def _batches(self, journals: Journals) -> None:
        """Offset → the first offset of its batch (from the `apply` events' `batch_end`)."""
        groups: dict[int, list[int]] = defaultdict(list)
        for e in journals.all():
            if e.ev == "apply" and e.get("batch_end") is not None:
                groups[int(e["batch_end"])].append(int(e["offset"]))
        for offsets in groups.values():
            start = min(offsets)
            for o in offsets:
                self.batch_start.setdefault(o, start)

    def _election(self, model: ImageModel, replicas: list[int], isr: list[int], elr: list[int],
                  counts: dict[str, Counter[str]]) -> None:
        def eligible(b: int) -> bool:
            br = model.brokers.get(b)
            return br is not None and br.eligible

        if any(eligible(r) for r in replicas if r not in isr and r not in elr):
            counts["LeaderFromIsr"]["eligible_replica_outside_isr"] += 1
        if any(not eligible(r) for r in replicas):
            counts["LeaderEligible"]["ineligible_replica"] += 1

    def broker(self, bid: int, before: int) -> BrokerView | None:
        tl = self.brokers.get(bid)
        return tl.before(before) if tl is not None else None

    def part(self, topic: str, pid: int, before: int) -> PartView | None:
        tl = self.parts.get((topic, pid))
        return tl.before(before) if tl is not None else None

    def before(self, e: Entry, timeline: Timeline | None, wrote: bool) -> int:
        """The exclusive end of the state decision `e` was taken on: every record up to its
        `offset`, or — when it wrote a record on `timeline` — those before that record (the last
        change there at or below its offset, within its offset's batch)."""
        off = int(e["offset"])
        if wrote and timeline is not None:
            own = timeline.last_at_or_below(off)
            start = self.batch_start.get(off)
            if own is not None and start is not None and own >= start:
                return own
        return off + 1

    def leads_any(self, bid: int, before: int) -> bool:
        return any(getattr(tl.before(before), "leader", None) == bid for tl in self.parts.values())

    def topic_exists(self, name: str, before: int) -> bool:
        tl = self.topics.get(name)
        return bool(tl.before(before)) if tl is not None else False


def _why_ineligible(b: BrokerView | None, asked_epoch: int) -> set[str]:
    """Every reason the controller must refuse `b` as an ISR joiner named with `asked_epoch`."""
    if b is None:
        return {"unregistered"}
    why = set()
    if b.fenced:
        why.add("fenced")
    if b.shutting_down:
        why.add("controlled_shutdown")
    if asked_epoch not in (-1, b.epoch):
        why.add("other_broker_epoch")
    return why


def _alter(e: Entry, replay: Replay, counts: dict[str, Counter[str]], unknown: set[str]) -> None:
    topic, pid = str(e.get("topic")), int(e.get("partition", 0))
    before = replay.before(e, replay.parts.get((topic, pid)), bool(e.get("changed")))
    p = replay.part(topic, pid, before)
    if p is None or e.get("requested_isr") is None:
        return
    if e.get("requested_partition_epoch") is None:
        unknown.update(("EpochsGoBack", "IsrJoinersEligible", "LeaderOutsideIsr", "IsrWithinReplicas"))
        return
    asked = [int(b) for b in e["requested_isr"]]
    sender = int(e["broker"])
    le, pe = int(e["requested_leader_epoch"]), int(e["requested_partition_epoch"])
    if pe < p.partition_epoch:
        counts["EpochsGoBack"]["stale_partition_epoch"] += 1
    elif le < p.leader_epoch:
        counts["EpochsGoBack"]["stale_leader_epoch"] += 1
    if sender != p.leader:
        counts["LeaderOutsideIsr"]["not_leader"] += 1
    elif sender not in asked:
        counts["LeaderOutsideIsr"]["leader_not_in_isr"] += 1
    if len(set(asked)) != len(asked) or not set(asked) <= set(p.replicas):
        counts["IsrWithinReplicas"]["outside_replicas_or_twice"] += 1
    epochs = [int(x) for x in e.get("requested_broker_epochs") or [-1] * len(asked)]
    if sender != p.leader or le != p.leader_epoch or pe != p.partition_epoch:
        return  # refused before any member is looked at: no chance to admit an ineligible one
    joining = [(b, ep) for b, ep in zip(asked, epochs, strict=False) if b not in p.isr]
    refusals = [why for b, ep in joining if (why := _why_ineligible(replay.broker(b, before), ep))]
    if len(refusals) == 1 and len(refusals[0]) == 1:  # one check alone stands between it and the ISR
        counts["IsrJoinersEligible"][next(iter(refusals[0]))] += 1


def _heartbeat(e: Entry, replay: Replay, counts: dict[str, Counter[str]], unknown: set[str]) -> None:
    bid, asked = int(e["broker"]), int(e.get("broker_epoch", -1))
    b = replay.broker(bid, int(e["offset"]) + 1)  # a heartbeat never changes a broker's epoch
    if b is not None and asked < b.epoch:
        counts["StaleEpochAccepted"]["older_epoch"] += 1
        return
    if b is None or asked != b.epoch:
        return
    before = replay.before(e, replay.brokers.get(bid), e.get("error") == "NONE")
    b = replay.broker(bid, before)
    if b is None:
        return
    offset = e.get("metadata_offset")
    if b.fenced and offset is not None and int(offset) < b.epoch:
        counts["UnfencedBeforeCaughtUp"]["short_of_registration"] += 1
    if e.get("want_shut_down") is None:
        unknown.add("ShutDownWhileLeading")
    elif e["want_shut_down"] and replay.leads_any(bid, before):
        counts["ShutDownWhileLeading"]["leader_asks_to_shut_down"] += 1


def _registered(e: Entry, replay: Replay) -> BrokerView | None:
    """The registration a BrokerRegistration decision met."""
    bid = int(e["broker"])
    return replay.broker(bid, replay.before(e, replay.brokers.get(bid), e.get("error") == "NONE"))


def _registration(e: Entry, replay: Replay, counts: dict[str, Counter[str]]) -> None:
    b, inc = _registered(e, replay), str(e.get("incarnation"))
    if b is None:
        return
    if inc in b.retired:
        counts["ZombieRegistered"]["replaced_incarnation"] += 1
    elif inc == b.incarnation:
        counts["EpochBumpedForSameIncarnation"]["retry"] += 1


def _topic(e: Entry, replay: Replay, counts: dict[str, Counter[str]]) -> None:
    name = str(e["topic"])
    exists = replay.topic_exists(name, replay.before(e, replay.topics.get(name), e.get("error") == "NONE"))
    if e.get("api") == "CreateTopics" and exists:
        counts["TopicNameUnique"]["existing_name"] += 1
    elif e.get("api") == "DeleteTopics" and not exists:
        counts["RemovesLiveTopic"]["missing_name"] += 1


def _sessions(journals: Journals, replay: Replay, counts: dict[str, Counter[str]], session_timeout_ms: float) -> None:
    """The rules read on a controller's own clock, per term of activity (`start` and `role` events
    cut a journal into terms; within one, decisions in the order they were decided, by `at_ms`)."""
    for entries in journals.by_node.values():
        for term in cut_at(entries, ("start", "role")):
            timed = sorted((int(e["at_ms"]), i, e) for i, e in enumerate(term)
                           if e.ev == "decision" and e.get("at_ms") is not None and e.get("broker") is not None
                           and e.get("offset") is not None)
            beat: dict[int, tuple[int, int, int]] = {}  # broker -> (epoch, last accepted heartbeat ms, its offset)
            judged_ms = session_timeout_ms + SLACK_MS + CONFIRM_MS
            for at, _, e in timed:
                bid = int(e["broker"])
                if e.get("api") == "BrokerHeartbeat" and e.get("error") == "NONE":
                    last = beat.get(bid)
                    epoch = int(e["broker_epoch"])
                    if last is not None and last[0] == epoch and at - last[1] > judged_ms:
                        counts["SessionNotFenced"]["silence"] += 1
                    beat[bid] = (epoch, at, int(e["offset"]))
                elif e.get("api") == "BrokerRegistration":
                    b, last = _registered(e, replay), beat.get(bid)
                    if b is not None and str(e.get("incarnation")) != b.incarnation and not b.shutting_down \
                            and last is not None and last[0] == b.epoch and at - last[1] < session_timeout_ms:
                        counts["RegisteredOverLiveSession"]["live_session"] += 1
                elif e.get("api") == "UnregisterBroker" and e.get("error") == "NONE":
                    beat.pop(bid, None)
            # a broker gone silent until the term ended: the controller stayed active long enough
            # after its last heartbeat to have to fence it (a killed or stalled broker)
            end = max((int(e["at_ms"]) for e in term if e.get("at_ms") is not None), default=None)
            if end is not None:
                counts["SessionNotFenced"]["silent_until_the_term_ended"] += sum(
                    end - at > judged_ms and _unfenced(replay.broker(bid, off + 1), epoch)
                    for bid, (epoch, at, off) in beat.items())


def _unfenced(b: BrokerView | None, epoch: int) -> bool:
    return b is not None and b.epoch == epoch and not b.fenced


def _decisions(journals: Journals) -> Iterable[Entry]:
    """Decisions taken on a known state (a write that lost leadership has no `offset`)."""
    for e in journals.all():
        if e.ev == "decision" and e.get("offset") is not None and e.get("error") != "NOT_CONTROLLER":
            yield e


def rule_reach(journals: Journals, session_timeout_ms: float = 9000.0) -> dict[str, Any]:
    """Opportunities per rule (see the module docstring): `rules` (rule → count), `how` (rule →
    kind → count), `not_reached` and `unknown` (rule names)."""
    counts: dict[str, Counter[str]] = {rule: Counter() for rule in RULES}
    unknown: set[str] = set()
    replay = Replay(journals, counts)
    for e in _decisions(journals):
        api = e.get("api")
        if api == "AlterPartition" and e.get("broker") is not None:
            _alter(e, replay, counts, unknown)
        elif api == "BrokerHeartbeat" and e.get("broker") is not None:
            _heartbeat(e, replay, counts, unknown)
        elif api == "BrokerRegistration" and e.get("broker") is not None:
            _registration(e, replay, counts)
        elif api in ("CreateTopics", "DeleteTopics") and e.get("topic") is not None:
            _topic(e, replay, counts)
    _sessions(journals, replay, counts, session_timeout_ms)
    rules = {rule: sum(c.values()) for rule, c in counts.items()}
    blind = {r for r in unknown if rules[r] == 0}
    return {"rules": rules, "how": {rule: dict(sorted(c.items())) for rule, c in counts.items() if c},
            "not_reached": sorted(r for r, n in rules.items() if n == 0 and r not in blind),
            "unknown": sorted(blind)}
