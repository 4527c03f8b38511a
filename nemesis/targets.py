"""Which nodes a process/clock/disk fault hits: one, minority, majority, all, the active controller,
controllers, brokers only, one voter, one broker, a minority or a majority of the voters, or a given
list. Random choices come from the `random.Random` passed in."""

from __future__ import annotations

import random
from collections.abc import Sequence

TARGETS: tuple[str, ...] = ("one", "minority", "majority", "all", "controller", "controllers", "brokers",
                            "voter", "broker", "minority-voters", "majority-voters", "list")


class TargetError(ValueError):
    """A target spec cannot be resolved (says why)."""


def is_deferred(spec: str) -> bool:
    """Targets resolved only when the fault fires (the active controller changes over time)."""
    return spec == "controller"


def resolve(spec: str, nodes: Sequence[str], *, controllers: Sequence[str] = (), brokers: Sequence[str] = (),
            active: str | None = None, rng: random.Random | None = None,
            listed: Sequence[str] = ()) -> list[str]:
    """The concrete nodes a target spec names, in the order of `nodes`."""
    r = rng or random.Random(0)
    n = len(nodes)
    match spec:
        case "one":
            chosen = [r.choice(list(nodes))] if nodes else []
        case "minority":
            chosen = r.sample(list(nodes), max(1, (n - 1) // 2)) if nodes else []
        case "majority":
            chosen = r.sample(list(nodes), n // 2 + 1) if nodes else []
        case "all":
            chosen = list(nodes)
        case "controller":
            if active is None:
                raise TargetError("no active controller is known (DescribeQuorum found no leader)")
            chosen = [active]
        case "controllers":
            chosen = list(controllers)
        case "brokers":
            chosen = [b for b in brokers if b not in set(controllers)] or list(brokers)
        case "voter":
            chosen = [r.choice(list(controllers))] if controllers else []
        case "broker":
            only = [b for b in brokers if b not in set(controllers)] or list(brokers)
            chosen = [r.choice(only)] if only else []
        case "minority-voters":
            chosen = r.sample(list(controllers), max(1, (len(controllers) - 1) // 2)) if controllers else []
        case "majority-voters":
            chosen = r.sample(list(controllers), len(controllers) // 2 + 1) if controllers else []
        case "list":
            unknown = set(listed) - set(nodes)
            if unknown:
                raise TargetError(f"unknown nodes {sorted(unknown)}; nodes are {list(nodes)}")
            chosen = list(listed)
        case _:
            raise TargetError(f"unknown target {spec!r}; known: {', '.join(TARGETS)}")
    if not chosen:
        raise TargetError(f"target {spec!r} names no node")
    order = {node: i for i, node in enumerate(nodes)}
    return sorted(set(chosen), key=lambda x: order.get(x, n))
