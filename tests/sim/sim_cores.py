"""The first rule a (deliberately wrong) Raft core breaks over a run of simulations: how the
simulator's rule tests show that a rule can fail."""

from __future__ import annotations

from collections.abc import Iterable

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.invariants import InvariantViolation


def first_violation_of(
    core_class: type[RaftCore], runs: Iterable[SimParams], config: RaftConfig | None = None
) -> InvariantViolation | None:
    """The first violation `core_class` gives over `runs`, in order (None: it kept every rule)."""
    for params in runs:
        try:
            Simulation(params, config, core_class).run()
        except InvariantViolation as exc:
            return exc
    return None
