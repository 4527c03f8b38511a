"""The controllers' and brokers' journals as witnesses: every line true, nothing missing (cluster simulator).

Real runs are judged from the journals alone (`checker.fencing`, `checker.controller_journal`, the
metadata checker believe what a controller's and a broker's lines say). The Raft core's lines have
their witness rule (`node.sim.journal_truth`); this module is the same for the lines of the
metadata layer. After every step of a node in `node.sim.kraft` (everything it did between two
drains of its outputs) it compares what the node holds before and after the step with the lines the
step wrote, folded in order over the state before (`node.sim.journal_judging`):

- the committed replay (controllers and brokers): an `apply` names a record not yet applied, inside
  its batch, that the node's log holds at that offset with that CRC, type and bytes, and what it left
  (a partition's ISR and leader, a broker's fencing, a topic gone); a periodic `image` comes at the
  end of the batch just applied, and one the step ends on has the digest of the image the node holds;
  once folded, the lines leave the image the node holds — the committed offset reached, every data
  record of the log below it applied with its line, every partition's ISR and leader and every
  broker's registration and fencing that changed told;
- the active controller: a `fence` line (fence, unfence, controlled shutdown, unregistration) names a
  FenceBrokerRecord, UnfenceBrokerRecord, BrokerRegistrationChangeRecord (in controlled shutdown) or
  UnregisterBrokerRecord of that broker and epoch that the step wrote as leader at or below the line's
  offset, on the controller's clock, for a cause the step bears out (a heartbeat of that broker and
  epoch caught up to it at the line's metadata offset for an unfence, one with WantFence or
  WantShutDown, an UnregisterBroker of it, a lease that ran out), and every such record the step
  wrote has its line; a `lease` line renews the broker's lease now (expiring a session timeout
  later; at most one a journal interval per broker and term; from the active controller whose Raft
  core led its epoch when the step began) and every renewal not so sampled has
  its line; a registration's `decision` names as its epoch the offset of its RegisterBrokerRecord
  (that each answer has its decisions, telling what the request asked and the answer gave, is
  `node.sim.controller_answers`' DecisionPerAnswer);
- a broker's lifecycle: a `broker_state` line moves its state (FENCED_SELF / UNFENCED_SELF its
  self-fencing), a `heartbeat` line `ok` is an answer taken now, a `log_dir_failed` names a directory
  newly offline; once folded, the broker's state, self-fencing, offline directories and last
  accepted answer are what it holds.

ControllerJournalTrue / ControllerJournalComplete judge the controllers' lines, BrokerJournalTrue /
BrokerJournalComplete the brokers'. The Raft core's own lines (`journal_truth.JUDGES`' kinds) are
known here, not judged again (the cluster simulator judges them with `journal_truth.JournalTruth`).
"""

from __future__ import annotations

import base64
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    from_log_record,
    type_name,
)
from kraftlab.node.sim import journal_truth
from kraftlab.node.sim.journal_judging import Judge, judge_lines

if TYPE_CHECKING:
    from kraftlab.node.metadata.image import MetadataImage
    from kraftlab.node.metadata.replay import CommittedReplay
    from kraftlab.node.raft.ports import Record
    from kraftlab.node.sim.kraft import KNode
    from kraftlab.node.sim.memory import MemoryLog

Fail = Callable[[str], None]
PartitionKey = tuple[str, int]
"""(topic id, partition index), as an `apply` line names them."""


@dataclass(slots=True)
class ReplayFacts:
    """What a node's committed replay holds: the offset it reached and the parts `apply` lines tell."""

    offset: int
    brokers: dict[int, bool]
    """Registered broker → fenced."""
    partitions: dict[PartitionKey, tuple[tuple[int, ...], int]]
    """Partition → (ISR, leader)."""
    image: MetadataImage | None = None


