"""The metadata checker over a run's journals: the committed metadata log, rebuilt from every
node's `apply` events (each carries its record's bytes), decoded with Kafka's schemas and replayed
into the checker's own image, record by record, with KIP-631's rules (`model.RULES`); and every
node's own image (its `image` events: a digest after each snapshot load and every so many records)
compared with that replay at the same offset.

- RecordDecodes: every committed record decodes with Kafka's schemas (a node that writes what
  Kafka's tools would misread is caught here).
- ImageAgreement: a node's image at offset N — however it got there: replaying records, loading a
  snapshot it wrote or fetched — is what the committed records below N make. Reported once per
  node process life, naming the sections (brokers, topics, partitions, configs, features) that
  differ.
- The rules of `model.RULES` (RECORD_RULES here), judged for each committed record against the image before it.
- The rules of `DECISION_RULES`, judged for each heartbeat answer a controller journalled (its
  `decision`, with the offset of the state it was decided on) against the replay at that offset —
  the controller answers once that state committed, so the replay holds exactly what it decided on:
  - ShutDownWhileLeading: ShouldShutDown only for a broker that leads no partition (KIP-631:
    "Once they are all moved, the controller responds to the heartbeat with ShouldShutDown = true").
  - FencedAnswerDisagrees: the answer's IsFenced is the broker's fencing in that state (a broker told
    it is unfenced while the quorum has it fenced serves as a member it is not, and the reverse).
- The rules of `producer_ids.RULES` over the producer ids brokers journalled handing out
  (ProducerIdUnique, ProducerIdFromCommittedBlock), against the blocks the replayed
  ProducerIdsRecords granted.

The log is the union of what every node applied: an offset no node applied is either a control
record (a node journalled appending one there) or a gap, and a gap (or a record that does not
decode, or two nodes that applied different records at one offset — CommittedPrefixAgreement's
finding) ends the replay there with a note: what comes after is not judged.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals
from kraftlab.checker.metadata.decode import LEGACY_FRAME_VERSION, Decoded, DecodeError, decode
from kraftlab.checker.metadata.model import RULES as RECORD_RULES
from kraftlab.checker.metadata.model import ImageModel, digest_of
from kraftlab.checker.metadata.producer_ids import RULES as PRODUCER_ID_RULES
from kraftlab.checker.metadata.producer_ids import judge_producer_ids

DECISION_RULES: dict[str, str] = {
    "ShutDownWhileLeading": "a heartbeat is answered ShouldShutDown only when the broker leads no partition",
    "FencedAnswerDisagrees": "a heartbeat's IsFenced answer is the broker's fencing in the state it was decided on",
}
RULES: dict[str, str] = {**RECORD_RULES, **DECISION_RULES, **PRODUCER_ID_RULES}
"""Every rule judged against the replay, stated in one sentence (the report reads them here)."""
INVARIANTS = ["RecordDecodes", "ImageAgreement", *RULES]


@dataclass(frozen=True, slots=True)
class _Image:
    offset: int
    digest: str
    sections: dict[str, str]
    reason: str
    life: int
    entry: Entry


def committed_log(journals: Journals, notes: list[str]) -> tuple[dict[int, tuple[bytes, Entry]], int | None]:
    """Offset → (record bytes, first apply entry), and the lowest offset where nodes disagree."""
    out: dict[int, tuple[bytes, Entry]] = {}
    conflict: int | None = None
    for e in journals.all():
        if e.ev != "apply" or e.get("value") is None:
            continue
        off = int(e["offset"])
        try:
            value = base64.b64decode(e["value"], validate=True)
        except (binascii.Error, ValueError):
            notes.append(f"{e.where()}: the apply event's value is not base64; offset {off} taken from other nodes")
            continue
        seen = out.get(off)
        if seen is None:
            out[off] = (value, e)
        elif seen[0] != value and (conflict is None or off < conflict):
            conflict = off
    return out, conflict


@dataclass(frozen=True, slots=True)
class Committed:
    """The committed metadata log in offset order, decoded, as far as it can be replayed: `stop` is
    the first offset that cannot be (with why, and — for a record that does not decode — the
    RecordDecodes violation), None when the whole log can."""

    records: dict[int, tuple[Decoded, Entry]]
    end: int
    """The highest offset any node applied (-1 when none did)."""
    stop: tuple[int, str] | None = None
    undecodable: Violation | None = None


def committed_records(journals: Journals, notes: list[str]) -> Committed:
    """Every node's `apply` events → the committed records, decoded, up to the first offset where
    nodes disagree, a record does not decode, or a gap that is no control batch."""
    committed, conflict = committed_log(journals, notes)
    controls = _controls(journals)
    records: dict[int, tuple[Decoded, Entry]] = {}
    top = max(committed, default=-1)
    for off in range(0, top + 1):
        if off == conflict:
            return Committed(records, top, (off, f"nodes applied different records at offset {off} "
                                                 "(see CommittedPrefixAgreement)"))
        if off in committed:
            value, entry = committed[off]
            try:
                records[off] = (decode(value), entry)
            except DecodeError as exc:
                return Committed(records, top, (off, f"the record at offset {off} does not decode"), Violation(
                    "RecordDecodes", f"offset {off}: {entry.get('type', 'a record')} that {_name(entry)} applied "
                                     f"does not decode with Kafka's schemas: {exc}", [entry]))
        elif off not in controls:
            nxt = min(o for o in committed if o > off)
            return Committed(records, top, (off, f"offsets {off}–{nxt - 1} were applied by no node and are no "
                                                 "control record"))
    return Committed(records, top)


def _controls(journals: Journals) -> set[int]:
    """Offsets some node appended a control batch at (LeaderChangeMessage: not metadata)."""
    out: set[int] = set()
    for e in journals.all():
        if e.ev == "append" and e.get("control"):
            base = int(e["base"])
            out.update(range(base, base + len(e.get("crcs") or [None])))
    return out


def _images(journals: Journals) -> dict[int, list[_Image]]:
    by_offset: dict[int, list[_Image]] = defaultdict(list)
    for entries in journals.by_node.values():
        life = 0
        for e in entries:
            if e.ev == "start":
                life += 1
            elif e.ev == "image" and e.get("digest"):
                by_offset[int(e["offset"])].append(
                    _Image(int(e["offset"]), str(e["digest"]), dict(e.get("sections") or {}), str(e.get("reason", "")),
                           life, e))
    return by_offset


def _heartbeat_answers(journals: Journals) -> dict[int, list[Entry]]:
    """Accepted heartbeat decisions by the offset of the state they were decided on."""
    out: dict[int, list[Entry]] = defaultdict(list)
    for e in journals.all():
        if (e.ev == "decision" and e.get("api") == "BrokerHeartbeat" and e.get("error", "NONE") == "NONE"
                and e.get("offset") is not None and e.get("broker") is not None):
            out[int(e["offset"])].append(e)
    return out


def _judge_answers(model: ImageModel, answers: list[Entry], at: int) -> list[Violation]:
    """The DECISION_RULES for heartbeat answers decided on the state of the records up to `at`."""
    vs: list[Violation] = []
    for e in answers:
        b = int(e["broker"])
        broker = model.brokers.get(b)
        if broker is None:
            continue  # NamesCurrentRegistration / the registry model judge answers for unknown brokers
        if e.get("shut_down"):
            led = sorted(f"{model.topic_names.get(tid, tid)}-{pid}" for (tid, pid), p in model.partitions.items()
                         if p.leader == b)
            if led:
                vs.append(Violation("ShutDownWhileLeading", (
                    f"{_name(e)} told broker {b} it may shut down (ShouldShutDown) while, at offset {at}, the broker "
                    f"still led {len(led)} partition(s): {', '.join(led[:4])}{' …' if len(led) > 4 else ''} — "
                    "their leadership goes offline with it"), [e],
                    before=f"broker {b} leads {', '.join(led[:4])}", after=f"broker {b} told to shut down"))
        if e.get("fenced") is not None and bool(e["fenced"]) != broker.fenced:
            state, told = ("fenced", "unfenced") if broker.fenced else ("unfenced", "fenced")
            vs.append(Violation("FencedAnswerDisagrees", (
                f"{_name(e)} answered broker {b}'s heartbeat (broker epoch {e.get('broker_epoch')}) with IsFenced="
                f"{bool(e['fenced'])} while the committed records up to offset {at}, the state it decided on, have "
                f"the broker {state}"), [e], before=f"broker {b} {state} at offset {at}", after=f"broker {b} told it "
                f"is {told}"))
    return vs


def _entries_that_differ(form: dict[str, Any], img: _Image, sections: list[str], limit: int = 4) -> str:
    """'; broker 1001: the replay has {...}, ...' for the entries whose digests differ (when the node
    journalled per-entry digests for those sections)."""
    entries = img.entry.get("entries") or {}
    out: list[str] = []
    for section in sections:
        theirs, ours = entries.get(section), form.get(section, {})
        if not isinstance(theirs, dict):
            continue
        for key in sorted(set(theirs) | set(ours)):
            mine = digest_of(ours[key])[:8] if key in ours else None
            if mine != theirs.get(key):
                if key not in ours:
                    out.append(f"{section} {key}: in the node's image, not in the replay")
                elif key not in theirs:
                    out.append(f"{section} {key}: missing from the node's image; the replay has "
                               f"{json.dumps(ours[key], sort_keys=True)}")
                else:
                    out.append(f"{section} {key}: the replay has {json.dumps(ours[key], sort_keys=True)}, the "
                               "node's image something else")
            if len(out) >= limit:
                break
    return "; " + "; ".join(out) if out else ""


def _name(e: Entry) -> str:
    return f"n{e.node}"


def check_metadata(journals: Journals) -> dict[str, Any]:
    """Replay the committed metadata log with the rules; compare every node's image with it."""
    notes: list[str] = []
    log = committed_records(journals, notes)
    images = _images(journals)
    if log.end < 0:
        return result([], [], {name: "no apply event carries its record's bytes (nodes from before the metadata "
                                     "checker)" for name in INVARIANTS})
    vs: list[Violation] = []
    model = ImageModel()
    reported_lives: set[tuple[int, int]] = set()
    later_mismatches: dict[tuple[int, int], int] = defaultdict(int)
    compared = agreed = replayed = legacy = 0
    end = max(log.end, max(images, default=0))
    stop = log.stop
    cache: tuple[str, dict[str, str]] | None = None
    answers = _heartbeat_answers(journals)
    judged_answers = 0
    for off in range(0, end + 1):
        if off - 1 in answers:  # the model holds the records up to off - 1
            judged_answers += len(answers[off - 1])
            vs.extend(_judge_answers(model, answers[off - 1], off - 1))
        for img in images.get(off, ()):
            cache = cache or model.digest()
            compared += 1
            if img.digest == cache[0]:
                agreed += 1
                continue
            key = (img.entry.node, img.life)
            if key in reported_lives:
                later_mismatches[key] += 1
                continue
            reported_lives.add(key)
            differ = [s for s in sorted(set(cache[1]) | set(img.sections)) if cache[1].get(s) != img.sections.get(s)]
            how = "after loading a snapshot" if img.reason == "snapshot-load" else "replaying records"
            detail = _entries_that_differ(model.semantic_form(), img, differ)
            vs.append(Violation("ImageAgreement", (
                f"{_name(img.entry)}'s metadata image at offset {off} ({how}) is not what the committed records "
                f"below {off} make: it differs in {', '.join(differ) or 'its digest'}{detail}"), [img.entry]))
        if stop is not None and off == stop[0]:
            if log.undecodable is not None:
                vs.append(log.undecodable)
            break
        if off in log.records:
            rec, entry = log.records[off]
            legacy += rec.frame_version == LEGACY_FRAME_VERSION
            vs.extend(Violation(b.rule, b.explanation, [entry]) for b in model.apply(rec, off))
            replayed += 1
            cache = None
    if stop is None and end in answers:
        judged_answers += len(answers[end])
        vs.extend(_judge_answers(model, answers[end], end))
    for key, n in later_mismatches.items():
        notes.append(f"n{key[0]}: {n} later image(s) of the same process life differ too")
    if stop is not None:
        unjudged = sum(len(v) for o, v in images.items() if o > stop[0])
        notes.append(f"the replay stops at offset {stop[0]}: {stop[1]}; {unjudged} later node image(s) not compared")
    if legacy:
        notes.append(f"{legacy} record(s) in the legacy frame version 0 (kraft-node before it matched Kafka's 1)")
    pids = judge_producer_ids(journals, model.producer_id_blocks, stop is None)
    vs.extend(pids.violations)
    stats = {"records": replayed, "images_compared": compared, "images_agreeing": agreed,
             "heartbeat_answers_judged": judged_answers,
             "end_offset": stop[0] if stop else end + 1, **pids.stats}
    out = result(vs, INVARIANTS, pids.not_checked or None, stats)
    if not images:
        out.setdefault("not_checked", {})["ImageAgreement"] = "no node journalled `image` events"
    if notes:
        out["notes"] = notes
    return out
