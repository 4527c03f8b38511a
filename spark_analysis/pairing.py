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

CHECKABLE_FINAL_READS = frozenset({("topics", "list"), ("topics", "describe")})
"""Final broker reads a model can judge (the workloads' catalog says the same)."""


def _is_broker_read(e: Event) -> bool:
    v = e.value
    if not isinstance(v, dict) or not v.get("broker_read"):
        return False
    return not (v.get("final") and (e.extra.get("workload"), e.f) in CHECKABLE_FINAL_READS)


def client_events(events: Iterable[Event], nemesis: list[Event] | None = None) -> Iterator[Event]:
    """The events a linearizability checker judges: no nemesis ops (appended to `nemesis` when
    given) and no reads a broker served (eventually consistent by design: they go to the
    staleness statistics instead), with their completions, except the final reads a model can
    judge."""
    skipped: set[Any] = set()
    for e in events:
        if e.process == "nemesis":
            if nemesis is not None:
                nemesis.append(e)
            continue
        if e.type == "invoke":
            if _is_broker_read(e):
                skipped.add(e.process)
                continue
            skipped.discard(e.process)
        elif e.process in skipped:
            skipped.discard(e.process)
            continue
        yield e


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
