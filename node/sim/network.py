"""The simulated network: per-message delay, drop, duplication and reordering, and partitions
(including one-way) as a multiset of blocked directed links."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass


@dataclass(slots=True)
class LinkFaults:
    drop: float = 0.0
    duplicate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 5


class Network:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.faults = LinkFaults()
        self._blocked: Counter[tuple[int, int]] = Counter()

    def block(self, src: int, dst: int) -> None:
        self._blocked[(src, dst)] += 1

    def unblock(self, src: int, dst: int) -> None:
        if self._blocked[(src, dst)] > 1:
            self._blocked[(src, dst)] -= 1
        else:
            self._blocked.pop((src, dst), None)

    def heal(self) -> None:
        self._blocked.clear()
        self.faults = LinkFaults()

    def blocked(self, src: int, dst: int) -> bool:
        return (src, dst) in self._blocked

    def connected(self, a: int, b: int) -> bool:
        return (a, b) not in self._blocked and (b, a) not in self._blocked

    def delays(self, src: int, dst: int) -> list[int]:
        """Delivery delays for one message sent now: [] when dropped, two when duplicated."""
        if self._blocked and (src, dst) in self._blocked:
            return []
        f = self.faults
        rng = self.rng
        if f.drop and rng.random() < f.drop:
            return []
        copies = 2 if f.duplicate and rng.random() < f.duplicate else 1
        return [rng.randint(f.min_delay_ms, f.max_delay_ms) for _ in range(copies)]
