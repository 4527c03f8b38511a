"""The history: Jepsen-style operations streamed to `history.jsonl` as they happen.

Each line is one op (docs/contracts.md), in the history contract's shape (`checker.history.Event`,
whose `to_json` is the one place the line's fields are named). Writes are serialised by a lock (client tasks and the
nemesis thread share one writer), flushed after every line so a killed runner leaves a history
that `kraftlab analyze` can still check, and indexed in file order. Reading a history back is
the checker's job (`checker.history`; `load_jsonl_tolerant` for a run's own file).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Literal, TextIO

from kraftlab.checker.history import Event

OpType = Literal["invoke", "ok", "fail", "info"]


class HistoryWriter:
    """Appends ops to a JSONL file (or any text stream), assigning index and time."""

    def __init__(self, path: Path | str | None = None, *, stream: TextIO | None = None,
                 start_ns: int | None = None) -> None:
        if (path is None) == (stream is None):
            raise ValueError("give exactly one of path or stream")
        self._own = stream is None
        self._out: TextIO = (
            open(path, "a", encoding="utf-8") if path is not None else stream  # type: ignore[assignment]  # noqa: SIM115
        )
        self._lock = threading.Lock()
        self._next_index = 0
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return time.monotonic_ns() - self.start_ns

    def record(self, process: int | str, type_: OpType, f: str, value: Any = None, *,
               node: str | None = None, error: str | None = None, **extra: Any) -> dict[str, Any]:
        """Append one op; `extra` fields (e.g. `workload`) are written beside the standard ones."""
        with self._lock:
            op = Event(self._next_index, process, type_, f, value, self.now(), node, error, extra=extra).to_json()
            self._next_index += 1
            self._out.write(json.dumps(op, separators=(",", ":"), default=str) + "\n")
            self._out.flush()
        return op

    def close(self) -> None:
        with self._lock:
            if self._own and not self._out.closed:
                self._out.close()
