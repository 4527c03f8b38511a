"""A seeded discrete-event scheduler in virtual time: a heap of (time, sequence, kind, payload)."""

from __future__ import annotations

import heapq
from typing import Any


class EventQueue:
    """Events at equal times run in insertion order, so a run depends only on its seed."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Any]] = []
        self._seq = 0
        self.now = 0

    def push(self, at: int, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, payload))

    def pop(self) -> tuple[int, int, Any]:
        at, _, kind, payload = heapq.heappop(self._heap)
        self.now = at
        return at, kind, payload

    def peek_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
