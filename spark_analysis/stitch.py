"""The parent's side of a chunked conversion: replays each chunk's process prefixes, in chunk
order, against the state the earlier chunks left (ops still open, unjudged reads pending), and
so pairs the ops that cross a chunk boundary exactly as `checker.history.pair_ops` pairs them
after `checker.judged.client_events`; the ops never completed come last (`finish`).
See spark_analysis.chunks for the chunks' side.
"""

from __future__ import annotations

from typing import Any

from kraftlab.checker.history import Event, Op
from kraftlab.spark_analysis.chunks import ChunkResult, complete, invokes_while_open, no_invocation
from kraftlab.spark_analysis.table import RowSink


class Stitcher:
    """Takes chunk results in order; ops it completes (or that never complete) go to `sink`."""

    def __init__(self, sink: RowSink, source: str) -> None:
        self.sink = sink
        self.source = source
        self.open: dict[Any, tuple[Op, Event]] = {}
        self.skipping: set[Any] = set()
        self.skipped: list[int] = []  # completions dropped here (their unjudged invocation was in an earlier chunk)

    def take(self, r: ChunkResult) -> None:
        for p, pre in r.prefixes.items():
            for kind, ordinal, e in pre.events:
                if kind == "u":
                    self.skipping.add(p)
                elif kind == "d" or p in self.skipping:
                    if kind == "c":
                        self.skipped.append(ordinal)
                    self.skipping.discard(p)
                else:
                    pair = self.open.pop(p, None)
                    if pair is None:
                        assert e is not None
                        raise no_invocation(self.source, e)
                    assert e is not None
                    complete(pair[0], e, ordinal)
                    self.sink.add(*pair)
            if pre.first_invoke is not None:  # from here on the chunk alone knows the process's state
                if p in self.open:
                    raise invokes_while_open(self.source, pre.first_invoke)
                if p in r.dangling:
                    self.open[p] = r.dangling[p]
                if p in r.skipping:
                    self.skipping.add(p)
                else:
                    self.skipping.discard(p)

    def finish(self) -> None:
        """The ops never completed (or ended `info` with nothing after), in invocation order."""
        for pair in sorted(self.open.values(), key=lambda pair: pair[0].call):
            self.sink.add(*pair)
        self.open.clear()
