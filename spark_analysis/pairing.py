"""Streaming pairing of history events into ops, for histories too large to hold in memory.

It yields exactly the ops `checker.history.pair_ops` returns for the same events (same ids,
positions, statuses, outputs), but one at a time as each completes, holding only the open
invocations. Positions (`call`, `ret`) count the events the caller passes in, so filter first
(`client_events`) to get the positions of the linearizability checker's input. A malformed
sequence raises `checker.history.HistoryError`, as pair_ops does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from checker.history import Event, HistoryError, Op
from checker.judged import client_events

__all__ = ["client_events", "iter_ops"]

def iter_ops(events: Iterable[Event], source: str = "<stream>") -> Iterator[tuple[Op, Event]]:
    """(op, its invocation event) as each op completes; ops never completed (or ended `info`
    with no later event) come last, in invocation order."""
    open_: dict[Any, tuple[Op, Event]] = {}
    n = 0
    for pos, e in enumerate(events):
        if e.type == "invoke":
            if e.process in open_:
                raise HistoryError(source, e.line, f"process {e.process} invokes while its op is still open")
            op = Op(n, e.process, e.f, e.value, None, "info", pos, None, None, e.time, None, e.line, 0)
            open_[e.process] = (op, e)
            n += 1
            continue
        pair = open_.pop(e.process, None)
        if pair is None:
            raise HistoryError(source, e.line, f"{e.type} completion of process {e.process} with no open invocation")
        op = pair[0]
        op.status, op.output, op.error, op.ret_time, op.ret_line = e.type, e.value, e.error, e.time, e.line
        if e.type != "info":
            op.ret = pos
        yield pair
    yield from sorted(open_.values(), key=lambda p: p[0].id)