def replay_facts(replay: CommittedReplay, before: ReplayFacts | None) -> ReplayFacts:
    """`replay`'s facts now (those of `before` when nothing was applied since: the same image, the same offset)."""
    image = replay.image
    if before is not None and before.image is image and before.offset == replay.next_offset:
        return before
    partitions = {(str(t.topic_id), pid): (tuple(p.isr), p.leader) for t, pid, p in image.partitions()}
    return ReplayFacts(replay.next_offset, {b: r.fenced for b, r in image.brokers.items()}, partitions, image)


@dataclass(slots=True)
class NodeFacts:
    """What one node holds that its metadata-layer journal tells."""

    incarnation: int
    replay: ReplayFacts
    leases: object | None = None
    """The active controller's lease table (another object: another term), None when not active."""
    leading: int | None = None
    """The epoch the node's Raft core leads (None: it does not lead)."""
    contact: dict[int, int] = field(default_factory=dict)
    state: str = "NOT_RUNNING"
    self_fenced: bool = False
    offline: frozenset[str] = frozenset()
    last_ok: int | None = None


def facts_of(node: KNode, before: NodeFacts | None) -> NodeFacts:
    ctrl, lifecycle = node.ctrl, node.lifecycle
    replay = ctrl.replay if ctrl is not None else node.broker()[1].replay
    facts = NodeFacts(node.incarnation, replay_facts(replay, None if before is None else before.replay))
    if ctrl is not None and ctrl.active:
        facts.leases, facts.contact = ctrl.leases, dict(ctrl.leases.last_contact)
    if node.raft is not None and node.raft.core.is_leader:
        facts.leading = node.raft.core.epoch
    if lifecycle is not None:
        facts.state, facts.self_fenced = lifecycle.state.name, lifecycle.self_fenced
        if lifecycle.offline_log_dirs:
            facts.offline = frozenset(str(d) for d in lifecycle.offline_log_dirs)
        facts.last_ok = lifecycle._last_ok_ms
    return facts


def fresh(node: KNode) -> NodeFacts:
    """What a new process of `node` holds before its first step: nothing applied, not active, not running."""
    return NodeFacts(node.incarnation, ReplayFacts(0, {}, {}))


class LogRecords:
    """The metadata records a node's log holds, read by offset (None: not held, or a control record)."""

    def __init__(self, log: MemoryLog) -> None:
        self.batches = log.batches()
        self.bases = [b.base_offset for b in self.batches]

    def raw(self, offset: int) -> tuple[Record, bool] | None:
        """The record at `offset` and whether its batch is a control batch."""
        i = bisect_right(self.bases, offset) - 1
        if i < 0 or offset >= self.batches[i].next_offset:
            return None
        batch = self.batches[i]
        return batch.records[offset - batch.base_offset], batch.control

    def metadata(self, offset: int) -> MetadataRecord | None:
        raw = self.raw(offset)
        return None if raw is None or raw[1] else from_log_record(raw[0])

    def data_offsets(self, start: int, end: int) -> list[int]:
        """The offsets in [start, end) of the log holding metadata records (control batches skipped)."""
        out = []
        for batch in self.batches:
            if batch.next_offset <= start or batch.base_offset >= end or batch.control:
                continue
            out += [o for o in range(max(start, batch.base_offset), min(end, batch.next_offset))
                    if from_log_record(batch.records[o - batch.base_offset]) is not None]
        return out


