"""Target resolution: sizes, roles, the active controller, and errors."""

from __future__ import annotations

import random

import pytest

from kraftlab.nemesis.targets import TargetError, resolve

NODES = ["n1", "n2", "n3", "n4", "n5"]
KW = {"controllers": ["n1", "n2", "n3"], "brokers": ["n4", "n5"]}


@pytest.mark.parametrize(("spec", "size"), [("one", 1), ("minority", 2), ("majority", 3), ("all", 5)])
def test_sizes(spec: str, size: int) -> None:
    for seed in range(10):
        chosen = resolve(spec, NODES, rng=random.Random(seed), **KW)
        assert len(chosen) == size and set(chosen) <= set(NODES)
        assert chosen == sorted(chosen, key=NODES.index)


def test_roles_and_lists() -> None:
    assert resolve("controllers", NODES, **KW) == ["n1", "n2", "n3"]
    assert resolve("brokers", NODES, **KW) == ["n4", "n5"]
    assert resolve("brokers", NODES, controllers=NODES, brokers=NODES) == NODES  # combined nodes
    assert resolve("controller", NODES, active="n2", **KW) == ["n2"]
    assert resolve("list", NODES, listed=["n5", "n1"]) == ["n1", "n5"]


def test_errors() -> None:
    with pytest.raises(TargetError, match="no active controller"):
        resolve("controller", NODES, active=None)
    with pytest.raises(TargetError, match="unknown nodes"):
        resolve("list", NODES, listed=["n7"])
    with pytest.raises(TargetError, match="unknown target"):
        resolve("some", NODES)
    with pytest.raises(TargetError, match="names no node"):
        resolve("list", NODES, listed=[])
