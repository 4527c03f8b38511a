"""Recording the journal events every simulated node emits, in order, with the simulated time."""

from __future__ import annotations

from typing import Any

from kraftlab.node.sim.cluster import Simulation

Journal = list[tuple[int, int, dict[str, Any]]]


def run_recording(sim: Simulation) -> Journal:
    """Run `sim` to its end; returns (now, node id, event) for every journal event of every step."""
    seen: Journal = []
    dispatch = sim._dispatch

    def record(node, out, now):  # type: ignore[no-untyped-def]
        seen.extend((now, node.node_id, e) for e in out.events)
        dispatch(node, out, now)

    sim._dispatch = record  # type: ignore[method-assign]
    sim.run()
    return seen
