"""The node journal: JSON Lines of what the node did that a checker must see (docs/contracts.md).

Every line carries `ts` (the node's wall clock in ms), `mono` (its monotonic clock in ns), `rmono`
(the host's monotonic clock in ns, no skew: nodes that share a kernel can be ordered by it), `node`
and `ev`, then the event's fields; a file journal's `start` lines also carry the host's `boot_id`.
Each line is written with one `write(2)` on a file opened with O_APPEND, so a reader tailing the
file sees whole lines or nothing of a line; nothing is buffered in the process, so a SIGKILL loses
no journal line already written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from kraftlab.node.clock import Clock


class Journal(Protocol):
    """Where the node's drivers report events (`ev` plus the fields of docs/contracts.md)."""

    def write(self, ev: str, **fields: Any) -> None: ...


def _line(clock: Clock, node_id: int, ev: str, fields: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"ts": clock.wall_ms(), "mono": clock.mono_ns(), "rmono": clock.real_mono_ns(),
                             "node": node_id, "ev": ev}
    entry.update(fields)
    return entry


def boot_id() -> str | None:
    """The kernel's boot id: journals with the same one share CLOCK_MONOTONIC (None if unknown)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


class MemoryJournal:
    """Keeps journal entries in a list (tests, the simulator)."""

    def __init__(self, clock: Clock, node_id: int) -> None:
        self.clock = clock
        self.node_id = node_id
        self.entries: list[dict[str, Any]] = []

    def write(self, ev: str, **fields: Any) -> None:
        self.entries.append(_line(self.clock, self.node_id, ev, fields))


class JournalWriter:
    """Appends journal lines to a file, one whole line per system call."""

    def __init__(self, path: str | Path, clock: Clock, node_id: int) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.node_id = node_id
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._boot_id = boot_id()

    def write(self, ev: str, **fields: Any) -> None:
        if self._fd is None:
            raise ValueError(f"journal {self.path} is closed")
        if ev == "start" and self._boot_id is not None:
            fields = {**fields, "boot_id": self._boot_id}
        data = json.dumps(_line(self.clock, self.node_id, ev, fields), separators=(",", ":"), default=str)
        buf = (data + "\n").encode()
        written = os.write(self._fd, buf)
        while written < len(buf):  # only on a full disk or a signal; keep the line whole
            written += os.write(self._fd, buf[written:])

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_journal(path: str | Path) -> list[dict[str, Any]]:
    """Every complete line of a journal (a partial last line, still being written, is skipped)."""
    entries: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                entries.append(json.loads(line))
    return entries
