"""Each partition's log as the history saw it: which value stood at which offset, and who saw it.

Every acknowledged send says "value v is at offset o of partition k", and so does every record a
poll returned. `PartitionLog` gathers those sightings per partition — offset → value → the first
op that showed it there — and the sorted offsets known to hold a record (the version order, in
Jepsen's terms: offsets may have gaps, e.g. for transaction markers, so an offset's place among the
known offsets is what a skip is judged by, never offset arithmetic).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass, field

from kraftlab.checker.history import Op
from kraftlab.checker.queue.observe import Observations, Poll, Send


@dataclass(frozen=True, slots=True)
class Sighting:
    """Value `value` seen at `offset` by `op` (`how`: "acknowledged" to a send, or "polled")."""

    offset: int
    value: Hashable
    op: Op
    how: str


@dataclass
class PartitionLog:
    key: str
    at: dict[int, dict[Hashable, Sighting]] = field(default_factory=dict)
    """offset → value → its first sighting there."""
    places: dict[Hashable, dict[int, Sighting]] = field(default_factory=dict)
    """value → offset → its first sighting there."""
    polled: dict[Hashable, Sighting] = field(default_factory=dict)
    """value → the first poll that returned it (from this partition)."""
    polled_offsets: list[int] = field(default_factory=list)
    """Sorted offsets some poll returned a record at."""
    first_poll_at: dict[int, Sighting] = field(default_factory=dict)
    polled_at: set[tuple[int, Hashable]] = field(default_factory=set)
    """(offset, value) pairs some poll returned."""
    known: list[int] = field(default_factory=list)
    """Sorted offsets known to hold a record (acknowledged or polled)."""
    final_read: Poll | None = None
    """The last completed final read of this partition (from its log start to its high-water mark)."""

    def see(self, s: Sighting) -> None:
        self.at.setdefault(s.offset, {}).setdefault(s.value, s)
        self.places.setdefault(s.value, {}).setdefault(s.offset, s)
        if s.how == "polled":
            self.polled.setdefault(s.value, s)
            self.first_poll_at.setdefault(s.offset, s)
            self.polled_at.add((s.offset, s.value))

    def seal(self) -> None:
        self.known = sorted(self.at)
        self.polled_offsets = sorted(self.first_poll_at)

    def known_between(self, lo: int, hi: int) -> list[int]:
        """Known offsets o with lo <= o < hi."""
        return self.known[bisect.bisect_left(self.known, lo):bisect.bisect_left(self.known, hi)]

    def first_polled_above(self, offset: int) -> Sighting | None:
        """The first poll's sighting at the lowest polled offset above `offset`."""
        i = bisect.bisect_right(self.polled_offsets, offset)
        return self.first_poll_at[self.polled_offsets[i]] if i < len(self.polled_offsets) else None

    @property
    def max_polled(self) -> int:
        return self.polled_offsets[-1] if self.polled_offsets else -1


@dataclass
class QueueReplay:
    """The observations and every partition's log, built once and shared by the rules."""

    obs: Observations
    logs: dict[str, PartitionLog]
    sent_to: dict[Hashable, list[Send]]
    """value → its sends (normally one)."""


def replay(obs: Observations) -> QueueReplay:
    logs: dict[str, PartitionLog] = {}
    sent_to: dict[Hashable, list[Send]] = {}

    def log(key: str) -> PartitionLog:
        pl = logs.get(key)
        if pl is None:
            pl = logs[key] = PartitionLog(key)
        return pl

    for s in obs.sends:
        sent_to.setdefault(s.value, []).append(s)
        pl = log(s.key)
        if s.offset is not None:
            pl.see(Sighting(s.offset, s.value, s.op, "acknowledged"))
    for p in obs.polls:
        for key, records in p.records.items():
            pl = log(key)
            for offset, value in records:
                pl.see(Sighting(offset, value, p.op, "polled"))
        if p.final:
            for key in set(p.records) | set(p.positions):
                log(key).final_read = p
    for pl in logs.values():
        pl.seal()
    return QueueReplay(obs, logs, sent_to)
