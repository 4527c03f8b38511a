"""End to end: one broker+controller process — the broker registers with its own controller; metrics
are scraped over HTTP; the journal's clock follows the clock control file; SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from kraftlab.node.clock import Skew, write_skew
from kraftlab.node.config import config_from_properties, render_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import KRAFT_NODE, free_ports, node_properties

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_combined_node_metrics_clock_and_sigterm(tmp_path: Path) -> None:
    broker_port, controller_port, metrics_port = free_ports(3)
    clock_file = tmp_path / "clock.json"
    write_skew(clock_file, Skew(offset_ms=30_000.0))
    props = node_properties(
        1,
        tmp_path,
        {1: controller_port},
        **{
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "kraftlab.metrics.port": str(metrics_port),
            "kraftlab.clock.file": str(clock_file),
        },
    )
    config_path = tmp_path / "server.properties"
    config_path.write_text(render_properties(props))
    config = config_from_properties(props)
    cluster_id = random_cluster_id()
    format_dirs(config.all_log_dirs, cluster_id, 1)
    started_ms = time.time() * 1000
    with open(tmp_path / "node.log", "wb") as log:
        proc = subprocess.Popen(
            [KRAFT_NODE, "start", "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        cluster: dict[str, object] = {}
        while time.monotonic() < deadline:
            out = subprocess.run(
                [KRAFT_NODE, "describe-cluster", "--bootstrap-server", f"127.0.0.1:{broker_port}", "--timeout", "2"],
                capture_output=True,
                text=True,
            )
            if out.returncode == 0:
                cluster = json.loads(out.stdout)
                if cluster["brokers"]:
                    break
            time.sleep(0.3)
        assert cluster.get("cluster_id") == cluster_id
        assert [b["id"] for b in cluster["brokers"]] == [1]  # type: ignore[index,union-attr]

        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
            assert response.status == 200
            text = response.read().decode()
        assert 'kraft_raft_role{role="leader"} 1' in text
        assert "kraft_raft_current_leader 1" in text
        hw = next(float(line.split()[1]) for line in text.splitlines() if line.startswith("kraft_raft_high_watermark "))
        assert hw >= 3  # leader change, broker registration, unfence
        assert "kraft_controller_active_broker_count 1" in text

        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    assert config.journal_file is not None
    journal = read_journal(config.journal_file)
    now_ms = time.time() * 1000
    # every line is stamped by the node's clock: 30 s ahead of the host's
    assert all(started_ms + 29_000 < e["ts"] < now_ms + 31_000 for e in journal), journal[:3]
    states = [e["state"] for e in journal if e["ev"] == "broker_state"]
    assert "RUNNING" in states and states[-1] == "SHUTTING_DOWN"
    assert any(e["ev"] == "fence" and e["action"] == "unfence" for e in journal)
    assert any(e["ev"] == "apply" and e["type"] == "RegisterBrokerRecord" for e in journal)
