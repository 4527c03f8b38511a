"""Reading a history for the Spark path: events streamed from any supported format, with a
torn last line (a runner killed mid-write) dropped with a note rather than failing the check,
as `kraftlab analyze` does for the single-process path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kraftlab.checker.formats import detect_format, read_history
from kraftlab.checker.history import Event, History, HistoryError, iter_jsonl


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


def _line_count(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def read_events(history: str | Path, fmt: str | None = None, notes: list[str] | None = None) -> Iterator[Event]:
    """Events of any supported format; the project's JSON Lines are streamed."""
    path = Path(history)
    fmt = fmt or detect_format(path)
    if fmt != "jsonl":
        yield from read_history(path, fmt).events
        return
    try:
        yield from iter_jsonl(path)
    except HistoryError as exc:
        if _ends_with_newline(path) or exc.line != _line_count(path):
            raise
        if notes is not None:
            notes.append(f"{path}:{exc.line}: torn last line dropped (the runner was killed mid-write)")


def load_history_tolerant(history: str | Path, fmt: str | None = None) -> History:
    path = Path(history)
    return History(list(read_events(path, fmt)), str(path), fmt or detect_format(path))