@dataclass(slots=True)
class Step:
    """One step of a node being judged: the fold of its lines so far and what it holds after."""

    node: KNode
    now: int
    before: NodeFacts
    after: NodeFacts
    log: LogRecords
    offset: int
    """The fold: the replay's next offset."""
    batch_end: int | None = None
    """The end of the batch the last `apply` line was in."""
    start: int = 0
    """Where this step's applies begin (the offset before the step, or that of a snapshot it loaded)."""
    whole: bool = True
    """False once the step loaded a snapshot: what no line told is not known."""
    applied: set[int] = field(default_factory=set)
    brokers: dict[int, bool] = field(default_factory=dict)
    partitions: dict[PartitionKey, tuple[tuple[int, ...], int]] = field(default_factory=dict)
    told: set[object] = field(default_factory=set)
    """The partitions and brokers (`("broker", id)`) some `apply` line told."""
    image_line: dict[str, Any] | None = None
    """The last `image` line, while no `apply` came after it."""
    written: list[tuple[int, MetadataRecord]] = field(default_factory=list)
    """The metadata records the controller appended in the step (offset, record), in order."""
    claimed: set[int] = field(default_factory=set)
    """The offsets of `written` some `fence` line named."""
    unwritten_fences: bool = False
    """A `fence` line with no offset: its write lost leadership (its records may stand unnamed)."""
    renewed: set[int] = field(default_factory=set)
    asked: list[Any] = field(default_factory=list)
    """The requests the controller decided in the step (their fence lines name them as their causes)."""
    state: str = "NOT_RUNNING"
    self_fenced: bool = False
    offline: set[str] = field(default_factory=set)
    last_ok: int | None = None


# ---- the committed replay ----------------------------------------------------------------------

def _apply(s: Step, e: dict[str, Any]) -> str | None:
    offset, end = e["offset"], e["batch_end"]
    if offset < s.offset:
        return f"an apply at {offset}, a record already applied (the image held every record below {s.offset})"
    if not offset < end:
        return f"an apply at {offset} outside its batch ending at {end}"
    if s.batch_end is not None and offset < s.batch_end and end != s.batch_end:
        return f"an apply at {offset} in a batch ending at {end}, within the batch ending at {s.batch_end}"
    raw = s.log.raw(offset)
    if raw is not None:
        record, control = raw
        decoded = None if control else from_log_record(record)
        if decoded is None:
            return f"an apply at {offset}, where the log holds a control record"
        value = base64.b64encode(record.value or b"").decode()
        if (record.crc(), value, type_name(decoded)) != (e["crc"], e["value"], e["type"]):
            return f"an apply at {offset} of another record than the {type_name(decoded)} the log holds there"
    s.offset, s.batch_end = offset + 1, end
    s.applied.add(offset)
    s.image_line = None
    kind = e["type"]
    if "isr" in e:
        key = (e["topic_id"], e["partition"])
        s.partitions[key] = (tuple(e["isr"]), e["leader"])
        s.told.add(key)
    elif kind == RemoveTopicRecord.__name__:
        for key in [k for k in s.partitions if k[0] == e["topic_id"]]:
            del s.partitions[key]
        s.told.add(("topic", e["topic_id"]))
    elif "broker" in e:
        b = e["broker"]
        fenced = e.get("fenced", {FenceBrokerRecord.__name__: True, UnfenceBrokerRecord.__name__: False}.get(kind))
        if fenced is None:
            s.brokers.pop(b, None)
        else:
            s.brokers[b] = fenced
        s.told.add(("broker", b))
    return None


def _image(s: Step, e: dict[str, Any]) -> str | None:
    if e["reason"] == "snapshot-load":
        s.offset = s.start = e["offset"]
        s.batch_end, s.whole = None, False
        s.brokers, s.partitions = {}, {}
        s.told = set()
        s.applied = set()
    elif e["offset"] != s.batch_end:
        return f"a periodic image at {e['offset']} where the batch last applied ended at {s.batch_end}"
    else:
        s.offset = e["offset"]
    s.image_line = e
    return None


