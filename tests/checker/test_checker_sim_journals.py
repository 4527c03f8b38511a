"""Integration: journals the real Raft core writes in the deterministic simulator (partitions,
crashes, wiped disks) satisfy every Raft invariant, and a journal tampered to commit a different
record on one node is caught. Guards the journal format shared with node/ (docs/contracts.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import kraftlab.node.sim.cluster as sim
from kraftlab.checker.journal import journals_from
from kraftlab.checker.raft import check_raft


class JournalingSimulation(sim.Simulation):  # type: ignore[misc,name-defined]
    """Collects every node's journal events (and a `start` per process start, as the server does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: list[dict[str, Any]] = []

    def _dispatch(self, node: Any, out: Any, now: int) -> None:
        self.entries += [{"ts": now, "mono": now * 1_000_000, "node": node.node_id, **ev} for ev in out.events]
        super()._dispatch(node, out, now)

    def start_node(self, node: Any, now: int) -> None:
        self.entries.append({"ts": now, "mono": now * 1_000_000, "node": node.node_id, "ev": "start",
                             "roles": ["controller"], "voters": self.voter_ids, "log_start": node.log.start_offset(),
                             "log_end": node.log.end_offset(), "hw": 0})
        super().start_node(node, now)


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    s = JournalingSimulation(sim.SimParams(seed=3, voters=3, observers=1, faults=("partition", "crash", "wipe"),
                                           journal=True))
    s.run()
    return s.entries


def test_simulated_cluster_satisfies_the_raft_invariants(entries: list[dict[str, Any]]) -> None:
    res = check_raft(journals_from(entries, "sim"))
    assert res["valid"] is True, res["anomalies"][:3]
    assert res["stats"]["committed_offsets"] > 100 and res["stats"]["epochs_with_leader"] >= 2


def test_a_tampered_append_is_caught(entries: list[dict[str, Any]]) -> None:
    bad = copy.deepcopy(entries)
    target = next(e for e in bad if e["ev"] == "append" and not e["leader"] and e["base"] > 10)
    target["crcs"] = [c ^ 1 for c in target["crcs"]]
    res = check_raft(journals_from(bad, "sim"))
    assert res["valid"] is False
    assert "CommittedPrefixAgreement" in {a["type"] for a in res["anomalies"]}
