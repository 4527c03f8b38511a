"""A node started on a disk that fails its reads (the `disk-errors` read windows restart their node
onto the failing disk): the reads of its recovery meet the error and it refuses to start, with
`log_dir_failed` journalled and a clear message — it never serves from storage it cannot read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraftlab.node.broker import BrokerState
from kraftlab.node.config import config_from_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.server import EXIT_FAILED, EXIT_OK, NodeServer
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.diskfs_mounts import mounted
from kraftlab.testing.kraftnode import free_ports, node_properties

from . import needs_fuse

pytestmark = needs_fuse


async def _one_life(node: NodeServer) -> int:
    running = asyncio.create_task(node.run())
    while not running.done() and (node.application is None or node.application.lifecycle is None
                                  or node.application.lifecycle.state is not BrokerState.RUNNING):
        await asyncio.sleep(0.02)
    node.request_stop()
    return await asyncio.wait_for(running, 30)


def test_a_node_whose_recovery_reads_fail_refuses_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broker_port, controller_port = free_ports(2)
    with mounted(tmp_path) as m:
        config = config_from_properties(node_properties(
            1, tmp_path, {1: controller_port},
            **{"process.roles": "broker,controller", "metadata.log.dir": str(m.mountpoint),
               "log.dirs": str(m.mountpoint), "kraftlab.journal.file": str(tmp_path / "journal.jsonl"),
               "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}"}))
        format_dirs(config.all_log_dirs, random_cluster_id(), 1)
        assert asyncio.run(_one_life(NodeServer(config))) == EXIT_OK  # its log and checkpoints exist now
        m.ctl(cmd="fail", ops=["read"], glob="*.log", errno="EIO")
        assert asyncio.run(_one_life(NodeServer(config))) == EXIT_FAILED
        assert {e["op"] for e in m.ctl(cmd="injected")["errors"]} == {"read"}
    assert "I/O error while recovering its storage" in capsys.readouterr().err
    assert config.journal_file is not None
    journal = list(read_journal(config.journal_file))
    last_life = journal[max(i for i, e in enumerate(journal) if e["ev"] == "launch"):]
    failed = [e for e in last_life if e["ev"] == "log_dir_failed"]
    assert len(failed) == 1 and failed[0]["errno"] == "EIO" and failed[0]["during"] == "startup"
    assert not any(e["ev"] in ("start", "role", "decision") for e in last_life)
