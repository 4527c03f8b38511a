"""The check every deploy end-to-end test runs on a fresh lab: deploy a five-node cluster, see a
leader and unfenced brokers, kill and restart the leader, pause/resume a broker, stop everything,
and find every node's log, journal and config collected."""

from __future__ import annotations

from pathlib import Path

from node_logs import logs_on_failure

from kraftlab.control.lab import Lab
from kraftlab.deploy import Deployment, random_cluster_id


def run_cluster(lab: Lab, tmp_path: Path) -> Deployment:
    d = Deployment.create(lab, cluster_id=random_cluster_id())
    with logs_on_failure(d):
        d.deploy(wait=60)  # a node that does not start (an ImportError included) fails the test
        leader = d.active_controller()
        assert leader in d.controllers()
        d.kill(leader)
        assert not d.running(leader)
        d.start(leader)
        d.wait_healthy(60)
        d.pause("n5")
        d.resume("n5")
        d.stop_all()
        assert not any(d.running(n) for n in d.nodes())
    got = d.collect(tmp_path / "nodes")
    assert all({"kraft-node.log", "journal.jsonl", "server.properties"} <= set(files) for files in got.values()), got
    assert "node.id=4" in (tmp_path / "nodes" / "n4" / "server.properties").read_text()
    journal = (tmp_path / "nodes" / leader / "journal.jsonl").read_text()
    assert '"role"' in journal and '"leader"' in journal
    return d
