"""One chunk of a history scanned on its own (so that a large JSON Lines history is converted
on every core): the ops that start and end inside it go to the chunk's Parquet file; what the
chunk cannot decide alone goes back to the parent (spark_analysis.stitch).

Ordinals: an event's ordinal is its line number in a JSON Lines file (its rank from 1 in other
formats), known without reading what comes before. An op's `call`, `ret` and `id` are the
ordinals of its invocation and completion: ordered exactly as `checker.history.pair_ops`'s
positions (which count only judged client events), so the per-key search gives the same
verdict; the chunk lists the ordinals that are no judged client event (`skipped`: nemesis ops,
unjudged reads and their completions, blank lines) and those of the judged invocations, from
which the exact positions and op ids follow for explanations (spark_analysis.convert.to_positions).

Pairing is `checker.judged.client_events` then `pair_ops`, per process. Until a process's first
judged invocation in the chunk, what its events mean depends on the state before the chunk (an
op still open, an unjudged read pending): those events (its *prefix*) go to the parent in order,
with the judged ops still open at the chunk's end (*dangling*) and the processes with an unjudged
read pending there; the parent replays them chunk after chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.checker.history import Event, HistoryError, Op, parse_jsonl_line, torn_line_note
from kraftlab.checker.judged import judged
from kraftlab.spark_analysis.table import ModelSpec, RowSink

NO_INDEX = -1
"""The `index` a JSON Lines event without one gets here; the parent sets its real one."""


def invocation_op(e: Event, ordinal: int) -> Op:
    return Op(ordinal, e.process, e.f, e.value, None, "info", ordinal, None, None, e.time, None, e.line, 0)


def complete(op: Op, e: Event, ordinal: int) -> None:
    """Fill in an op's completion, as pair_ops does (an `info` completion leaves `ret` open)."""
    op.status, op.output, op.error, op.ret_time, op.ret_line = e.type, e.value, e.error, e.time, e.line
    if e.type != "info":
        op.ret = ordinal


def invokes_while_open(source: str, e: Event) -> HistoryError:
    return HistoryError(source, e.line, f"process {e.process} invokes while its op is still open")


def no_invocation(source: str, e: Event) -> HistoryError:
    return HistoryError(source, e.line, f"{e.type} completion of process {e.process} with no open invocation")


@dataclass
class Prefix:
    """A process's events before its first judged invocation in the chunk: ("u", ordinal, None)
    an unjudged invocation, ("d", ordinal, None) a completion dropped as its, ("c", ordinal,
    event) a completion of nothing opened in the chunk; and that first judged invocation."""

    events: list[tuple[str, int, Event | None]] = field(default_factory=list)
    first_invoke: Event | None = None


@dataclass
class ChunkResult:
    index: int
    prefixes: dict[Any, Prefix]
    dangling: dict[Any, tuple[Op, Event]]
    skipping: set[Any]
    skipped: list[int]
    invocations: list[int]
    blanks: list[int]
    nemesis: list[tuple[int, Event]]
    events: int
    ops: int
    rows: int
    notes: list[str]
    files: list[tuple[str, list[int]]]
    whole: set[str]


