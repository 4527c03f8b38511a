"""What brokers answered during the run, judged against the committed metadata log: the reads the
linearizability checkers leave out (`checker.judged`: a broker serves metadata from its own image,
which in Kafka is only eventually consistent) are still bound by what Kafka does promise.

- BrokerReadCommitted: every topics `describe`/`list`, isr `read`, acl `describe`/`list` and registry
  `read` a broker answered shows the
  state of some committed prefix of the metadata log — a topic's existence and partition count, a
  partition's leader, leader epoch, ISR and replicas. A broker's image is the committed records
  applied in order, so an answer no prefix ever had (an uncommitted record served, a record applied
  wrongly, an answer built wrongly from the image) is made up.
- MonotonicBrokerReads: within one broker process life, a read that began after another read of the
  same broker had been answered shows a prefix no shorter (a broker's image only moves forward; it is
  the broker's, not the client's, so two clients reading one broker must agree on its order).
- ReadYourWrites: a topic created (or deleted) through a broker is visible in that broker's image
  when the broker acknowledges it — the node waits for its own image before relaying the
  controller's answer (`node.broker.apis`, bounded by its visibility wait) — so a later read of the
  same broker in the same life shows it, as does the read-back the topics workload sends at once
  after half of its writes (Metadata for the topic on that broker, as Kafka's tools do after a
  create: it must show the created topic id, or no longer the deleted one). Judged only
  for writes acknowledged well within the wait (`RYW_JUDGED_MS`), where the bound cannot have run
  out even on a node whose clock the nemesis runs fast — and not for a write during which the
  nemesis stepped that broker's clock (`clock-bump`, `clock-reset`, or a `clock-strobe` under way):
  a clock stepped forward ends the broker's wait at once, and the broker then relays the answer
  without its image, as it is meant to.

How: the committed log (every node's `apply` events, as `checker.metadata` rebuilds it) is replayed
into `checker.metadata.model.ImageModel`; each key a read can name keeps the offsets at which its
state changed. A read's answer gives the set of offsets whose prefix shows it (a union of
intervals); per broker, reads are taken in invocation order and each is given the smallest offset
it allows at or above every offset already given to a read of that broker that was answered before
it began (a greedy choice that is optimal for constraints of this shape). A read with no offset
left breaks MonotonicBrokerReads (BrokerReadCommitted when it had none at all). A broker's life
ends at any nemesis operation that could restart it (the history names the node, or names none);
the final reads, taken after recovery (which may restart nodes unrecorded), start a life of their
own. Where the replay stops early (a gap or disagreement `checker.metadata` reports), every offset
past the stop is allowed.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.acl_model import BINDING, PATTERN
from kraftlab.checker.acl_names import binding_of_record
from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Journals
from kraftlab.checker.metadata.check import committed_records
from kraftlab.checker.metadata.model import ImageModel

INVARIANTS = ["BrokerReadCommitted", "MonotonicBrokerReads", "ReadYourWrites"]
RYW_JUDGED_MS = 500.0
"""A forwarded write answered this fast was answered because the broker's image showed it: the node's
visibility wait is 2 s of its own clock, and the clock nemesis runs a node's clock at most a few
times fast."""
STEADY_NEMESIS = frozenset({"start-partition", "stop-partition", "clock-bump", "clock-rate", "clock-strobe",
                            "clock-reset", "start-packet", "stop-packet", "pause", "resume", "start-pause",
                            "stop-pause"})
"""Nemesis operations that never restart a node: a broker's life goes on through them."""
INF = 1 << 62

Interval = tuple[int, int]  # [a, b): the images whose last applied record is at an offset in a..b-1
Pattern = tuple[str, str, str]  # an ACL resource pattern: resource type, name, pattern type
BROKER_RECORDS = frozenset({"RegisterBrokerRecord", "UnregisterBrokerRecord", "FenceBrokerRecord",
                            "UnfenceBrokerRecord", "BrokerRegistrationChangeRecord"})


@dataclass
class Timeline:
    """One key's states over the committed log: state i holds from starts[i] (the offset of the
    record that made it; -1 for the empty log) until the next start."""

    starts: list[int] = field(default_factory=lambda: [-1])
    states: list[Any] = field(default_factory=lambda: [None])

    def note(self, offset: int, state: Any) -> None:
        if state != self.states[-1]:
            self.starts.append(offset)
            self.states.append(state)

    def where(self, match: Any, end: int) -> list[Interval]:
        """The offsets whose prefix shows a state `match` accepts; past `end` (a replay that stopped
        early) anything goes."""
        out: list[Interval] = []
        for i, state in enumerate(self.states):
            if match(state):
                hi = self.starts[i + 1] if i + 1 < len(self.starts) else INF
                out.append((self.starts[i], hi))
        return _union(out + ([(end, INF)] if end < INF else []))


