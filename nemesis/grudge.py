"""Network partitions as grudges: receiving host → the set of hosts whose traffic it drops.

Pure functions, one per topology; randomness comes from the `random.Random` passed in, so a
seeded schedule always yields the same grudge. A grudge never names a host in its own set. The
shapes that need no roles (halves, bridge, majorities ring) live in `kraftlab.node.topology`, shared
with the node's simulator.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from kraftlab.node.topology import TopologyError, bridge, complete, halves, majorities_ring, need, random_halves

Grudge = dict[str, frozenset[str]]

TOPOLOGIES: tuple[str, ...] = (
    "halves", "random-halves", "isolate-node", "isolate-controller", "minority-controllers",
    "majority-controllers", "majorities-ring", "bridge", "one-way", "controllers-brokers",
    "leader-with-brokers", "voters-apart-from-leader",
)
__all__ = ["NEEDS_ACTIVE", "TOPOLOGIES", "Grudge", "TopologyError", "bridge", "build", "complete",
           "controllers_brokers",
           "cut_pairs", "from_json", "halves", "isolate", "leader_with_brokers", "majorities_ring",
           "majority_controllers", "minority_controllers", "one_way", "random_halves", "to_json",
           "voters_apart_from_leader"]
NEEDS_ACTIVE: frozenset[str] = frozenset({"isolate-controller", "leader-with-brokers", "voters-apart-from-leader"})
"""Topologies built around the active controller, resolved when the partition starts."""


def isolate(nodes: Sequence[str], victims: Iterable[str]) -> Grudge:
    """The victims (together, as one component) against everyone else."""
    group = set(victims)
    unknown = group - set(nodes)
    if unknown:
        raise TopologyError(f"unknown nodes {sorted(unknown)}; nodes are {list(nodes)}")
    if not group or group == set(nodes):
        raise TopologyError("isolating nothing or everything is not a partition")
    return complete([sorted(group), [n for n in nodes if n not in group]])


def minority_controllers(nodes: Sequence[str], controllers: Sequence[str], rng: random.Random) -> Grudge:
    """A random minority (at most (c-1)//2, at least 1) of the controllers, isolated together."""
    need(controllers, 2)
    size = max(1, (len(controllers) - 1) // 2)
    return isolate(nodes, rng.sample(list(controllers), size))


def majority_controllers(nodes: Sequence[str], controllers: Sequence[str], rng: random.Random) -> Grudge:
    """A random majority of the controllers together, against everyone else (the other controllers
    and every broker-only node): the majority side can elect, the brokers cannot reach it."""
    need(controllers, 2)
    return isolate(nodes, rng.sample(list(controllers), len(controllers) // 2 + 1))


def leader_with_brokers(nodes: Sequence[str], controllers: Sequence[str], active: str) -> Grudge:
    """The active controller keeps its broker-only nodes and loses every other voter: it cannot
    commit, yet the brokers still reach it and only it, until check-quorum makes it resign."""
    others = [c for c in controllers if c != active]
    if not others:
        raise TopologyError("leader-with-brokers needs at least two controllers")
    return complete([[n for n in nodes if n not in set(others)], others])


def voters_apart_from_leader(controllers: Sequence[str], active: str) -> Grudge:
    """The active controller is cut from the other voters only; broker-only nodes (and the links of
    combined nodes' brokers to it through those nodes) still reach everyone: a partial partition."""
    others = [c for c in controllers if c != active]
    if not others:
        raise TopologyError("voters-apart-from-leader needs at least two controllers")
    return {**{o: frozenset({active}) for o in others}, active: frozenset(others)}


def one_way(nodes: Sequence[str], senders: Iterable[str], receivers: Iterable[str]) -> Grudge:
    """Receivers drop the senders' traffic; senders still hear the receivers."""
    src, dst = set(senders), set(receivers)
    unknown = (src | dst) - set(nodes)
    if unknown:
        raise TopologyError(f"unknown nodes {sorted(unknown)}")
    if src & dst or not src or not dst:
        raise TopologyError("one-way needs two disjoint, non-empty groups")
    return {r: frozenset(src) for r in sorted(dst)}


def controllers_brokers(nodes: Sequence[str], controllers: Sequence[str], brokers: Sequence[str]) -> Grudge:
    """Controller nodes against broker-only nodes (combined nodes count as controllers)."""
    ctl = [n for n in nodes if n in set(controllers)]
    brk = [n for n in nodes if n in set(brokers) and n not in set(controllers)]
    if not ctl or not brk:
        raise TopologyError("needs at least one controller and one broker-only node")
    return complete([ctl, brk])


def build(topology: str, nodes: Sequence[str], *, controllers: Sequence[str] = (), brokers: Sequence[str] = (),
          active: str | None = None, rng: random.Random | None = None, targets: Sequence[str] = (),
          senders: Sequence[str] = (), receivers: Sequence[str] = ()) -> Grudge:
    """The grudge of a named topology. `targets` names the node(s) for isolate-node;
    `active` is the current active controller for isolate-controller."""
    r = rng or random.Random(0)
    match topology:
        case "halves":
            return halves(nodes)
        case "random-halves":
            return random_halves(nodes, r)
        case "isolate-node":
            return isolate(nodes, targets or [r.choice(list(nodes))])
        case "isolate-controller":
            return isolate(nodes, [_known(active)])
        case "minority-controllers":
            return minority_controllers(nodes, controllers or nodes, r)
        case "majority-controllers":
            return majority_controllers(nodes, controllers or nodes, r)
        case "leader-with-brokers":
            return leader_with_brokers(nodes, controllers or nodes, _known(active))
        case "voters-apart-from-leader":
            return voters_apart_from_leader(controllers or nodes, _known(active))
        case "majorities-ring":
            return majorities_ring(nodes, r)
        case "bridge":
            return bridge(nodes, r)
        case "one-way":
            if not senders or not receivers:
                victim = r.choice(list(nodes))
                rest = [n for n in nodes if n != victim]
                senders, receivers = ([victim], rest) if r.random() < 0.5 else (rest, [victim])
            return one_way(nodes, senders, receivers)
        case "controllers-brokers":
            return controllers_brokers(nodes, controllers, brokers)
    raise TopologyError(f"unknown topology {topology!r}; known: {', '.join(TOPOLOGIES)}")


def to_json(grudge: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    return {node: sorted(drops) for node, drops in sorted(grudge.items()) if drops}


def from_json(data: Mapping[str, Iterable[str]]) -> Grudge:
    return {node: frozenset(drops) for node, drops in data.items() if drops}


def cut_pairs(grudge: Mapping[str, Iterable[str]]) -> set[tuple[str, str]]:
    """The directed (sender, receiver) pairs whose traffic is dropped."""
    return {(src, dst) for dst, srcs in grudge.items() for src in srcs}


def _known(active: str | None) -> str:
    if active is None:
        raise TopologyError("no active controller is known (DescribeQuorum found no leader)")
    return active
