"""Brokers' log directories in the cluster simulator, and their failures (KIP-858).

Each broker gets one to three log directories (drawn per seed, from a generator of their own so
the rest of the seed's schedule stays as it was). Now and then a broker with at least two healthy
directories loses one: its heartbeats name it in OfflineLogDirs from then on, and while it is
broken a restarted broker cannot open it, so it does not register it. Later the directory is
repaired — the same disk back (the same directory id) or a new disk formatted anew (a new id) —
and the broker restarts to register it again.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field


@dataclass
class LogDirs:
    """The directories each broker has, and which of them are broken."""

    rng: random.Random
    dirs: dict[int, list[uuid.UUID]] = field(default_factory=dict)
    broken: dict[int, set[uuid.UUID]] = field(default_factory=dict)
    failures: int = 0
    repairs: int = 0
    reformatted: int = 0

    @classmethod
    def drawn(cls, rng: random.Random, brokers: list[int]) -> LogDirs:
        self = cls(rng)
        for b in brokers:
            self.dirs[b] = [self._new_id() for _ in range(rng.choice([1, 2, 2, 3]))]
            self.broken[b] = set()
        return self

    def _new_id(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def registered(self, broker: int) -> tuple[uuid.UUID, ...]:
        """The directories a starting broker registers: every one it can open."""
        return tuple(d for d in self.dirs[broker] if d not in self.broken[broker])

    def fail(self, broker: int) -> uuid.UUID | None:
        """Break one of the broker's healthy directories, keeping at least one healthy (a broker
        with none left stops; that is a crash, drawn elsewhere); None when it has too few."""
        healthy = list(self.registered(broker))
        if len(healthy) < 2:
            return None
        d = self.rng.choice(healthy)
        self.broken[broker].add(d)
        self.failures += 1
        return d

    def repair(self, broker: int) -> bool:
        """Repair the broker's broken directories: the same disk back, or a new one formatted anew
        (a new directory id); True when there was something to repair."""
        if not self.broken[broker]:
            return False
        for d in sorted(self.broken[broker]):
            if self.rng.random() < 0.5:
                i = self.dirs[broker].index(d)
                self.dirs[broker][i] = self._new_id()
                self.reformatted += 1
        self.broken[broker].clear()
        self.repairs += 1
        return True
