"""The queue rules: each a Kafka guarantee a producer or consumer relies on, judged alone.

- LostWrite: a record acknowledged at an offset below one some poll read is returned by a poll
  too. A consumer that read past the offset would have read it; nobody did, so the log no longer
  holds it there.
- Unseen: a record acknowledged to a send is returned by some poll by the end of the test (the
  final read of its partition runs from the log start to the high-water mark after every fault
  is healed).
- Duplicate: a value sent once stands at one place only (one partition, one offset).
- InconsistentOffset: an offset of a partition holds one record, whoever looks (the acknowledged
  offset of a send and every poll agree); two values at one offset mean the log was rewritten.
- PollSkip: a consumer reads a partition without gaps: from its fetch position, the next record
  it gets is the next one in the log, so it never jumps over an offset other ops saw holding a
  record.
- NonmonotonicPoll: a consumer's records of a partition come in increasing offsets, never below
  its fetch position.
- NonmonotonicSend: one producer's later send to a partition gets a higher offset than its
  earlier acknowledged send there.
- ReorderedSend: a send invoked after another send to the same partition was acknowledged gets a
  higher offset (the log is appended in real-time order).
- AbortedRead: a poll never returns a value whose send definitely failed.
- UnexpectedValue: a poll returns only values that were sent to that partition.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Op, short
from kraftlab.checker.invariant import Violation
from kraftlab.checker.queue.logs import PartitionLog, QueueReplay, Sighting
from kraftlab.checker.queue.observe import Poll, Send
from kraftlab.checker.queue.words import op_ref
from kraftlab.checker.rules import NamedRule

RULES: dict[str, str] = {
    "LostWrite": "a record acknowledged at an offset below one that some poll read is itself returned by some poll",
    "Unseen": "every acknowledged record is returned by some poll by the end (the final reads run from the log "
              "start to the high-water mark after the faults are healed)",
    "Duplicate": "a value sent once stands at one place in the log (one partition, one offset)",
    "InconsistentOffset": "an offset of a partition holds one record, whoever looks: the acknowledged offset and "
                          "every poll agree",
    "PollSkip": "a consumer reads a partition without gaps: it never jumps over an offset that other ops saw "
                "holding a record",
    "NonmonotonicPoll": "a consumer gets a partition's records in increasing offsets, never below its fetch position",
    "NonmonotonicSend": "one producer's later send to a partition gets a higher offset than its earlier one",
    "ReorderedSend": "a send invoked after another send to the same partition was acknowledged gets a higher offset",
    "AbortedRead": "a poll never returns a value whose send definitely failed",
    "UnexpectedValue": "a poll returns only values that were sent to that partition",
}

SHOWN_OFFSETS = 8


@dataclass
class QueueViolation(Violation):
    """A broken queue rule: the ops that show it (no journal entries), the partition and offsets."""

    ops: list[Op] = field(default_factory=list)
    key: str | None = None
    offsets: list[int] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["rule"] = RULES[self.invariant]
        out["ops"] = [op_ref(o) for o in self.ops]
        if self.key is not None:
            out["key"] = self.key
        if self.offsets:
            out["offsets"] = self.offsets
        if self.values:
            out["values"] = [v if isinstance(v, int | str) else str(v) for v in self.values]
        return out


def _who(s: Sighting) -> str:
    return (f"acknowledged to p{s.op.process}'s send (history line {s.op.call_line})" if s.how == "acknowledged"
            else f"polled by p{s.op.process} (history line {s.op.call_line})")


def _offsets(offsets: list[int]) -> str:
    shown = ", ".join(map(str, offsets[:SHOWN_OFFSETS]))
    return shown + (f" and {len(offsets) - SHOWN_OFFSETS} more" if len(offsets) > SHOWN_OFFSETS else "")


def _acked(replay: QueueReplay) -> Iterator[tuple[PartitionLog, Send]]:
    for s in replay.obs.sends:
        if s.offset is not None and s.op.status == "ok":
            yield replay.logs[s.key], s


class InconsistentOffset(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for key, pl in sorted(replay.logs.items()):
            for offset in pl.known:
                vals = pl.at[offset]
                if len(vals) < 2:
                    continue
                seen = list(vals.values())
                said = "; ".join(f"{short(s.value, 30)} ({_who(s)})" for s in seen)
                yield QueueViolation(
                    self.name, f"offset {offset} of partition {key} holds {len(seen)} different values: {said}. An "
                    "offset names one record forever, so the log was rewritten there: a truncation below a record "
                    "that was acknowledged or consumed, or two leaders appending at one offset.",
                    ops=[s.op for s in seen], key=key, offsets=[offset], values=[s.value for s in seen])


class Duplicate(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        places: dict[Hashable, list[tuple[str, int, Sighting]]] = {}
        for key, pl in sorted(replay.logs.items()):
            for value, at in pl.places.items():
                places.setdefault(value, []).extend((key, o, s) for o, s in sorted(at.items()))
        for value, where in places.items():
            if len(where) < 2:
                continue
            sends = replay.sent_to.get(value, [])
            sent = (f"sent once (p{sends[0].op.process}, to {sends[0].key})" if len(sends) == 1
                    else f"sent {len(sends)} times")
            said = "; ".join(f"{k} offset {o} ({_who(s)})" for k, o, s in where)
            yield QueueViolation(
                self.name, f"value {short(value, 30)}, {sent}, stands at {len(where)} places: {said}. The producer "
                "is idempotent (KIP-98), so whatever it re-sent, the log appended it more than once (a re-appended "
                "batch the broker should have recognised by producer id and sequence, or a replica that copied it "
                "twice).",
                ops=[s.op for _, _, s in where], key=where[0][0], offsets=[o for _, o, _ in where], values=[value])


class LostWrite(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for pl, s in _acked(replay):
            assert s.offset is not None
            if s.offset > pl.max_polled or s.value in pl.polled:
                continue
            past = pl.first_polled_above(s.offset - 1)
            assert past is not None
            final = pl.final_read
            tail = ""
            if final is not None:
                tail = (f" The final read of {pl.key} (p{final.op.process}, from offset "
                        f"{final.positions.get(pl.key)} to the high-water mark "
                        f"{final.high_water_marks.get(pl.key, '?')}) did not return it either.")
            yield QueueViolation(
                self.name, f"p{s.op.process}'s send of {short(s.value, 30)} to {pl.key} was acknowledged at offset "
                f"{s.offset}, and polls read {pl.key} past it (up to offset {pl.max_polled}; p{past.op.process} read "
                f"offset {past.offset} at history line {past.op.call_line}), yet no poll ever returned "
                f"{short(s.value, 30)}: an acknowledged record is gone from the log.{tail}",
                ops=[s.op, past.op] + ([final.op] if final is not None and final.op is not past.op else []),
                key=pl.key, offsets=[s.offset, past.offset], values=[s.value])


def unseen_unjudged(replay: QueueReplay) -> dict[str, int]:
    """Partitions with acknowledged records above every polled offset and no completed final read
    (whether those records are still there is unknown) → how many such records."""
    out: dict[str, int] = {}
    for pl, s in _acked(replay):
        assert s.offset is not None
        if s.offset > pl.max_polled and pl.final_read is None and s.value not in pl.polled:
            out[pl.key] = out.get(pl.key, 0) + 1
    return out


class Unseen(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        by_key: dict[str, list[Send]] = {}
        for pl, s in _acked(replay):
            assert s.offset is not None
            if s.offset > pl.max_polled and pl.final_read is not None and s.value not in pl.polled:
                by_key.setdefault(pl.key, []).append(s)
        for key, sends in sorted(by_key.items()):
            final = replay.logs[key].final_read
            assert final is not None
            hw = final.high_water_marks.get(key)
            offsets = sorted(int(s.offset) for s in sends if s.offset is not None)
            yield QueueViolation(
                self.name, f"{len(sends)} record(s) acknowledged to sends to {key} at offsets {_offsets(offsets)} "
                f"were never returned by any poll, not even by the final read of {key} (p{final.op.process}, "
                f"history line {final.op.call_line}), which read from offset {final.positions.get(key)} up to the "
                f"high-water mark {hw if hw is not None else '?'} after the faults were healed: the partition "
                "ended below records it had acknowledged.",
                ops=[s.op for s in sends[:SHOWN_OFFSETS]] + [final.op], key=key, offsets=offsets,
                values=[s.value for s in sends])


@dataclass(frozen=True, slots=True)
class _Step:
    poll: Poll
    key: str
    before: int | None
    """The previous record's offset in this poll, or None when `offset` is the first one."""
    start: int | None
    """Where the consumer fetched this partition from (None: unknown)."""
    offset: int


