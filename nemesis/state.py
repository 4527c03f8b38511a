"""The faults in force, kept in memory and persisted to a `Ledger` on every change.

The persisted form is what `nemesis.cleanup.clean_lab` reads after a killed run. Intent is saved
*before* a fault is applied, so a run killed mid-apply still leaves enough to undo it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kraftlab.nemesis.ports import Ledger

KINDS: tuple[str, ...] = ("partition", "loss", "qdisc", "clock", "clock_step", "process", "disk", "disk_rules",
                         "membership")


class FaultState:
    def __init__(self, ledger: Ledger, lab: str) -> None:
        self._ledger = ledger
        self._lock = threading.RLock()
        loaded = ledger.load()
        self._data: dict[str, Any] = loaded if loaded.get("lab") == lab else {"lab": lab}
        for kind in KINDS:
            self._data.setdefault(kind, {})

    def get(self, kind: str) -> dict[str, Any]:
        """A copy of one kind's entries."""
        with self._lock:
            return copy.deepcopy(self._data[kind])

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._data)

    def update(self, kind: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Mutate one kind's entries in place and persist the whole state."""
        with self._lock:
            change(self._data[kind])
            self._ledger.save(self._data)

    def merge(self, kind: str, entries: dict[str, Any]) -> None:
        """Set several entries of one kind with one durable write."""
        self.update(kind, lambda d: d.update(entries))

    def remove(self, kind: str, keys: Iterable[str]) -> None:
        """Drop several entries of one kind with one durable write."""
        gone = list(keys)

        def drop_all(d: dict[str, Any]) -> None:
            for k in gone:
                d.pop(k, None)

        if gone:
            self.update(kind, drop_all)

    def put(self, kind: str, key: str, value: Any) -> None:
        self.update(kind, lambda d: d.__setitem__(key, value))

    def drop(self, kind: str, key: str) -> None:
        self.update(kind, lambda d: d.pop(key, None))

    def clear(self, kind: str) -> None:
        self.update(kind, lambda d: d.clear())

    def in_force(self) -> dict[str, Any]:
        """Only the kinds with something in force."""
        with self._lock:
            return {k: copy.deepcopy(v) for k, v in self._data.items() if k in KINDS and v}
