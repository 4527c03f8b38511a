"""Grudge computation for every topology: who drops whom, and the properties each promises."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.nemesis import grudge as g

NODES = ["n1", "n2", "n3", "n4", "n5"]


def reach(grudge: g.Grudge, src: str, dst: str) -> bool:
    return src not in grudge.get(dst, frozenset())


def components(grudge: g.Grudge, nodes: list[str]) -> list[set[str]]:
    """Groups of mutually reachable nodes (for symmetric grudges)."""
    out: list[set[str]] = []
    for n in nodes:
        for comp in out:
            if all(reach(grudge, n, m) and reach(grudge, m, n) for m in comp):
                comp.add(n)
                break
        else:
            out.append({n})
    return out


def test_halves_splits_first_half_from_rest() -> None:
    grudge = g.halves(NODES)
    assert grudge == {"n1": {"n3", "n4", "n5"}, "n2": {"n3", "n4", "n5"},
                      "n3": {"n1", "n2"}, "n4": {"n1", "n2"}, "n5": {"n1", "n2"}}


def test_random_halves_is_seeded_and_complete() -> None:
    a = g.random_halves(NODES, random.Random(3))
    assert a == g.random_halves(NODES, random.Random(3))
    assert sorted(len(c) for c in components(a, NODES)) == [2, 3]
    seen = {frozenset(map(frozenset, components(g.random_halves(NODES, random.Random(s)), NODES)))
            for s in range(40)}
    assert len(seen) > 3


def test_isolate_node_cuts_it_both_ways_only() -> None:
    grudge = g.isolate(NODES, ["n3"])
    assert grudge["n3"] == {"n1", "n2", "n4", "n5"}
    for other in ["n1", "n2", "n4", "n5"]:
        assert grudge[other] == {"n3"}
    assert g.cut_pairs(grudge) == {(a, b) for a, b in itertools.permutations(NODES, 2) if "n3" in (a, b)}


def test_isolate_controller_uses_active() -> None:
    assert g.build("isolate-controller", NODES, active="n2") == g.isolate(NODES, ["n2"])
    with pytest.raises(g.TopologyError, match="no active controller"):
        g.build("isolate-controller", NODES, active=None)


def test_minority_controllers_isolates_a_minority_of_controllers_together() -> None:
    controllers = ["n1", "n2", "n3", "n4", "n5"]
    for seed in range(20):
        grudge = g.minority_controllers(NODES, controllers, random.Random(seed))
        comps = sorted(components(grudge, NODES), key=len)
        assert [len(c) for c in comps] == [2, 3]
    three = g.minority_controllers(NODES, ["n1", "n2", "n3"], random.Random(1))
    small = min(components(three, NODES), key=len)
    assert len(small) == 1 and small <= {"n1", "n2", "n3"}


def test_majorities_ring_every_node_sees_a_distinct_majority() -> None:
    for n in (4, 5, 6, 7):
        nodes = [f"n{i}" for i in range(1, n + 1)]
        grudge = g.majorities_ring(nodes, random.Random(n))
        views = [frozenset(m for m in nodes if reach(grudge, m, node)) for node in nodes]
        for node, view in zip(nodes, views, strict=True):
            assert node in view
            assert len(view) == n // 2 + 1, (node, view)
        assert len(set(views)) == n
        assert all(node not in grudge.get(node, ()) for node in nodes)


def test_bridge_has_one_node_reaching_both_sides() -> None:
    grudge = g.bridge(NODES)
    hub = [n for n in NODES if n not in grudge]
    assert hub == ["n3"]
    assert all(reach(grudge, "n3", n) and reach(grudge, n, "n3") for n in NODES)
    assert not reach(grudge, "n1", "n4") and not reach(grudge, "n5", "n2")
    assert reach(grudge, "n1", "n2") and reach(grudge, "n4", "n5")


def test_one_way_is_one_way() -> None:
    grudge = g.one_way(NODES, ["n1"], ["n2", "n3"])
    assert grudge == {"n2": {"n1"}, "n3": {"n1"}}
    assert not reach(grudge, "n1", "n2") and reach(grudge, "n2", "n1")
    with pytest.raises(g.TopologyError):
        g.one_way(NODES, ["n1"], ["n1", "n2"])


def test_random_one_way_is_asymmetric() -> None:
    grudge = g.build("one-way", NODES, rng=random.Random(5))
    pairs = g.cut_pairs(grudge)
    assert pairs and all((b, a) not in pairs for a, b in pairs)


def test_controllers_brokers() -> None:
    grudge = g.controllers_brokers(NODES, ["n1", "n2", "n3"], ["n4", "n5"])
    assert grudge["n1"] == {"n4", "n5"} and grudge["n4"] == {"n1", "n2", "n3"}
    assert reach(grudge, "n1", "n2") and reach(grudge, "n4", "n5")
    with pytest.raises(g.TopologyError):
        g.controllers_brokers(NODES, NODES, NODES)


def test_unknown_topology_and_bad_nodes() -> None:
    with pytest.raises(g.TopologyError, match="unknown topology"):
        g.build("nope", NODES)
    with pytest.raises(g.TopologyError, match="unknown nodes"):
        g.isolate(NODES, ["n9"])
    with pytest.raises(g.TopologyError):
        g.isolate(NODES, NODES)


def test_json_round_trip_drops_empty() -> None:
    grudge = g.isolate(NODES, ["n1"])
    assert g.from_json(g.to_json(grudge)) == grudge
    assert g.to_json({"n1": frozenset()}) == {}


@given(st.integers(2, 9), st.integers(0, 10_000), st.sampled_from(g.TOPOLOGIES))
def test_no_topology_drops_a_node_from_itself(n: int, seed: int, topology: str) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    try:
        grudge = g.build(topology, nodes, controllers=nodes[:3], brokers=nodes[3:], active=nodes[0],
                         rng=random.Random(seed))
    except g.TopologyError:
        return
    assert grudge, topology
    for node, drops in grudge.items():
        assert node in nodes and node not in drops and drops <= set(nodes)
