"""NodeServer in-process (one event loop, real sockets and disk): a single voter with the trivial
CommitLog application serves the test-only append path, metrics, and stops cleanly on request."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kraftlab.node import metrics as mx
from kraftlab.node.cli import append_test_records, describe_quorum
from kraftlab.node.config import config_from_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.process.commit_log import CommitLog, CommitLogApplication
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.server import EXIT_OK, NodeServer
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import free_ports, node_properties, until_leader


def test_single_voter_serves_appends_and_stops(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = config_from_properties(
        node_properties(
            1,
            tmp_path,
            {1: port},
            **{
                "kraftlab.unsafe.test.mode": "true",
                "controller.quorum.election.timeout.ms": "100",
                "controller.quorum.append.linger.ms": "1",
            },
        )
    )
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)

    async def run() -> None:
        server = NodeServer(config, CommitLogApplication)
        task = asyncio.create_task(server.run())
        try:
            await until_leader(server, task)
            quorum = await describe_quorum(("127.0.0.1", port))
            assert quorum["leader"] == 1 and [v["id"] for v in quorum["voters"]] == [1]
            async with ProtocolClient("127.0.0.1", port) as client:
                first = await append_test_records(client, [b"a", b"b"])
                second = await append_test_records(client, [b"c"])
                assert first[0] == second[0] == "NONE" and second[1] == first[1] + 2
            assert server.application is not None
            machine = server.application.state_machine
            assert isinstance(machine, CommitLog) and machine.records == 3
            assert server.metrics.value(mx.RAFT_HIGH_WATERMARK) == second[1] + 1
        finally:
            server.request_stop()
            assert await asyncio.wait_for(task, 30) == EXIT_OK

    asyncio.run(run())
    assert config.journal_file is not None
    journal = read_journal(config.journal_file)
    # the process life's launch, what the log recovery read back (CheckpointedHighWatermark), then the
    # Raft core's start (a `metrics` event, the metrics endpoint's address when one is configured, may
    # come before the start)
    life = [e for e in journal if e["ev"] != "metrics"]
    assert [e["ev"] for e in life[:3]] == ["launch", "recovery", "start"]
    assert life[1]["hw_checkpoint"] == 0 and life[1]["log_end"] == 0
    assert any(e["ev"] == "role" and e["role"] == "leader" for e in journal)
    appended = [e for e in journal if e["ev"] == "append" and not e["control"]]
    assert [len(e["crcs"]) for e in appended] == [2, 1]


def test_raft_requests_from_another_cluster_are_refused(tmp_path: Path) -> None:
    from kraftlab.node.raft import messages as m
    from kraftlab.node.raft import wire

    (port,) = free_ports(1)
    config = config_from_properties(node_properties(1, tmp_path, {1: port}))
    ours = random_cluster_id()
    format_dirs(config.all_log_dirs, ours, 1)

    async def run() -> None:
        server = NodeServer(config, CommitLogApplication)
        task = asyncio.create_task(server.run())
        try:
            async with asyncio.timeout(30):
                while server.driver is None or not server.driver.started:
                    await asyncio.sleep(0.02)
            vote = m.VoteRequest(epoch=50, candidate_id=7, last_epoch=0, end_offset=0)
            async with ProtocolClient("127.0.0.1", port) as client:
                foreign = wire.response_from_wire(await client.send(wire.request_to_wire(vote, random_cluster_id(), 1)))
                assert foreign.error == m.Errors.INCONSISTENT_CLUSTER_ID
                assert server.driver.core.epoch < 50  # the core never saw it
                own = wire.response_from_wire(await client.send(wire.request_to_wire(vote, ours, 1)))
                assert own.error != m.Errors.INCONSISTENT_CLUSTER_ID
        finally:
            server.request_stop()
            assert await asyncio.wait_for(task, 30) == EXIT_OK

    asyncio.run(run())