def _replay_complete(s: Step, report_true: Fail, report_complete: Fail) -> None:
    before, after = s.before.replay, s.after.replay
    if after is before and not s.applied and s.image_line is None:
        return  # nothing applied, nothing told
    if s.offset > after.offset:
        report_true(f"journalled applies up to {s.offset} where the image holds the records below {after.offset}")
        return
    log_start = s.log.bases[0] if s.log.bases else after.offset
    missing = [o for o in s.log.data_offsets(max(s.start, log_start), after.offset) if o not in s.applied]
    if missing:
        report_complete(f"applied the records at {missing[:5]} ({len(missing)} in all) with no `apply` line")
    line = s.image_line
    if line is not None and line["offset"] == after.offset and after.image is not None:
        digest = after.image.semantic_digest()[0]
        if digest != line["digest"]:
            report_true(f"journalled an image at {line['offset']} whose digest is not that of the image it holds")
    if s.whole:
        told_brokers = {**before.brokers, **s.brokers}
        for b in [b for b in before.brokers if ("broker", b) in s.told and b not in s.brokers]:
            told_brokers.pop(b)
        told_partitions = {k: v for k, v in before.partitions.items()
                           if ("topic", k[0]) not in s.told or k in s.partitions}
        told_partitions.update(s.partitions)
    else:
        told_brokers = dict(s.brokers)
        told_partitions = dict(s.partitions)
    _compare("broker", told_brokers, after.brokers, lambda b: ("broker", b), s, report_true, report_complete)
    _compare("partition", told_partitions, after.partitions, lambda k: k, s, report_true, report_complete)


def _compare(what: str, told: dict[Any, Any], held: dict[Any, Any], key_of: Callable[[Any], object], s: Step,
             report_true: Fail, report_complete: Fail) -> None:
    if told == held:
        return
    for key in sorted(set(told) | set(held), key=str):
        t, h = told.get(key), held.get(key)
        if t == h or (not s.whole and key_of(key) not in s.told):
            continue
        if key_of(key) in s.told or (what == "partition" and ("topic", key[0]) in s.told):
            report_true(f"journalled {what} {key} as {t} where the image holds {h}")
        else:
            report_complete(f"changed {what} {key} from {t} to {h} with no `apply` line")


# ---- the active controller ----------------------------------------------------------------------

def _fence_record(action: str, reason: str, broker: int, epoch: int, record: MetadataRecord) -> bool:
    """Whether `record` is the one a `fence` line of `action` names."""
    if action == "unfence":
        return isinstance(record, UnfenceBrokerRecord) and (record.id, record.epoch) == (broker, epoch)
    if action == "shutdown":
        return (isinstance(record, BrokerRegistrationChangeRecord) and record.in_controlled_shutdown == 1
                and (record.broker_id, record.broker_epoch) == (broker, epoch))
    if reason == "unregistered":
        return isinstance(record, UnregisterBrokerRecord) and (record.broker_id, record.broker_epoch) == (broker, epoch)
    return isinstance(record, FenceBrokerRecord) and (record.id, record.epoch) == (broker, epoch)


def _fence_kind(record: MetadataRecord) -> bool:
    """Whether `record` is one a `fence` line must name."""
    if isinstance(record, BrokerRegistrationChangeRecord):
        return record.in_controlled_shutdown == 1
    return isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord | UnregisterBrokerRecord)


def _fence(s: Step, e: dict[str, Any]) -> str | None:
    action, broker, epoch, offset = e["action"], e["broker"], e["epoch"], e["offset"]
    if e.get("at_ms", s.now) != s.now:
        return f"a {action} decided at {e['at_ms']} in a step at {s.now}"
    if offset is None:
        s.unwritten_fences = True
        return None
    for o, record in s.written:
        if o <= offset and o not in s.claimed and _fence_record(action, e["reason"], broker, epoch, record):
            s.claimed.add(o)
            return _fence_cause(s, e)
    return f"a {action} of broker {broker} at epoch {epoch} in effect from {offset}, with no record of it written"