def _steps(replay: QueueReplay) -> Iterator[_Step]:
    for p in replay.obs.polls:
        for key, records in p.records.items():
            prev: int | None = None
            for offset, _ in records:
                yield _Step(p, key, prev, p.positions.get(key), offset)
                prev = offset


class PollSkip(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for st in _steps(replay):
            lo = st.start if st.before is None else st.before + 1
            if lo is None or st.offset <= lo:
                continue
            pl = replay.logs[st.key]
            skipped = pl.known_between(lo, st.offset)
            if not skipped:
                continue
            first = next(iter(pl.at[skipped[0]].values()))
            frm = (f"fetched {st.key} from offset {lo}" if st.before is None
                   else f"read {st.key} offset {st.before}")
            yield QueueViolation(
                self.name, f"p{st.poll.op.process}'s poll (history line {st.poll.op.call_line}) {frm} and got "
                f"offset {st.offset} next, jumping over offset(s) {_offsets(skipped)} that held records (offset "
                f"{skipped[0]}: {short(first.value, 30)}, {_who(first)}). A consumer reads a partition in order "
                "without gaps, so it skipped records that were in the log.",
                ops=[st.poll.op, first.op], key=st.key, offsets=[lo, *skipped, st.offset])


class NonmonotonicPoll(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for st in _steps(replay):
            if st.before is not None and st.offset <= st.before:
                why = f"read {st.key} offset {st.before} and then offset {st.offset}"
            elif st.before is None and st.start is not None and st.offset < st.start:
                why = f"fetched {st.key} from offset {st.start} and got offset {st.offset}, below it"
            else:
                continue
            yield QueueViolation(
                self.name, f"p{st.poll.op.process}'s poll (history line {st.poll.op.call_line}) {why}: a "
                "consumer's records come in increasing offsets from its fetch position, so the log went back.",
                ops=[st.poll.op], key=st.key, offsets=[o for o in (st.start, st.before, st.offset) if o is not None])


class NonmonotonicSend(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        last: dict[tuple[Any, str], Send] = {}
        for _, s in sorted(_acked(replay), key=lambda ps: ps[1].op.call):
            prev = last.get((s.op.process, s.key))
            assert s.offset is not None
            if prev is not None and prev.offset is not None and s.offset <= prev.offset:
                yield QueueViolation(
                    self.name, f"p{s.op.process} sent {short(prev.value, 30)} to {s.key} and it was acknowledged at "
                    f"offset {prev.offset}; its next send, {short(s.value, 30)}, was acknowledged at offset "
                    f"{s.offset}, not above it. One producer's sends to a partition are appended in the order it "
                    "sent them.", ops=[prev.op, s.op], key=s.key, offsets=[prev.offset, s.offset],
                    values=[prev.value, s.value])
            last[(s.op.process, s.key)] = s


class ReorderedSend(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        by_key: dict[str, list[Send]] = {}
        for _, s in _acked(replay):
            by_key.setdefault(s.key, []).append(s)
        for key, sends in sorted(by_key.items()):
            done = sorted(sends, key=lambda s: s.op.ret if s.op.ret is not None else -1)
            best: Send | None = None
            i = 0
            for s in sorted(sends, key=lambda s: s.op.call):
                while i < len(done) and (done[i].op.ret or 0) < s.op.call:
                    if best is None or int(done[i].offset or 0) > int(best.offset or 0):
                        best = done[i]
                    i += 1
                if best is None or best.op.process == s.op.process or int(s.offset or 0) >= int(best.offset or 0):
                    continue  # one process's own order is NonmonotonicSend's; an equal offset InconsistentOffset's
                yield QueueViolation(
                    self.name, f"p{best.op.process}'s send of {short(best.value, 30)} to {key} was acknowledged at "
                    f"offset {best.offset} (history line {best.op.ret_line}) before p{s.op.process} sent "
                    f"{short(s.value, 30)} (history line {s.op.call_line}), which was acknowledged at offset "
                    f"{s.offset}, below it. The log appends in real-time order: a later send cannot land earlier.",
                    ops=[best.op, s.op], key=key, offsets=[int(best.offset or 0), int(s.offset or 0)],
                    values=[best.value, s.value])


def _polled(replay: QueueReplay) -> Iterator[tuple[PartitionLog, Hashable, Sighting]]:
    for _, pl in sorted(replay.logs.items()):
        for value, s in pl.polled.items():
            yield pl, value, s


class AbortedRead(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for pl, value, s in _polled(replay):
            sends = [x for x in replay.sent_to.get(value, []) if x.key == pl.key]
            if sends and all(x.op.status == "fail" for x in sends):
                x = sends[0]
                yield QueueViolation(
                    self.name, f"p{s.op.process}'s poll returned {short(value, 30)} at {pl.key} offset {s.offset}, "
                    f"but p{x.op.process}'s send of it failed definitely ({x.op.error}, history line "
                    f"{x.op.ret_line}): a refused send must leave nothing a consumer can read.",
                    ops=[x.op, s.op], key=pl.key, offsets=[s.offset], values=[value])


class UnexpectedValue(NamedRule):
    def check(self, replay: QueueReplay) -> Iterable[Violation]:
        for pl, value, s in _polled(replay):
            sends = replay.sent_to.get(value, [])
            if any(x.key == pl.key for x in sends):
                continue
            where = (f"it was sent to {', '.join(sorted({x.key for x in sends}))}" if sends
                     else "no op ever sent it")
            yield QueueViolation(
                self.name, f"p{s.op.process}'s poll returned {short(value, 30)} at {pl.key} offset {s.offset}, but "
                f"{where}: a partition returns only records produced to it.",
                ops=[s.op, *(x.op for x in sends[:3])], key=pl.key, offsets=[s.offset], values=[value])


ALL_RULES = (LostWrite(), Unseen(), Duplicate(), InconsistentOffset(), PollSkip(), NonmonotonicPoll(),
             NonmonotonicSend(), ReorderedSend(), AbortedRead(), UnexpectedValue())
