"""Swarm over the cluster's shape: when a run does not fix its topology (`--topology`, a recipe, a
replayed schedule), each seed draws one from `WEIGHTS`, among the topologies the lab's hosts allow.

Why these weights (on the default five hosts):
- `combined` (every node a voter, 5 voters, as Jepsen's usual cluster) 0.5: the most Raft states —
  a contested election has voters besides the two candidates that can grant both (a double vote is
  seen), and a five-voter log has far more partial-replication states (a follower diverging from a
  new leader by an epoch it never saw);
- `combined+brokers` (3 voters, 2 broker-only nodes) 0.35: brokers that are not controllers, so a
  broker's fencing and metadata replay are apart from the quorum's faults;
- `dedicated` (3 controller-only voters, 2 brokers) 0.15: controllers that serve no client, every
  write forwarded from a broker (KIP-590); fewest brokers, so the least client-facing coverage.

The draw is a function of the seed and the number of hosts (its own random stream: the workload's
and the nemesis's draws of the same seed are unchanged).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from kraftlab.deploy import DEFAULT_TOPOLOGY, TOPOLOGIES, plan

WEIGHTS: tuple[tuple[str, float], ...] = (("combined", 0.5), ("combined+brokers", 0.35), ("dedicated", 0.15))


def fits(topology: str, hosts: int) -> bool:
    """Whether `hosts` hosts can hold the topology (dedicated controllers need brokers beside them)."""
    try:
        plan(topology, {f"n{i}": "" for i in range(1, hosts + 1)})
    except ValueError:
        return False
    return True


def topology_of(nodes: Sequence[str], controllers: Sequence[str], brokers: Sequence[str],
                quorum: str = "static") -> str | None:
    """The topology whose plan gives these nodes these roles (a replayed schedule's shape)."""
    for topology in TOPOLOGIES:
        try:
            specs = plan(topology, {n: "" for n in nodes}, quorum)
        except ValueError:
            continue
        if ({s.name for s in specs if s.controller}, {s.name for s in specs if s.broker}) == (set(controllers),
                                                                                             set(brokers)):
            return topology
    return None


def draw_topology(seed: int, hosts: int) -> str:
    """The topology seed `seed` draws for a lab of `hosts` hosts."""
    rng = random.Random(f"kraftlab.topology_swarm:{seed}")
    shapes = [(t, w) for t, w in WEIGHTS if fits(t, hosts)]
    if not shapes:
        return DEFAULT_TOPOLOGY  # no shape fits: the deploy says why
    return rng.choices([t for t, _ in shapes], weights=[w for _, w in shapes])[0]
