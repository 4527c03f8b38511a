"""Reading a history for the Spark path: events streamed from any supported format, with a
torn last line (a runner killed mid-write) dropped with a note rather than failing the check,
as `kraftlab analyze` does for the single-process path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kraftlab.checker.formats import detect_format, read_history
from kraftlab.checker.history import Event, History, iter_jsonl_tolerant


def read_events(history: str | Path, fmt: str | None = None, notes: list[str] | None = None) -> Iterator[Event]:
    """Events of any supported format; the project's JSON Lines are streamed."""
    path = Path(history)
    fmt = fmt or detect_format(path)
    if fmt != "jsonl":
        yield from read_history(path, fmt).events
        return
    yield from iter_jsonl_tolerant(path, notes if notes is not None else [])


def load_history_tolerant(history: str | Path, fmt: str | None = None) -> History:
    path = Path(history)
    return History(list(read_events(path, fmt)), str(path), fmt or detect_format(path))
