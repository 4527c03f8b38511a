"""Partition shapes as grudges — receiving node → the nodes whose traffic it drops — over any node
ids (host names in the nemesis, integer ids in the node's simulator): pure functions shared by
both, so a shape means the same thing on a lab and in a simulation. It lives in the node (its
simulator needs it; the node imports nothing of the suite) and is part of the node's surface to the
suite, beside `admin` and the protocol client (tests/test_import_boundaries.py). Randomness comes from the
`random.Random` passed in; a grudge never names a node in its own set.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


class TopologyError(ValueError):
    """A topology cannot be built from these nodes (says why)."""


def complete(components: Iterable[Iterable[N]]) -> dict[N, frozenset[N]]:
    """Every node drops every node outside its own component (components must be disjoint)."""
    comps = [frozenset(c) for c in components]
    everyone: frozenset[N] = frozenset().union(*comps) if comps else frozenset()
    grudge: dict[N, frozenset[N]] = {}
    for comp in comps:
        for node in comp:
            others = everyone - comp
            if others:
                grudge[node] = others
    return grudge


def halves(nodes: Sequence[N]) -> dict[N, frozenset[N]]:
    """The first ⌊n/2⌋ nodes (in the given order) against the rest."""
    need(nodes, 2)
    mid = len(nodes) // 2
    return complete([nodes[:mid], nodes[mid:]])


def random_halves(nodes: Sequence[N], rng: random.Random) -> dict[N, frozenset[N]]:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return halves(shuffled)


def majorities_ring(nodes: Sequence[N], rng: random.Random) -> dict[N, frozenset[N]]:
    """Nodes on a shuffled ring each see the majority centred on themselves: every node sees a
    majority, and no two nodes see the same one (Jepsen's majorities-ring). Symmetric for an odd
    number of nodes; with an even number each node still receives from a majority."""
    need(nodes, 4)
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    majority = n // 2 + 1
    before = (majority - 1) // 2
    after = majority - 1 - before
    grudge: dict[N, frozenset[N]] = {}
    for i, node in enumerate(ring):
        visible = {ring[(i + d) % n] for d in range(-before, after + 1)}
        grudge[node] = frozenset(ring) - visible
    return grudge


def bridge(nodes: Sequence[N], rng: random.Random | None = None) -> dict[N, frozenset[N]]:
    """Two halves that cannot talk, and one bridge node both halves still reach."""
    need(nodes, 3)
    order = list(nodes)
    if rng is not None:
        rng.shuffle(order)
    mid = len(order) // 2
    left, hub, right = order[:mid], order[mid], order[mid + 1:]
    grudge = complete([left, right])
    return {n: s for n, s in grudge.items() if n != hub}


def need(nodes: Sequence[N], at_least: int) -> None:
    if len(nodes) < at_least:
        raise TopologyError(f"needs at least {at_least} nodes, got {len(nodes)}")