class ChunkScanner:
    """Feed it a chunk's events in order; see the module docstring."""

    def __init__(self, sink: RowSink, source: str) -> None:
        self.sink = sink
        self.source = source
        self.open: dict[Any, tuple[Op, Event]] = {}
        self.skipping: set[Any] = set()
        self.seen: set[Any] = set()  # processes with a judged invocation in the chunk
        self.prefixes: dict[Any, Prefix] = {}
        self.skipped: list[int] = []
        self.invocations: list[int] = []  # the judged ones
        self.blanks: list[int] = []
        self.nemesis: list[tuple[int, Event]] = []
        self.events = 0
        self.notes: list[str] = []

    def _prefix(self, p: Any) -> Prefix:
        pre = self.prefixes.get(p)
        if pre is None:
            pre = self.prefixes[p] = Prefix()
        return pre

    def blank(self, ordinal: int) -> None:
        self.blanks.append(ordinal)
        self.skipped.append(ordinal)

    def feed(self, ordinal: int, e: Event) -> None:
        self.events += 1
        p = e.process
        if p == "nemesis":
            self.nemesis.append((ordinal, e))
            self.skipped.append(ordinal)
        elif e.type == "invoke":
            self._invoke(ordinal, e)
        else:
            self._complete(ordinal, e)

    def _invoke(self, ordinal: int, e: Event) -> None:
        p = e.process
        if not judged(e):
            self.skipping.add(p)
            self.skipped.append(ordinal)
            if p not in self.seen:
                self._prefix(p).events.append(("u", ordinal, None))
            return
        self.skipping.discard(p)
        if p not in self.seen:
            self.seen.add(p)
            self._prefix(p).first_invoke = e
        elif p in self.open:
            raise invokes_while_open(self.source, e)
        self.open[p] = (invocation_op(e, ordinal), e)
        self.invocations.append(ordinal)

    def _complete(self, ordinal: int, e: Event) -> None:
        p = e.process
        if p in self.skipping:
            self.skipping.discard(p)
            self.skipped.append(ordinal)
            if p not in self.seen:
                self._prefix(p).events.append(("d", ordinal, None))
            return
        pair = self.open.pop(p, None)
        if pair is not None:
            complete(pair[0], e, ordinal)
            self.sink.add(*pair)
        elif p in self.seen:
            raise no_invocation(self.source, e)
        else:
            self._prefix(p).events.append(("c", ordinal, e))

    def result(self, index: int) -> ChunkResult:
        return ChunkResult(index, self.prefixes, self.open, self.skipping, self.skipped, self.invocations,
                           self.blanks, self.nemesis,
                           self.events, self.sink.ops, self.sink.rows, self.notes,
                           self.sink.files, self.sink.whole)


@dataclass(frozen=True)
class Failure:
    """A HistoryError as a worker returns it (an exception with custom arguments does not unpickle)."""

    path: str
    line: int
    reason: str

    def error(self) -> HistoryError:
        return HistoryError(self.path, self.line, self.reason)


@dataclass(frozen=True)
class ChunkTask:
    """Bytes [start, end) of a JSON Lines file, whose first line is `first_line`."""

    path: str
    index: int
    start: int
    end: int
    first_line: int
    specs: tuple[dict[str, Any], ...]
    buckets: int
    out: str
    last: bool


def scan_events(events: Iterable[tuple[int, Event]], sink: RowSink, source: str, index: int,
                out: Path | None) -> ChunkResult:
    """Scan (ordinal, event) pairs (a non-JSON Lines history: one chunk) and write the file."""
    scanner = ChunkScanner(sink, source)
    for ordinal, e in events:
        scanner.feed(ordinal, e)
    if out is not None:
        sink.write(out)
    return scanner.result(index)


def scan_jsonl_chunk(task: ChunkTask) -> ChunkResult | Failure:
    """The worker: parse, pair and write a chunk (`ops/part-NNNNN.parquet`). A malformed history
    comes back as a `Failure`.
    A torn last line (no newline after it, not JSON) is dropped with a note, as the runner's
    reader does."""
    with open(task.path, "rb") as fh:
        fh.seek(task.start)
        lines = fh.read(task.end - task.start).decode("utf-8").split("\n")
    torn = lines.pop() if lines else ""  # what follows the last newline: "" unless the file ends without one
    scanner = ChunkScanner(RowSink([ModelSpec.from_json(s) for s in task.specs], task.buckets), task.path)
    try:
        lineno = task.first_line
        for lineno, text in enumerate(lines, task.first_line):
            if text.strip():
                scanner.feed(lineno, parse_jsonl_line(text, task.path, lineno, NO_INDEX))
            else:
                scanner.blank(lineno)
        if torn.strip():
            lineno = task.first_line + len(lines)
            try:
                scanner.feed(lineno, parse_jsonl_line(torn, task.path, lineno, NO_INDEX))
            except HistoryError:
                if not task.last:
                    raise
                scanner.notes.append(torn_line_note(task.path, lineno))
    except HistoryError as exc:
        return Failure(exc.path, exc.line, exc.reason)
    scanner.sink.write(Path(task.out))
    return scanner.result(task.index)
