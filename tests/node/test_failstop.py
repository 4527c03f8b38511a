"""Fail-stop of a real NodeServer (one event loop, real sockets and disk): when its state machine
raises while applying a committed record, the node journals `fatal` with stopped:true and exits
with a failure status, instead of staying up (and voting) on a replica it cannot apply."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

from kraftlab.node.cli import append_test_records
from kraftlab.node.config import config_from_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.process.commit_log import CommitLog, CommitLogApplication
from kraftlab.node.process.seam import NodeContext
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.raft.ports import Batch, StateMachine
from kraftlab.node.server import EXIT_FAILED, NodeServer
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import free_ports, node_properties, until_leader


class PoisonedLog(CommitLog):
    """Raises on a record whose key (the test payload) is b"poison" (a replay bug)."""

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        if any(r.key == b"poison" for b in batches for r in b.records):
            raise KeyError("replay cannot apply the record")
        super().handle_commit(batches)


class PoisonedApplication(CommitLogApplication):
    def __init__(self, context: NodeContext) -> None:
        self._machine = PoisonedLog()

    @property
    def state_machine(self) -> StateMachine:
        return self._machine


def test_a_replay_error_stops_the_process_with_a_failure(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = config_from_properties(
        node_properties(
            1,
            tmp_path,
            {1: port},
            **{"kraftlab.unsafe.test.mode": "true", "controller.quorum.append.linger.ms": "1"},
        )
    )
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)

    async def run() -> int:
        server = NodeServer(config, PoisonedApplication)
        task = asyncio.create_task(server.run())
        try:
            await until_leader(server, task)
            async with ProtocolClient("127.0.0.1", port) as client:
                assert (await append_test_records(client, [b"fine"]))[0] == "NONE"
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        await append_test_records(client, [b"poison"])
            return await asyncio.wait_for(asyncio.shield(task), 30)  # stops by itself
        finally:
            if not task.done():
                server.request_stop()
                await asyncio.wait_for(task, 30)

    assert asyncio.run(run()) == EXIT_FAILED
    assert config.journal_file is not None
    fatal = [e for e in read_journal(config.journal_file) if e["ev"] == "fatal"]
    assert len(fatal) == 1 and fatal[0]["stopped"] is True and "KeyError" in fatal[0]["error"]