def _fence_cause(s: Step, e: dict[str, Any]) -> str | None:
    """What is false in the cause `fence` line `e` gives: a request of the step that asks for it (a
    heartbeat caught up to its registration for an unfence, one with WantFence or WantShutDown, an
    UnregisterBroker) or, for a session timeout, a lease of the broker that ran out."""
    broker, epoch, reason = e["broker"], e["epoch"], e["reason"]
    if reason == "session timeout":
        after, ctrl = s.after, s.node.ctrl
        if after.leases is None or ctrl is None:
            return None  # (no longer active: its leases are gone)
        last = after.contact.get(broker)
        if last is None or s.now - last < ctrl.leases.session_timeout_ms:
            return f"a fence for a session timeout of a broker last heard from at {last}"
        return None
    heartbeats = [r for r in s.asked if api_name(r) == "BrokerHeartbeat" and (r.broker_id, r.broker_epoch) ==
                  (broker, epoch)]
    if reason == "heartbeat":
        if not any(not r.want_fence and not r.want_shut_down and r.current_metadata_offset >= epoch
                   and r.current_metadata_offset == e.get("metadata_offset") for r in heartbeats):
            return "an unfence no heartbeat of the step asked for (caught up, at that metadata offset)"
    elif reason == "requested":
        if not any(r.want_fence for r in heartbeats):
            return "a fence no heartbeat of the step asked for (WantFence)"
    elif reason == "controlled shutdown":
        if not any(r.want_shut_down for r in heartbeats):
            return "a controlled shutdown no heartbeat of the step asked for (WantShutDown)"
    elif reason == "unregistered":
        if not any(api_name(r) == "UnregisterBroker" and r.broker_id == broker for r in s.asked):
            return "an unregistration no request of the step asked for"
    else:
        return f"a {e['action']} for a reason no rule knows, {reason!r}"
    return None


def _lease(s: Step, e: dict[str, Any]) -> str | None:
    ctrl = s.node.ctrl
    if ctrl is None:
        return "a lease from a node that runs no controller"
    if s.before.leases is None or s.before.leading != ctrl.epoch:
        # (a controller activates in a step of its Raft core, and first renews leases in a later step)
        return (f"a lease from a controller that was not the active one, leading epoch {ctrl.epoch}, when the step "
                f"began (its Raft core led epoch {s.before.leading})")
    if e["expires_ms"] != s.now + ctrl.leases.session_timeout_ms:
        return f"a lease expiring at {e['expires_ms']}, not a session timeout after now ({s.now})"
    s.renewed.add(e["broker"])
    return None


def _decision(s: Step, e: dict[str, Any]) -> str | None:
    """(when it is answered, and what it names of its request and answer: `node.sim.controller_answers`)"""
    if e["api"] == "BrokerRegistration" and e["error"] == "NONE":
        record = s.log.metadata(e["broker_epoch"])
        if record is not None and not (isinstance(record, RegisterBrokerRecord) and record.broker_id == e["broker"]
                                       and str(record.incarnation_id) == e["incarnation"]):
            held = (f"broker {record.broker_id}'s registration (incarnation {record.incarnation_id})"
                    if isinstance(record, RegisterBrokerRecord) else f"a {type_name(record)}")
            return f"a registration of broker {e['broker']} at epoch {e['broker_epoch']}, where the log holds {held}"
    return None


def _leases_complete(s: Step, report_true: Fail, report_complete: Fail, sampled: dict[int, int], interval: int) -> None:
    after = s.after
    if after.leases is None:
        return
    same = s.before.leases is after.leases
    for b in sorted(s.renewed):
        if b in after.contact and after.contact[b] != s.now:
            report_true(f"journalled a lease of broker {b} renewed at {s.now}; it holds one from {after.contact[b]}")
    for b in s.renewed:
        sampled[b] = s.now
    for b, t in sorted(after.contact.items()):
        if (same and s.before.contact.get(b) == t) or b in s.renewed:
            continue
        last = sampled.get(b)
        if last is None or s.now - last >= interval:
            report_complete(f"renewed the lease of broker {b} at {t} with no `lease` line (the last one at {last})")


