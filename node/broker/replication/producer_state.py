"""Idempotent producers' state of one partition (Kafka's ProducerStateManager, sans-IO): for each
producer id, its epoch and its last five batches (sequence range and offsets).

A leader checks every produced batch that carries a producer id before appending it (KIP-98):
- a single batch it already holds (same producer epoch and sequences, among the last five) is a
  retry: answered with the offsets it got then, not appended again;
- an older producer epoch than the one it holds: INVALID_PRODUCER_EPOCH (a fenced producer);
- a new epoch must start at sequence 0; a producer it holds nothing of must start at 0 too, else
  UNKNOWN_PRODUCER_ID;
- within an epoch a batch's first sequence follows the last one (wrapping at 2^31 - 1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER (a batch lost in between).
Every replica keeps the state from the batches it appends, as leader or follower, so a follower
that becomes leader goes on deduplicating; after a truncation or a restart it is rebuilt from the
log (`rebuild`). Producer ids are never expired here (Kafka's producer.id.expiration.ms).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kraftlab.node.storage.batches import BatchHeader, CorruptBatch, read_header

BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
MAX_SEQUENCE = 2**31 - 1


def last_sequence(h: BatchHeader) -> int:
    return (h.base_sequence + h.count - 1) % (MAX_SEQUENCE + 1)


def follows(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == MAX_SEQUENCE)


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch: the offsets it was appended at the first time."""

    first_offset: int
    last_offset: int


@dataclass
class _Producer:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))


def headers_of(records: bytes) -> list[BatchHeader]:
    """The batch headers of a record set ([] if it does not parse: the append refuses it then)."""
    out: list[BatchHeader] = []
    pos = 0
    try:
        while pos < len(records):
            h = read_header(records, pos, compressed_ok=True)
            out.append(h)
            pos = h.end_position
    except CorruptBatch:
        return []
    return out


class ProducerState:
    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

    def check(self, headers: Sequence[BatchHeader]) -> Duplicate | ErrorCode | None:
        """What a leader does with a produced record set: None to append it, a Duplicate to answer
        with its first offsets, or the error to answer."""
        if len(headers) == 1 and headers[0].producer_id >= 0:
            dup = self._duplicate(headers[0])
            if dup is not None:
                return dup
        after: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence) after earlier batches
        for h in headers:
            if h.producer_id < 0:
                continue
            known = self._producers.get(h.producer_id)
            epoch, last = after.get(h.producer_id, (known.epoch, known.batches[-1].last_seq)
                                    if known is not None and known.batches else (-1, -1))  # fmt: skip
            if known is not None and h.producer_epoch < known.epoch:
                return ErrorCode.invalid_producer_epoch
            if h.producer_epoch != epoch or last < 0:
                if h.base_sequence != 0:
                    return ErrorCode.out_of_order_sequence_number if epoch >= 0 else ErrorCode.unknown_producer_id
            elif not follows(last, h.base_sequence):
                return ErrorCode.out_of_order_sequence_number
            after[h.producer_id] = (h.producer_epoch, last_sequence(h))
        return None

    def _duplicate(self, h: BatchHeader) -> Duplicate | None:
        known = self._producers.get(h.producer_id)
        if known is None or known.epoch != h.producer_epoch:
            return None
        last = last_sequence(h)
        for b in known.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last:
                return Duplicate(b.first_offset, b.last_offset)
        return None

    def appended(self, headers: Sequence[BatchHeader], first_offset: int | None = None) -> None:
        """Batches now in the log: at their own base offsets, or from `first_offset` on (a leader's
        append assigns the offsets after the headers were read)."""
        offset = first_offset
        for h in headers:
            first = h.base_offset if offset is None else offset
            if offset is not None:
                offset += h.count
            if h.producer_id < 0:
                continue
            known = self._producers.get(h.producer_id)
            if known is None or h.producer_epoch > known.epoch:
                known = self._producers[h.producer_id] = _Producer(h.producer_epoch)
            elif h.producer_epoch < known.epoch:
                continue
            known.batches.append(BatchMeta(h.base_sequence, last_sequence(h), first, first + h.count - 1))

    @classmethod
    def rebuild(cls, read: Callable[[int], bytes], start: int, end: int) -> ProducerState:
        """The state of a log from its batches between `start` and `end` (`read(offset)` returns
        whole batches from the one holding `offset`)."""
        state = cls()
        offset = start
        while offset < end:
            headers = headers_of(read(offset))
            if not headers:
                break
            state.appended(headers)
            offset = headers[-1].next_offset
        return state