def _union(xs: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(xs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(xs: list[Interval], ys: list[Interval]) -> list[Interval]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def _first_at_or_above(xs: list[Interval], lb: int) -> int | None:
    for a, b in xs:
        if b > lb:
            return max(a, lb)
    return None


@dataclass
class CommittedStates:
    """Per topic name: (exists, partition count); per (topic name, partition): what Metadata shows
    of it; per ACL resource pattern: its bindings, in Kafka's names; the unfenced brokers — from the
    committed log, replayed."""

    topics: dict[str, Timeline] = field(default_factory=lambda: defaultdict(Timeline))
    partitions: dict[tuple[str, int], Timeline] = field(default_factory=lambda: defaultdict(Timeline))
    end: int = INF
    """The offset past which the replay could not go (INF: the whole log was replayed)."""
    written: dict[tuple[str, str], int] = field(default_factory=dict)
    """(TopicRecord | RemoveTopicRecord, topic id) → the offset of that record."""
    ids: dict[str, Timeline] = field(default_factory=lambda: defaultdict(Timeline))
    """Per topic name: its topic id (None while no topic has the name)."""
    acls: dict[Pattern, Timeline] = field(default_factory=lambda: defaultdict(Timeline))
    unfenced: Timeline = field(default_factory=Timeline)

    @classmethod
    def replay(cls, journals: Journals, notes: list[str]) -> CommittedStates:
        out = cls()
        model = ImageModel()
        log = committed_records(journals, notes)
        for off in sorted(log.records):
            rec = log.records[off][0]
            tid = rec.fields.get("topic_id")
            touched = rec.fields["name"] if rec.type == "TopicRecord" else model.topic_names.get(tid) if tid else None
            acl = rec.fields.get("id") if rec.type == "RemoveAccessControlEntryRecord" else None
            pattern = _pattern(model.acls[acl]) if acl in model.acls else None
            model.apply(rec, off)
            if rec.type == "AccessControlEntryRecord":
                pattern = _pattern(model.acls[rec.fields["id"]])
            if pattern is not None:
                out.acls[pattern].note(off, frozenset(b for b in map(binding_of_record, model.acls.values())
                                                      if b[:3] == pattern))
            if rec.type in BROKER_RECORDS:
                out.unfenced.note(off, frozenset(b for b, x in model.brokers.items() if not x.fenced))
            if rec.type in ("TopicRecord", "RemoveTopicRecord"):
                out.written.setdefault((rec.type, str(tid)), off)
            if touched is not None:
                out._note(model, touched, off)
        if log.stop is not None:
            out.end = log.stop[0]
        return out

    def _note(self, model: ImageModel, name: str, off: int) -> None:
        tid = model.topics.get(name)
        count = model.partition_count.get(tid, 0) if tid is not None else 0
        self.topics[name].note(off, None if tid is None else count)
        self.ids[name].note(off, tid)
        for pid in range(max(count, 1)):
            p = model.partitions.get((tid, pid)) if tid is not None else None
            self.partitions[(name, pid)].note(off, None if p is None else (
                p.leader, p.leader_epoch, tuple(sorted(p.isr)), tuple(p.replicas)))


def _pattern(stored: list[Any]) -> Pattern:
    rtype, name, ptype = binding_of_record(stored)[:3]
    return rtype, name, ptype


@dataclass
class Read:
    """One broker answer the rules judge: which broker, when, and the offsets whose prefix shows it."""

    op: Op
    broker: str
    allowed: list[Interval]
    what: str
    write: bool = False
    """A write's acknowledgement (ReadYourWrites), not a read."""
    read_back: bool = False
    """The read-back of a write acknowledged within the visibility wait (held to that write)."""
    given: int | None = None
    raised_by: Read | None = None
    """The earlier answer of the same broker whose offset `given` had to reach."""
    broken: str | None = None
    """Set when the answer alone breaks ReadYourWrites (a read-back that does not show its write)."""

    def label(self) -> str:
        """The op in Kafka's words and the fields that matter: who, what it asked, when it ended."""
        v = self.op.value
        if self.write:
            asked = f"{self.op.f} of topic {v.get('topic')}"
        elif v.get("topic") is not None:
            asked = f"{self.op.f} of topic {v['topic']}" + (f" partition {v['partition']}" if "partition" in v else "")
        elif "resource_name" in v:
            asked = f"DescribeAcls of {v.get('resource_type')}/{v['resource_name']}/{v.get('pattern_type')}"
        else:
            asked = f"{self.op.f}" + (f" ({v['api']})" if v.get("api") else "")
        end = (self.op.end or 0) / 1e9
        return f"p{self.op.process}'s {asked} (answered at {end:.3f} s)"


def _describe(states: CommittedStates, op: Op) -> tuple[list[Interval], str]:
    name, out = op.value["topic"], op.output
    want = None if not out.get("exists") else out.get("partitions")
    return states.topics[name].where(lambda s: s == want, states.end), (
        f"topic {name} {'absent' if want is None else f'with {want} partition(s)'}")


def _list(states: CommittedStates, op: Op, pool: set[str]) -> tuple[list[Interval], str]:
    shown = set(op.output.get("topics") or ())
    prefixes = tuple(op.value.get("prefixes") or ())
    names = shown | pool | {n for n in states.topics if prefixes and n.startswith(prefixes)}
    allowed = [(-1, INF)]
    for n in sorted(names):
        allowed = _intersect(allowed, states.topics[n].where(
            lambda s, listed=n in shown: (s is not None) == listed, states.end))
    return allowed, f"topics {sorted(shown)}"


def _isr_read(states: CommittedStates, op: Op) -> tuple[list[Interval], str]:
    name, pid, out = op.value["topic"], int(op.value.get("partition", 0)), op.output
    if not out.get("exists"):
        return states.topics[name].where(lambda s: s is None, states.end), f"topic {name} absent"
    if "leader" not in out:
        return states.topics[name].where(lambda s: s is not None and s <= pid, states.end), (
            f"topic {name} without partition {pid}")
    shown = (int(out["leader"]), int(out["leader_epoch"]), tuple(sorted(out["isr"])), tuple(out["replicas"]))
    return states.partitions[(name, pid)].where(lambda s: s == shown, states.end), (
        f"{name}-{pid} with leader {shown[0]}, leader epoch {shown[1]}, ISR {list(shown[2])}, "
        f"replicas {list(shown[3])}")


def _acl_read(states: CommittedStates, op: Op, named: set[Pattern]) -> tuple[list[Interval], str]:
    shown = {tuple(str(b[f]) for f in BINDING) for b in op.output.get("acls") or ()}
    if op.f == "describe":
        patterns = {(str(op.value[PATTERN[0]]), str(op.value[PATTERN[1]]), str(op.value[PATTERN[2]]))}
        what = f"ACLs of {'/'.join(next(iter(patterns)))}"
    else:
        patterns = named | {(b[0], b[1], b[2]) for b in shown}
        what = "every ACL of the workload"
    allowed = [(-1, INF)]
    for pat in sorted(patterns):
        want = frozenset(b for b in shown if b[:3] == pat)
        allowed = _intersect(allowed, states.acls[pat].where(
            lambda s, w=want: (s or frozenset()) == w, states.end))
    return allowed, f"{what}: {len(shown)} binding(s)"


def _registry_read(states: CommittedStates, op: Op) -> tuple[list[Interval], str]:
    shown = frozenset(int(b) for b in op.output.get("unfenced") or ())
    # the workload lists only its live agents: what it shows must be unfenced, not all that is
    return states.unfenced.where(lambda s: shown <= (s or frozenset()), states.end), (
        f"brokers {sorted(shown)} unfenced")


def clock_steps(history: History) -> dict[str, list[Interval]]:
    """Per node, the times (ns) over which the nemesis may have stepped its clock: each `clock-bump`
    and `clock-reset` from invocation to completion, and each `clock-strobe` from its invocation
    until a `clock-reset` of that node completes (or the history ends)."""
    out: dict[str, list[Interval]] = defaultdict(list)
    strobing: dict[str, int] = {}
    invoked: dict[str, int] = {}
    last = 0
    for e in history.events:
        last = max(last, e.time or 0)
        if e.process != "nemesis" or not str(e.f).startswith("clock-"):
            continue
        t = e.time or 0
        if e.type == "invoke":
            invoked[str(e.f)] = t
            continue
        nodes = [str(n) for n in (e.value.get("nodes") or ())] if isinstance(e.value, dict) else []
        start = invoked.pop(str(e.f), t)
        for n in nodes:
            if e.f in ("clock-bump", "clock-reset"):
                out[n].append((start, t))
            if e.f == "clock-strobe":
                strobing.setdefault(n, start)
            elif e.f == "clock-reset" and n in strobing:
                out[n].append((strobing.pop(n), t))
    for n, t0 in strobing.items():
        out[n].append((t0, last))
    return out


def _stepped(steps: Sequence[Interval], o: Op) -> bool:
    end = o.end if o.end is not None else INF
    return any(a <= end and o.start <= b for a, b in steps)


def broker_reads(ops: Sequence[tuple[str | None, Op]], states: CommittedStates,
                 steps: dict[str, list[Interval]] | None = None) -> list[Read]:
    """The answers the rules judge (each op with its workload), with the offsets each allows. A
    forwarded write during which its broker's clock was stepped (`steps`, per node) is not judged."""
    pool = {str(o.value["topic"]) for w, o in ops
            if w == "topics" and isinstance(o.value, dict) and o.value.get("topic")}
    patterns: set[Pattern] = {(str(o.value[PATTERN[0]]), str(o.value[PATTERN[1]]), str(o.value[PATTERN[2]]))
                              for w, o in ops if w == "acl" and isinstance(o.value, dict)
                              and all(f in o.value for f in PATTERN)}
    out: list[Read] = []
    for w, o in ops:
        if o.status != "ok" or not isinstance(o.value, dict) or not isinstance(o.output, dict) or o.end is None:
            continue
        node = o.value.get("node") or o.node
        if o.value.get("broker_read"):
            if (w, o.f) == ("topics", "describe"):
                allowed, what = _describe(states, o)
            elif (w, o.f) == ("topics", "list"):
                allowed, what = _list(states, o, pool)
            elif (w, o.f) == ("isr", "read"):
                allowed, what = _isr_read(states, o)
            elif w == "acl" and o.f in ("describe", "list"):
                allowed, what = _acl_read(states, o, patterns)
            elif (w, o.f) == ("registry", "read"):
                allowed, what = _registry_read(states, o)
            else:
                continue
            out.append(Read(o, str(node), allowed, what))
        elif w == "topics" and o.f in ("create", "delete") and o.value.get("via") != "controller" \
                and o.output.get("topic_id") and not _stepped((steps or {}).get(str(node), ()), o):
            out.extend(_write_reads(states, o, str(node)))
    return out


def _write_reads(states: CommittedStates, o: Op, node: str) -> list[Read]:
    """A create or delete acknowledged through broker `node`: what its acknowledgement says of the
    broker's image (when it came well within the visibility wait), and its read-back if it has one."""
    name, tid = str(o.value["topic"]), str(o.output["topic_id"])
    created, removed = states.written.get(("TopicRecord", tid)), states.written.get(("RemoveTopicRecord", tid))
    acked_ms = float(o.output.get("acked_ms", o.latency_ms or INF))
    if created is None or acked_ms >= RYW_JUDGED_MS:
        return []  # its topic's creation is not in the replayed log, or the wait may have run out
    after = removed if removed is not None else states.end
    if o.f == "create":  # the broker's image had this topic id
        held, what = [(created, INF)], f"its TopicRecord at offset {created}"
    else:  # no longer had it — or, lagging, had not had it yet
        held, what = [(-1, created)] + ([(after, INF)] if after < INF else []), (
            f"its TopicRecord at offset {created}, its RemoveTopicRecord at "
            f"{'offset ' + str(removed) if removed is not None else 'none replayed'}")
    write = Read(o, node, held, f"topic {name} {o.f}d ({what})", write=True)
    out = [write]
    back = o.output.get("read_back")
    if isinstance(back, dict):
        if back.get("exists"):
            shown, showing = states.ids[name].where(
                lambda s: s is not None and back.get("topic_id") in (None, s), states.end), (
                f"topic {name} with id {back.get('topic_id')} and {back.get('partitions')} partition(s)")
            shown = _intersect(shown, states.topics[name].where(lambda s: s == back.get("partitions"), states.end))
        else:
            shown, showing = states.ids[name].where(lambda s: s is None, states.end), f"topic {name} absent"
        both = _intersect(shown, held)
        read = Read(o, node, both or shown, f"{showing} (read back at once)", read_back=True)
        if shown and not both:
            read.broken = (
                f"broker {node} acknowledged {write.label()} {acked_ms:.0f} ms after it was asked — within its "
                f"visibility wait, so its own image held that write ({write.what}) — and, asked for the topic "
                f"at once, showed {showing}: a state only offsets {_fmt(shown)} of the committed log have. A "
                "client reading from the broker it wrote through does not see its own write")
        out.append(read)
    return out


def _restarts(history: History, nodes: Iterable[str]) -> dict[str, list[int]]:
    """Per node, the times of nemesis events that could have restarted it."""
    names = sorted(set(nodes), key=len, reverse=True)
    out: dict[str, list[int]] = defaultdict(list)
    for e in history.events:
        if e.process != "nemesis" or e.f in STEADY_NEMESIS or e.time is None:
            continue
        text = json.dumps(e.value, default=str)
        named = [n for n in names if f'"{n}"' in text]
        for n in named or names:
            out[n].append(e.time)
    for times in out.values():
        times.sort()
    return out


def judge(reads: list[Read], restarts: dict[str, list[int]]) -> list[Violation]:
    vs: list[Violation] = []
    by_broker: dict[str, list[Read]] = defaultdict(list)
    for r in reads:
        by_broker[r.broker].append(r)
    for broker, rs in by_broker.items():
        rs.sort(key=lambda r: (bool(r.op.value.get("final")), r.op.start))
        points = restarts.get(broker, [])
        done: list[Read] = []
        for r in rs:
            if r.broken is not None:
                vs.append(_violation("ReadYourWrites", r, r.broken))
            if not r.allowed:
                if not r.write:
                    vs.append(_violation("BrokerReadCommitted", r, (
                        f"broker {broker} answered {r.label()}, showing {r.what}: a state no committed prefix "
                        "of the metadata log ever had")))
                continue
            end = r.op.end or INF
            k = bisect.bisect_right(points, end)
            life_start = points[k - 1] if k else -1
            final = bool(r.op.value.get("final"))
            lb, why = -1, None
            for d in reversed(done):
                if d.op.start <= life_start or bool(d.op.value.get("final")) != final:
                    break
                if (d.op.end or INF) < r.op.start and d.given is not None and d.given > lb:
                    lb, why = d.given, d
            r.given, r.raised_by = _first_at_or_above(r.allowed, lb), why
            if r.given is None:
                assert why is not None
                vs.append(_out_of_order(broker, r, why))
            done.append(r)
    return vs


def _out_of_order(broker: str, r: Read, why: Read) -> Violation:
    """`r` allows no offset at or above those earlier answers of its broker put it at: name the first
    answer, going back along what raised the offsets, that alone already puts the broker past `r`."""
    culprit = why
    while culprit.raised_by is not None and _first_at_or_above(r.allowed, culprit.raised_by.given or -1) is None:
        culprit = culprit.raised_by
    shown = f"{r.label()}, showing {r.what} — a state only offsets {_fmt(r.allowed)} of the committed log have"
    before = "" if culprit is why else (
        f"; its answers after that needed offset {why.given} or later (last: {why.label()}, showing {why.what})")
    if culprit.write or culprit.read_back:
        seen = f", and asked for the topic at once showed {culprit.what}" if culprit.read_back else ""
        return _violation("ReadYourWrites", r, (
            f"broker {broker} acknowledged {culprit.label()} within its visibility wait, so its own image held "
            f"that write{seen} (offset {culprit.given} or later){before}; then, with no restart between, it "
            f"answered {shown}. It acknowledged a write its image did not show yet (or its image went back): a "
            "client reading from the broker it wrote through does not see its own write"), before=culprit)
    return _violation("MonotonicBrokerReads", r, (
        f"broker {broker} answered {culprit.label()}, showing {culprit.what} (offset {culprit.given} or later)"
        f"{before}; then, with no restart between, {shown}. The broker's image went back"), before=culprit)


def _fmt(xs: list[Interval]) -> str:
    return ", ".join(f"{a}–{'end' if b >= INF else b - 1}" for a, b in xs[:4]) + (" …" if len(xs) > 4 else "")


def _violation(rule: str, r: Read, text: str, before: Read | None = None) -> Violation:
    return Violation(rule, text, [], before=None if before is None else f"{before.label()}: {before.what}",
                     after=f"{r.label()}: {r.what}")


def check_broker_reads(history: History, journals: Journals) -> dict[str, Any]:
    notes: list[str] = []
    states = CommittedStates.replay(journals, notes)
    ops = [(history.events[o.call].extra.get("workload"), o) for o in pair_ops(history)]
    reads = broker_reads(ops, states, clock_steps(history))
    if not reads:
        return result([], [], {name: "no broker read or forwarded write to judge" for name in INVARIANTS})
    nodes = {r.broker for r in reads}
    vs = judge(reads, _restarts(history, nodes))
    out = result(vs, INVARIANTS, stats={"reads": sum(not r.write for r in reads),
                                        "writes": sum(r.write for r in reads),
                                        "replayed_to": None if states.end >= INF else states.end})
    if notes:
        out["notes"] = notes
    return out
