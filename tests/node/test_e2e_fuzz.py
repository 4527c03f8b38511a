"""Malformed, truncated, oversized and absurd frames at a real broker+controller process, on both
listeners (the fuzzer of tests/protocol): it never crashes, keeps answering, and its log stays
intact (what was committed before is still there, recovery finds no damage)."""

from __future__ import annotations

import asyncio
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest
from protocol.fuzzing import fuzz  # tests/protocol (tests/ is on pytest's pythonpath)

from kraftlab.node.cli import append_test_records, describe_quorum
from kraftlab.node.config import config_from_properties, render_properties
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import KRAFT_NODE, free_ports, node_properties, read_log_values

# The node runs under a memory limit, so that a request it mishandles (a CreateTopics asking for
# billions of partitions once did) fails it alone instead of exhausting the machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]


NODE_MEMORY_LIMIT = 3 << 30


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (NODE_MEMORY_LIMIT, NODE_MEMORY_LIMIT))


def run_fuzz(tmp_path: Path, frames: int) -> None:
    broker_port, controller_port = free_ports(2)
    props = node_properties(
        1,
        tmp_path,
        {1: controller_port},
        **{
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "kraftlab.unsafe.test.mode": "true",
        },
    )
    path = tmp_path / "server.properties"
    path.write_text(render_properties(props))
    config = config_from_properties(props)
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    with open(tmp_path / "node.log", "wb") as log:
        proc = subprocess.Popen(
            [KRAFT_NODE, "start", "--config", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=limit_memory,  # an absurd request must not take the machine down with the node
        )

    async def append(tag: bytes) -> str:
        async with ProtocolClient("127.0.0.1", controller_port, request_timeout=10) as client:
            return (await append_test_records(client, [tag]))[0]

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if asyncio.run(append(b"before")) == "NONE":
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the node did not come up"
            time.sleep(0.2)
        for port in (controller_port, broker_port):
            report = fuzz("127.0.0.1", port, frames // 2, 20261122 + (port == broker_port), timeout=30.0)
            assert proc.poll() is None, "the node died under fuzzing"
            assert report.violations == [], report.violations[:20]
            assert report.health_checks > 0 and report.frames >= frames // 2
        assert asyncio.run(append(b"after")) == "NONE"
        assert asyncio.run(describe_quorum(("127.0.0.1", controller_port)))["leader"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    values = read_log_values(config.metadata_log_dir)
    assert values[0] == b"before" and values[-1] == b"after"
    with DiskLog.open(config.metadata_log_dir) as disk:
        assert disk.recovery.damage is None


def test_fuzzed_node_survives_10k_frames(tmp_path: Path) -> None:
    run_fuzz(tmp_path, 10_000)


@pytest.mark.slow  # about 2 minutes on an idle 2-core machine, 5 under load: the nightly target
def test_fuzzed_node_survives_100k_frames(tmp_path: Path) -> None:
    run_fuzz(tmp_path, 100_000)
