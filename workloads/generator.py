"""Jepsen-style operation generators: what each client process does next.

A generator is asked for the next invocation of a process at a time; it answers with an
`Invocation`, `None` when it is exhausted, or `Sleep(seconds)` to be asked again later.
Combinators: `mix` (weighted random choice), `reserve` (some workers for one generator, the
rest for another), `stagger` (a rate: random pauses averaging `dt`), `limit` (at most n ops),
`time_limit`, `repeat` (a fixed op), `each_node_once` (final reads: one op per node). All
randomness comes from the seeded `random.Random` in the context.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kraftlab.workloads.client import Invocation


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(slots=True)
class Context:
    """What a generator sees: time since the phase started, the asking process and its node."""

    time: float
    process: int
    worker: int
    node: str
    nodes: Sequence[str]
    rng: random.Random


Answer = Invocation | Sleep | None


class Generator(Protocol):
    def next_op(self, ctx: Context) -> Answer: ...


@dataclass
class FnGen:
    """Calls `fn(ctx)` for every op: the building block of workload-specific generators."""

    fn: Callable[[Context], Invocation | None]

    def next_op(self, ctx: Context) -> Answer:
        return self.fn(ctx)


@dataclass
class Repeat:
    op: Invocation

    def next_op(self, ctx: Context) -> Answer:
        return self.op


@dataclass
class Mix:
    """A weighted random choice between generators; exhausted ones drop out."""

    gens: list[Generator]
    weights: list[float] | None = None

    def next_op(self, ctx: Context) -> Answer:
        gens = list(self.gens)
        weights = list(self.weights) if self.weights else [1.0] * len(gens)
        while gens:
            i = ctx.rng.choices(range(len(gens)), weights)[0]
            ans = gens[i].next_op(ctx)
            if ans is not None:
                return ans
            idx = self.gens.index(gens[i])
            del self.gens[idx]
            if self.weights:
                del self.weights[idx]
            del gens[i], weights[i]
        return None


@dataclass
class Reserve:
    """Jepsen's `reserve`: workers below `count` run `reserved`, the others `rest`. A generator whose
    ops can each hold a worker for seconds (a consumer waiting out its poll under a partition) would,
    mixed in, come to occupy nearly every worker — each worker ends up parked in one of its ops —
    and starve the quick ones; reserved, it keeps its own workers and the rest keep theirs."""

    count: int
    reserved: Generator
    rest: Generator

    def next_op(self, ctx: Context) -> Answer:
        return (self.reserved if ctx.worker < self.count else self.rest).next_op(ctx)


@dataclass
class Stagger:
    """Between two ops of one process, sleep a random time in [0, 2·dt): about 1/dt ops/s each."""

    gen: Generator
    dt: float
    _due: dict[int, float] = field(default_factory=dict)

    def next_op(self, ctx: Context) -> Answer:
        due = self._due.get(ctx.worker)
        if due is None or ctx.time >= due:
            self._due[ctx.worker] = ctx.time + ctx.rng.uniform(0, 2 * self.dt)
            return self.gen.next_op(ctx)
        return Sleep(due - ctx.time)


@dataclass
class Limit:
    gen: Generator
    n: int

    def next_op(self, ctx: Context) -> Answer:
        if self.n <= 0:
            return None
        ans = self.gen.next_op(ctx)
        if isinstance(ans, Invocation):
            self.n -= 1
        return ans


@dataclass
class TimeLimit:
    gen: Generator
    seconds: float

    def next_op(self, ctx: Context) -> Answer:
        if ctx.time >= self.seconds:
            return None
        ans = self.gen.next_op(ctx)
        if isinstance(ans, Sleep):
            return Sleep(min(ans.seconds, max(0.0, self.seconds - ctx.time)))
        return ans


@dataclass
class EachNodeOnce:
    """One op per node, each issued by a process bound to that node (final reads)."""

    make: Callable[[str], Invocation]
    _done: set[str] = field(default_factory=set)

    def next_op(self, ctx: Context) -> Answer:
        if ctx.node in self._done:
            return None if self._done >= set(ctx.nodes) else Sleep(0.05)
        self._done.add(ctx.node)
        return self.make(ctx.node)
