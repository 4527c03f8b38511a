"""Helpers every workload's generator uses: tagged invocations, broker-read marks, final reads.

Reads served by brokers are eventually consistent in Kafka (a broker's metadata image may lag
the controller), so every broker read's invocation value names the broker it went to and says
`"broker_read": true`; reads of the final phase (after heal and recovery, one per broker, when
every broker has caught up) also say `"final": true`. A runner gives the linearizability
checker the writes plus one broker's final reads (`checker.judged`, `judged_final_broker`);
`checker.broker_reads` judges every broker read against the committed metadata log.
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


def broker_read(workload: str, f: str, node: str, final: bool = False, judged: bool = True,
                **value: Any) -> Invocation:
    """A read served by broker `node`; a final one with `judged=False` is left out of the
    linearizability check (`"judged": false`, see `judged_final_broker`)."""
    v: dict[str, Any] = {**value, "node": node, "broker_read": True}
    if final:
        v["final"] = True
        if not judged:
            v["judged"] = False
    return op(workload, f, v)


def judged_final_broker(brokers: Sequence[str]) -> str:
    """The one broker whose final reads the linearizability checker judges (the others' are judged
    by `checker.broker_reads`, as every broker read is). Final reads of several brokers cannot all
    be held to one linear order: an op that ended in doubt may still take effect while they run —
    a request the nemesis held in a TCP retransmission, delivered after the heal — and brokers
    apply it a few hundred milliseconds apart, so one shows the old state after another showed the
    new. One broker's reads can always be ordered against such a late write; they still catch an
    acknowledged write that was lost."""
    return sorted(brokers)[0]


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
