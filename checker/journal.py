"""Node journals (docs/contracts.md): JSON Lines of what each node did, read into `Entry`s.

Every entry keeps its file and line so a violation can point at the exact lines. Order within
one journal is the node's own order and is trusted; the nodes' clocks are not (skew). But nodes
that share one kernel (the default namespace lab) journal its unskewed CLOCK_MONOTONIC as `rmono`
and its `boot_id` on `start`: when every journal of a run does, `Journals.shared_clock` is true and
rules may order events of different nodes by `rmono` (real happens-before: a follower journals its
flush before it sends the Fetch that acknowledges it, the leader its HW after it received it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.checker.history import HistoryError

COMMON = ("ts", "mono", "node", "ev")


@dataclass(slots=True)
class Entry:
    node: int
    ev: str
    ts: float
    mono: int
    fields: dict[str, Any]
    file: str = "<memory>"
    line: int = 0
    seq: int = 0
    rmono: int | None = None
    """The host's unskewed monotonic clock (ns) when the node journalled it."""

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where(), "node": self.node, "ev": self.ev, "ts": self.ts, **self.fields}


@dataclass
class Journals:
    """All nodes' journals: node id → entries in the node's own order."""

    by_node: dict[int, list[Entry]] = field(default_factory=dict)

    @property
    def shared_clock(self) -> bool:
        """Every entry carries `rmono` and every `start` the same `boot_id`: one kernel's monotonic
        clock orders the events of all nodes."""
        boots = {e.get("boot_id") for e in self.all() if e.ev == "start"}
        return len(boots) == 1 and None not in boots and all(e.rmono is not None for e in self.all())

    def all(self) -> Iterable[Entry]:
        for node in sorted(self.by_node):
            yield from self.by_node[node]


def entry_from(raw: dict[str, Any], file: str = "<memory>", line: int = 0, seq: int = 0) -> Entry:
    for key in COMMON:
        if key not in raw:
            raise HistoryError(file, line, f"journal entry without {key!r}")
    if not isinstance(raw["node"], int):
        raise HistoryError(file, line, "node must be an integer id")
    fields = {k: v for k, v in raw.items() if k not in COMMON and k != "rmono"}
    rmono = raw.get("rmono")
    return Entry(raw["node"], str(raw["ev"]), raw["ts"], raw["mono"], fields, file, line, seq,
                 int(rmono) if isinstance(rmono, int) else None)


def read_journal(path: str | Path) -> list[Entry]:
    out: list[Entry] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise HistoryError(path, lineno, f"not JSON: {exc.msg}") from None
            if not isinstance(raw, dict):
                raise HistoryError(path, lineno, "a journal entry must be a JSON object")
            out.append(entry_from(raw, str(path), lineno, len(out)))
    return out


def load_journals(paths: Iterable[str | Path]) -> Journals:
    """Read journal files; several files of one node (restarts) are concatenated in order."""
    js = Journals()
    for p in paths:
        for e in read_journal(p):
            js.by_node.setdefault(e.node, []).append(e)
    return js


def journals_from(entries: Iterable[dict[str, Any]], file: str = "<memory>") -> Journals:
    """Build Journals from dicts (tests, hand-built journals); line = position in the list."""
    js = Journals()
    for i, raw in enumerate(entries, 1):
        e = entry_from(raw, file, i, i)
        js.by_node.setdefault(e.node, []).append(e)
    return js


def cut_at(entries: list[Entry], events: tuple[str, ...]) -> list[list[Entry]]:
    """One node's journal cut before each entry whose `ev` is in `events`: ("start",) gives its
    process lives (each a new clock), ("start", "role") its terms of activity (a leadership and the
    decisions journalled in it)."""
    parts: list[list[Entry]] = [[]]
    for e in entries:
        if e.ev in events:
            parts.append([])
        parts[-1].append(e)
    return parts


def field_problems(e: Entry, wanted: Mapping[str, Callable[[Any], bool]]) -> list[str]:
    """What is wrong with `e`'s fields against `wanted` (field → test of its value), in a violation's
    words: each field missing, or present with a value its test refuses."""
    return [f"`{k}` is {'missing' if k not in e.fields else repr(e.fields[k])}"
            for k, ok in wanted.items() if k not in e.fields or not ok(e.fields[k])]
