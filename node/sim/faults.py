"""Seeded fault schedules for the simulator: which fault happens when, and when it is healed.

The whole schedule is drawn up front from the seed, so a run is reproduced exactly by its
parameters (see `node.sim.replay`). Disk wipes only hit observers: wiping a voter's disk loses
its vote and can elect two leaders in one epoch (static voter sets cannot survive it, KIP-853).

`flapping` is Jepsen's flapping partition, with the lab nemesis's shapes (`kraftlab.node.topology`):
two to four partitions back to back — random halves, a bridge, a majorities ring, the leader
isolated — each held from a fetch timeout to a fetch timeout and two elections, so leaders are
elected in quick succession while the client appends, and deposed leaders keep uncommitted tails
in different epochs for the next leader's DivergingEpoch to cut.

`quiet` is a window of two to four fetch timeouts in which no client sends anything (half the
time with the leader cut off too): the nodes are woken only by each other and by their own timers,
so a timer a node forgot to declare shows (`node.sim.timer_rules` judges each when it falls due).
`wakeups` is a window in which the driver wakes each node on its declared deadline, a millisecond
before it (a spurious wake-up, at which the core must not act yet) or a millisecond after it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.topology import bridge, majorities_ring, random_halves

FAULT_KINDS = ("partition", "oneway", "crash", "wipe", "drop", "duplicate", "delay", "flapping", "quiet", "wakeups")

FLAP_GAP_MS = 10
"""Between one shape of a flapping series and the next: the heal, then the next shape."""


@dataclass(frozen=True, slots=True)
class FaultEvent:
    at: int
    action: str  # block unblock isolate rejoin crash restart wipe rates quiet unquiet wakeups heal
    args: tuple[Any, ...] = ()


def flapping(
    rng: random.Random, t: int, nodes: list[int], duration_ms: int, token: int, config: RaftConfig
) -> tuple[list[FaultEvent], int, int]:
    """A flapping series from `t`: (its events, the time it ends, the last token it used)."""
    events: list[FaultEvent] = []
    low = config.fetch_timeout_ms
    high = config.fetch_timeout_ms + 2 * config.election_timeout_ms
    # the leader cut off while the client still reaches it weighs most: it appends a tail it cannot commit
    shapes = ["leader"] * 3 + (["halves"] if len(nodes) >= 2 else []) + (["bridge"] if len(nodes) >= 3 else [])
    shapes += ["ring"] if len(nodes) >= 4 else []
    for _ in range(rng.randint(2, 4)):
        if t >= duration_ms:
            break
        end = min(t + rng.randint(low, high), duration_ms)
        token += 1
        shape = shapes[rng.randrange(len(shapes))]
        if shape == "leader":
            events += [FaultEvent(t, "isolate", ("leader", token)), FaultEvent(end, "rejoin", (token,))]
        else:
            grudge = {"halves": random_halves, "bridge": bridge, "ring": majorities_ring}[shape](nodes, rng)
            links = sorted((src, dst) for dst, srcs in grudge.items() for src in srcs)
            events += [FaultEvent(t, "block", link) for link in links]
            events += [FaultEvent(end, "unblock", link) for link in links]
        t = end + FLAP_GAP_MS
    return events, t, token


def schedule(
    rng: random.Random, kinds: tuple[str, ...], voters: list[int], observers: list[int], duration_ms: int,
    config: RaftConfig | None = None,
) -> list[FaultEvent]:
    """Faults in [0, duration_ms), each healed after a while; a final `heal` at duration_ms
    (`config`: the nodes' timeouts, which size a flapping series)."""
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
        elif kind == "flapping":
            series, t, token = flapping(rng, t, nodes, duration_ms, token, config or RaftConfig())
            events += series
        elif kind == "oneway" and len(nodes) > 1:
            a, b = rng.sample(nodes, 2)
            events += [FaultEvent(t, "block", (a, b)), FaultEvent(end, "unblock", (a, b))]
        elif kind == "crash":
            victim: int | str = "leader" if rng.random() < 0.5 else nodes[rng.randrange(len(nodes))]
            events += [FaultEvent(t, "crash", (victim, token)), FaultEvent(end, "restart", (victim, token))]
        elif kind == "wipe" and observers:
            victim = observers[rng.randrange(len(observers))]
            events += [FaultEvent(t, "wipe", (victim, token)), FaultEvent(end, "restart", (victim, token))]
        elif kind == "quiet":
            # Nothing reaches the nodes for several fetch timeouts but their own timers' doings: no
            # client sends; half the time the leader is cut off too, so only its own timers wake it.
            timeout = (config or RaftConfig()).fetch_timeout_ms
            end = min(t + rng.randint(2 * timeout, 4 * timeout), duration_ms)
            events += [FaultEvent(t, "quiet", (token,)), FaultEvent(end, "unquiet", (token,))]
            if rng.random() < 0.5:
                events += [FaultEvent(t, "isolate", ("leader", token)), FaultEvent(end, "rejoin", (token,))]
        elif kind == "wakeups":
            events += [FaultEvent(t, "wakeups", (1,)), FaultEvent(end, "wakeups", (-1,))]
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
