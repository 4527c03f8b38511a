"""End to end: three controllers and three brokers on ONE host, configured with Kafka's keys only
(the way Kafka's quickstart runs a local quorum) — a leader within a few seconds, every broker
registered and unfenced, no process exits, and none binds a port it was not given (no metrics
port by default)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_quickstart import QuickstartCluster

from kraftlab.node.admin import describe_cluster_now

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

LEADER_WITHIN_S = 10.0
"""'A few seconds' for a leader, counted by the nodes' own clocks from the last controller's start."""


def test_three_controllers_and_three_brokers_on_one_host(tmp_path: Path) -> None:
    with QuickstartCluster(tmp_path, controllers=3, brokers=3) as c:
        c.start()
        c.wait_healthy()
        for b in c.brokers:  # each broker answers with the same view
            out = describe_cluster_now("localhost", c.ports[b])
            assert out["cluster_id"] == c.cluster_id and [x["id"] for x in out["brokers"]] == c.brokers
        assert all(p.poll() is None for p in c.procs.values())
    journals = {i: c.journal(i) for i in c.configs}
    starts = [next(e["ts"] for e in journals[i] if e["ev"] == "start") for i in c.controllers]
    elected = min(e["ts"] for i in c.controllers for e in journals[i] if e["ev"] == "role" and e["role"] == "leader")
    assert (elected - max(starts)) / 1000 <= LEADER_WITHIN_S, f"first leader {(elected - max(starts)) / 1000:.1f} s"
    for i in c.configs:  # no metrics endpoint unless configured (it would be journalled)
        assert not [e for e in journals[i] if e["ev"] == "metrics"]
