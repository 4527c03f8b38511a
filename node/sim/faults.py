"""Seeded fault schedules for the simulator: which fault happens when, and when it is healed.

The whole schedule is drawn up front from the seed, so a run is reproduced exactly by its
parameters (see `node.sim.replay`). Disk wipes only hit observers: wiping a voter's disk loses
its vote and can elect two leaders in one epoch (static voter sets cannot survive it, KIP-853).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

FAULT_KINDS = ("partition", "oneway", "crash", "wipe", "drop", "duplicate", "delay")


@dataclass(frozen=True, slots=True)
class FaultEvent:
    at: int
    action: str  # block | unblock | isolate | rejoin | crash | restart | wipe | rates | heal
    args: tuple[Any, ...] = ()


def schedule(
    rng: random.Random, kinds: tuple[str, ...], voters: list[int], observers: list[int], duration_ms: int
) -> list[FaultEvent]:
    """Faults in [0, duration_ms), each healed after a while; a final `heal` at duration_ms."""
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
    nodes = voters + observers
    events: list[FaultEvent] = []
    t = 0
    token = 0  # pairs a fault aimed at "the leader at that time" with its healing
    while kinds:
        t += rng.randint(200, 2000)
        if t >= duration_ms:
            break
        kind = kinds[rng.randrange(len(kinds))]
        end = min(t + rng.randint(100, 6000), duration_ms)
        token += 1
        if kind == "partition" and len(nodes) > 1 and rng.random() < 0.4:
            events += [FaultEvent(t, "isolate", ("leader", token)), FaultEvent(end, "rejoin", (token,))]
        elif kind == "partition" and len(nodes) > 1:
            side = set(rng.sample(nodes, rng.randint(1, len(nodes) - 1)))
            links = [(a, b) for a in nodes for b in nodes if (a in side) != (b in side)]
            events += [FaultEvent(t, "block", (a, b)) for a, b in links]
            events += [FaultEvent(end, "unblock", (a, b)) for a, b in links]
        elif kind == "oneway" and len(nodes) > 1:
            a, b = rng.sample(nodes, 2)
            events += [FaultEvent(t, "block", (a, b)), FaultEvent(end, "unblock", (a, b))]
        elif kind == "crash":
            victim: int | str = "leader" if rng.random() < 0.5 else nodes[rng.randrange(len(nodes))]
            events += [FaultEvent(t, "crash", (victim, token)), FaultEvent(end, "restart", (victim, token))]
        elif kind == "wipe" and observers:
            victim = observers[rng.randrange(len(observers))]
            events += [FaultEvent(t, "wipe", (victim, token)), FaultEvent(end, "restart", (victim, token))]
        elif kind == "drop":
            events += [
                FaultEvent(t, "rates", ("drop", rng.uniform(0.05, 0.4))),
                FaultEvent(end, "rates", ("drop", 0.0)),
            ]
        elif kind == "duplicate":
            events += [
                FaultEvent(t, "rates", ("duplicate", rng.uniform(0.05, 0.4))),
                FaultEvent(end, "rates", ("duplicate", 0.0)),
            ]
        elif kind == "delay":
            events += [
                FaultEvent(t, "rates", ("max_delay_ms", rng.randint(20, 400))),
                FaultEvent(end, "rates", ("max_delay_ms", 5)),
            ]
    events.append(FaultEvent(duration_ms, "heal"))
    events.sort(key=lambda e: e.at)
    return events
