"""Helpers every workload's generator uses: tagged invocations, broker-read marks, final reads.

Reads served by brokers are eventually consistent in Kafka (a broker's metadata image may lag
the controller), so every broker read's invocation value names the broker it went to and says
`"broker_read": true`; reads of the final phase (after heal and recovery, one per broker, when
every broker has caught up) also say `"final": true`. A runner gives the linearizability
checker the writes plus the final reads (`checker.judged`); `checker.broker_reads` judges the
topics and isr broker reads against the committed metadata log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kraftlab.workloads.client import Invocation
from kraftlab.workloads.generator import Answer, Context


def op(workload: str, f: str, value: Any = None) -> Invocation:
    """An invocation of `workload` (recorded as the history field `workload`)."""
    return Invocation(f, value, {"workload": workload})


def broker_read(workload: str, f: str, node: str, final: bool = False, **value: Any) -> Invocation:
    v: dict[str, Any] = {**value, "node": node, "broker_read": True}
    if final:
        v["final"] = True
    return op(workload, f, v)


def read_node(ctx: Context, brokers: Sequence[str]) -> str:
    """The broker a process reads from: its own node's, else a random one."""
    return ctx.node if ctx.node in brokers else ctx.rng.choice(list(brokers))


@dataclass
class OncePer:
    """One op per item (final reads: one per broker), issued by whichever process asks. `items` may
    be a function, called when the first op is asked for: the items a workload has at the end of
    its run (one that rotates its keys knows them only then)."""

    items: Sequence[str] | Callable[[], Sequence[str]]
    make: Callable[[str], Invocation]
    _next: int = 0

    def next_op(self, ctx: Context) -> Answer:
        if callable(self.items):
            self.items = list(self.items())
        if self._next >= len(self.items):
            return None
        self._next += 1
        return self.make(self.items[self._next - 1])