def _fences_complete(s: Step, report_complete: Fail) -> None:
    if s.unwritten_fences:
        return
    unnamed = [(o, type_name(r)) for o, r in s.written if _fence_kind(r) and o not in s.claimed]
    if unnamed:
        report_complete(f"wrote {unnamed} with no `fence` line")


# ---- the broker's lifecycle ---------------------------------------------------------------------

def _mine(s: Step, e: dict[str, Any]) -> str | None:
    return None if e["broker"] == s.node.node_id else f"a line of broker {e['broker']} from node {s.node.node_id}"


def _broker_state(s: Step, e: dict[str, Any]) -> str | None:
    wrong = _mine(s, e)
    if wrong is not None:
        return wrong
    state = e["state"]
    if state in ("FENCED_SELF", "UNFENCED_SELF"):
        fenced = state == "FENCED_SELF"
        if s.self_fenced == fenced:
            return f"{state} for a broker {'already' if fenced else 'not'} fenced by itself"
        s.self_fenced = fenced
        return None
    if state == s.state:
        return f"a broker state {state}, the state it was already in"
    s.state = state
    return None


def _heartbeat(s: Step, e: dict[str, Any]) -> str | None:
    wrong = _mine(s, e)
    if wrong is not None:
        return wrong
    lifecycle = s.node.lifecycle
    if lifecycle is not None and e["self_fence_ms"] != lifecycle.config.effective_self_fence_timeout_ms:
        return f"a self-fence timeout of {e['self_fence_ms']} ms, not the broker's own"
    if e["ok"]:
        s.last_ok = s.now
    return None


def _log_dir_failed(s: Step, e: dict[str, Any]) -> str | None:
    wrong = _mine(s, e)
    if wrong is not None:
        return wrong
    if e["directory"] in s.offline:
        return f"a failure of log directory {e['directory']}, already offline"
    s.offline.add(e["directory"])
    return None


def _lifecycle_complete(s: Step, report_complete: Fail) -> None:
    after = s.after
    told = (s.state, s.self_fenced, frozenset(s.offline), s.last_ok)
    held = (after.state, after.self_fenced, after.offline, after.last_ok)
    for name, t, h in zip(("state", "self-fencing", "offline log directories", "last accepted answer"), told, held,
                          strict=True):
        if t != h:
            report_complete(f"left its {name} {h} where its lines tell {t}")


def _raft(s: Step, e: dict[str, Any]) -> str | None:
    return None  # the Raft core's own line: judged by journal_truth where its core journals


JUDGES: dict[str, Judge[Step]] = {
    "apply": Judge(("offset", "type", "crc", "batch_end", "value"), _apply),
    "image": Judge(("offset", "digest", "sections", "entries", "reason"), _image),
    "fence": Judge(("broker", "action", "reason", "epoch", "offset"), _fence),
    "lease": Judge(("broker", "expires_ms"), _lease),
    "decision": Judge(("api", "error"), _decision),
    "broker_state": Judge(("broker", "state"), _broker_state),
    "heartbeat": Judge(("broker", "ok", "self_fence_ms"), _heartbeat),
    "log_dir_failed": Judge(("broker", "directory"), _log_dir_failed),
} | {kind: Judge((), _raft) for kind in journal_truth.JUDGES}
"""Event kind → the fields the checkers read and the judge of its truth."""

OWN_READS: dict[str, tuple[str, ...]] = {
    "AlterPartition": ("broker", "broker_epoch"),
    "AllocateProducerIds": ("broker", "broker_epoch"),
    "BrokerRegistration": ("broker", "broker_epoch", "incarnation"),
    "BrokerHeartbeat": ("broker", "broker_epoch", "fenced", "shut_down", "metadata_offset"),
    "UnregisterBroker": ("broker", "broker_epoch"),
}
"""A broker's own request → the further fields its `decision` carries (ControllerJournalFields)."""


