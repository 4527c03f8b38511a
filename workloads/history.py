"""The history: Jepsen-style operations streamed to `history.jsonl` as they happen.

Each line is one op (docs/contracts.md). Writes are serialised by a lock (client tasks and the
nemesis thread share one writer), flushed after every line so a killed runner leaves a history
that `kraftlab analyze` can still check, and indexed in file order.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})


@dataclass(slots=True)
class Op:
    """One history entry. `process` is an int for clients and "nemesis" for faults."""

    process: int | str
    type: OpType
    f: str
    value: Any = None
    node: str | None = None
    error: str | None = None
    index: int = -1
    time: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
            "node": self.node,
            "error": self.error,
        }
        d.update(self.extra)
        return d


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
        self.ops: list[Op] | None = None  # set to a list to also keep ops in memory

    def now(self) -> int:
        """Nanoseconds since the test started."""
        return time.monotonic_ns() - self.start_ns

    def append(self, op: Op) -> Op:
        with self._lock:
            op.index = self._next_index
            self._next_index += 1
            op.time = self.now()
            self._out.write(json.dumps(op.to_json(), separators=(",", ":"), default=str) + "\n")
            self._out.flush()
            if self.ops is not None:
                self.ops.append(op)
        return op

    def record(self, process: int | str, type_: OpType, f: str, value: Any = None, *,
               node: str | None = None, error: str | None = None, **extra: Any) -> Op:
        return self.append(Op(process=process, type=type_, f=f, value=value, node=node, error=error,
                              extra=extra))

    def close(self) -> None:
        with self._lock:
            if self._own and not self._out.closed:
                self._out.close()


def read_history(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield the ops of a history file; a torn last line (a killed writer) is skipped, any other
    malformed line raises ValueError naming the file and line."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    last = len(lines) - 1
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            op = json.loads(line)
        except json.JSONDecodeError as e:
            if n - 1 == last:  # no trailing newline: the writer died mid-line
                return
            raise ValueError(f"{path}:{n}: not JSON: {e}") from None
        if not isinstance(op, dict) or op.get("type") not in OP_TYPES:
            raise ValueError(f"{path}:{n}: not a history op (type must be one of {sorted(OP_TYPES)})")
        yield op