def reads(e: dict[str, Any]) -> tuple[str, ...] | None:
    """The fields event `e` must carry (None: a kind no judge knows)."""
    judge = JUDGES.get(str(e.get("ev")))
    if judge is None:
        return None
    if e.get("ev") == "decision":
        return judge.reads + OWN_READS.get(str(e.get("api")), ())
    return judge.reads


class ControllerTruth:
    """ControllerJournalTrue / ControllerJournalComplete and BrokerJournalTrue / BrokerJournalComplete
    over every step of every node of a cluster simulation (module docstring)."""

    def __init__(self, fail: Callable[[str, str], None]) -> None:
        self.fail = fail
        self._facts: dict[int, NodeFacts] = {}
        self._lines: dict[int, list[dict[str, Any]]] = {}
        self._sampled: dict[int, tuple[object, dict[int, int]]] = {}
        self._written: dict[int, list[tuple[int, MetadataRecord]]] = {}
        self._asked: dict[int, list[Any]] = {}

    def asked(self, node_id: int, request: Any) -> None:
        """The controller of `node_id` is handed `request` in its step."""
        self._asked.setdefault(node_id, []).append(request)

    def wrote(self, node_id: int, base: int, records: Sequence[Record]) -> None:
        """The controller of `node_id` appended `records` as leader at `base` in its step."""
        written = self._written.setdefault(node_id, [])
        written += [(base + i, m) for i, r in enumerate(records) if (m := from_log_record(r)) is not None]

    def told(self, node_id: int, outputs: list[Any]) -> None:
        """Outputs of `node_id`'s step so far: its journal lines (the Raft core's as dicts; answers and
        other outputs are not lines)."""
        lines = self._lines.setdefault(node_id, [])
        for out in outputs:
            if isinstance(out, JournalEvent):
                lines.append(out.to_json())
            elif isinstance(out, dict):
                lines.append(out)

    def stepped(self, node: KNode, now: int) -> None:
        """Judge the lines of `node`'s step that just ended against what it held before and after."""
        nid = node.node_id
        lines = self._lines.pop(nid, [])
        written, asked = self._written.pop(nid, []), self._asked.pop(nid, [])
        if node.raft is None or (node.ctrl is None and node.lifecycle is None):
            self._facts.pop(nid, None)
            return
        before = self._facts.get(nid)
        if before is None or before.incarnation != node.incarnation:
            before = fresh(node)
        after = facts_of(node, before)
        self._facts[nid] = after
        if not lines and not written and not asked and after.replay is before.replay and after.leases is None \
                and (after.state, after.self_fenced, after.offline, after.last_ok) == (
                    before.state, before.self_fenced, before.offline, before.last_ok):
            return
        who = "controller" if node.ctrl is not None else "broker"
        rule = "Controller" if node.ctrl is not None else "Broker"

        def true(problem: str) -> None:
            self.fail(f"{rule}JournalTrue", f"{who} {nid} {problem}")

        def complete(problem: str) -> None:
            self.fail(f"{rule}JournalComplete", f"{who} {nid}'s step at {now} {problem}")

        log = LogRecords(node.log)
        s = Step(node, now, before, after, log, before.replay.offset, start=before.replay.offset,
                 state=before.state, self_fenced=before.self_fenced, offline=set(before.offline),
                 last_ok=before.last_ok)
        s.written, s.asked = written, asked
        judge_lines(JUDGES, reads, s, lines, true)
        _replay_complete(s, true, complete)
        if node.ctrl is not None:
            _fences_complete(s, complete)
            if after.leases is not None:
                term, sampled = self._sampled.get(nid, (None, {}))
                if term is not after.leases:
                    sampled = {}
                    self._sampled[nid] = (after.leases, sampled)
                _leases_complete(s, true, complete, sampled, node.ctrl.leases.journal_interval_ms)
        else:
            _lifecycle_complete(s, complete)
