"""NodeServer start-up refusals: unformatted storage, committed data damaged (journalled), busy port."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from kraftlab.node.config import config_from_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.process.application import KraftApplication
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.server import EXIT_FAILED, NodeServer
from kraftlab.node.storage.layout import partition_dir
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import broker_properties, free_ports, node_properties


def _config(tmp_path: Path, **extra: str):  # type: ignore[no-untyped-def]
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    return config_from_properties(node_properties(1, tmp_path, ports, **extra))


def _combined_node(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A formatted one-node broker+controller cluster's config, and its broker port."""
    broker_port, controller_port = free_ports(2)
    config = config_from_properties(node_properties(
        1, tmp_path, {1: controller_port},
        **{"process.roles": "broker,controller",
           "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}"}))
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    return config, broker_port


async def _running(config):  # type: ignore[no-untyped-def]
    """The node started, once its broker is RUNNING, and the task that runs it."""
    from kraftlab.node.broker import BrokerState

    node = NodeServer(config)
    running = asyncio.create_task(node.run())
    while node.application is None or node.application.lifecycle is None \
            or node.application.lifecycle.state is not BrokerState.RUNNING:
        await asyncio.sleep(0.02)
    return node, running


def test_unformatted_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    config = config_from_properties(broker_properties(4, tmp_path, ports, free_ports(1)[0]))
    assert asyncio.run(NodeServer(config).run()) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "kraft-node format" in err and "voter" not in err


def test_an_unformatted_voter_is_refused_with_the_way_to_replace_its_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A voter whose whole metadata directory was lost must not simply be formatted again."""
    config = _config(tmp_path)
    assert config.is_controller and config.voter(1) is not None
    assert asyncio.run(NodeServer(config).run()) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "meta.properties" in err and "voter of the metadata quorum" in err
    assert "must not be formatted anew" in err and "new directory.id" in err


def test_damage_below_high_watermark_stops_with_journalled_corruption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    with DiskLog.open(config.metadata_log_dir) as disk:
        disk.append([Batch(i, 1, (Record(b"k", b"v" * 50),)) for i in range(10)])
        disk.flush()
        disk.checkpoint_hw(10)
    segment = next(partition_dir(config.metadata_log_dir).glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert asyncio.run(NodeServer(config).run()) == EXIT_FAILED
    assert "corrupt" in capsys.readouterr().err
    assert config.journal_file is not None
    events = [e for e in read_journal(config.journal_file) if e["ev"] == "corruption"]
    assert events and events[0]["below_hw"] is True and events[0]["node"] == 1
    assert segment.read_bytes() == bytes(data)  # nothing was truncated


def test_listener_port_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    assert config.controller_listener is not None
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", config.controller_listener.port))
        busy.listen()
        assert asyncio.run(NodeServer(config).run()) == EXIT_FAILED
    assert "cannot listen on CONTROLLER://" in capsys.readouterr().err


def test_planted_bugs_reach_every_core(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"kraftlab.unsafe.test.mode": "true", "kraftlab.unsafe.bug": "no-check-quorum"})
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)

    async def run() -> None:
        server = NodeServer(config)
        task = asyncio.create_task(server.run())
        try:
            async with asyncio.timeout(30):
                while server.driver is None or not server.driver.started:
                    assert not task.done()
                    await asyncio.sleep(0.02)
            assert server.driver.core.bugs.on("no-check-quorum")
            assert server.storage is not None and server.storage.quorum.bugs.on("no-check-quorum")
            app = server.application
            assert isinstance(app, KraftApplication) and app.controller.config.bugs.on("no-check-quorum")
        finally:
            server.request_stop()
            await asyncio.wait_for(task, 30)

    asyncio.run(run())


def test_a_node_that_fails_stops_serving_even_when_a_listener_will_not_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed log dir stops the node (Kafka halts): a shutdown held up by a connection whose peer is
    cut off must not leave the rest of the process serving, so it halts after HALT_AFTER_S."""
    import errno

    from kraftlab.node import server as server_module

    monkeypatch.setattr(server_module, "HALT_AFTER_S", 0.5)
    config = config_from_properties(node_properties(1, tmp_path, {1: free_ports(1)[0]}))
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    halted: list[int] = []

    async def scenario() -> int:
        node = NodeServer(config, halt=halted.append)
        running = asyncio.create_task(node.run())
        while node.driver is None or not node._servers:
            await asyncio.sleep(0.02)

        async def never_closes() -> None:
            await asyncio.Event().wait()

        monkeypatch.setattr(node._servers[0], "stop", never_closes)
        node.driver.fail_stop(OSError(errno.EIO, "Input/output error"))
        return await asyncio.wait_for(running, 10)

    assert asyncio.run(scenario()) == EXIT_FAILED and halted == [EXIT_FAILED]


def test_a_failed_write_of_the_application_stops_the_node(tmp_path: Path) -> None:
    """An I/O error in the application's tick (the partition logs' offset checkpoints under log.dirs)
    stops the node with `log_dir_failed`, instead of ending the ticks (heartbeats) while Raft goes on."""
    import errno

    config = config_from_properties(node_properties(1, tmp_path, {1: free_ports(1)[0]}))
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)

    async def scenario() -> int:
        node = NodeServer(config)
        running = asyncio.create_task(node.run())
        while node.driver is None or node.application is None or not node.driver.core.is_leader:
            await asyncio.sleep(0.02)

        def tick(now_ms: int) -> int | None:
            raise OSError(errno.EIO, "Input/output error", "replication-offset-checkpoint.tmp")

        node.application.tick = tick  # type: ignore[method-assign]
        return await asyncio.wait_for(running, 10)

    assert asyncio.run(scenario()) == EXIT_FAILED
    assert config.journal_file is not None
    journal = read_journal(config.journal_file)
    assert journal[0]["ev"] == "launch" and journal[1]["ev"] == "recovery"  # the life begins before its storage
    failed = [e for e in journal if e["ev"] == "log_dir_failed"]
    assert len(failed) == 1 and failed[0]["errno"] == "EIO" and failed[0]["path"] == "replication-offset-checkpoint.tmp"


def test_an_io_error_while_serving_a_request_stops_the_node(tmp_path: Path) -> None:
    """A partition log that fails a read or write while the broker serves a request (a Fetch, a
    Produce) stops the node with `log_dir_failed`, as Kafka halts when the directory holding its
    metadata log fails, instead of closing that one connection and serving on."""
    import errno

    from kio.schema.metadata.v9.request import MetadataRequest

    from kraftlab.node.protocol.client import ProtocolClient
    from kraftlab.node.protocol.errors import ConnectionLost

    config, broker_port = _combined_node(tmp_path)

    async def scenario() -> int:
        node, running = await _running(config)

        def handle(*args: object) -> None:
            raise OSError(errno.EIO, "Input/output error", "queue-0/00000000000000000000.log")

        node.application.apis.handle = handle  # type: ignore[method-assign]
        async with ProtocolClient("127.0.0.1", broker_port, request_timeout=5) as client:
            with pytest.raises(ConnectionLost):  # the connection is closed on the failed handler
                await client.send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                  include_cluster_authorized_operations=False,
                                                  include_topic_authorized_operations=False))
        return await asyncio.wait_for(running, 10)

    assert asyncio.run(scenario()) == EXIT_FAILED
    assert config.journal_file is not None
    failed = [e for e in read_journal(config.journal_file) if e["ev"] == "log_dir_failed"]
    assert len(failed) == 1 and failed[0]["path"] == "queue-0/00000000000000000000.log"


def test_a_node_that_fails_stops_serving_before_its_shutdown_runs(tmp_path: Path) -> None:
    """A fail-stop closes the listeners and cuts every connection first: a shutdown step that takes its
    time (here the flush thread's end, which blocks) must not leave the broker answering requests
    meanwhile (found: a broker answered for 3.7 s after an ENOSPC while its shutdown went on)."""
    import errno


    config, broker_port = _combined_node(tmp_path)
    listening_during_shutdown: list[bool] = []

    async def scenario() -> int:
        node, running = await _running(config)
        assert node.driver is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", broker_port)
        close = node.driver.close

        def slow_close() -> None:  # a shutdown step that blocks: is anything still listening?
            probe = socket.socket()
            probe.settimeout(0.5)
            listening_during_shutdown.append(probe.connect_ex(("127.0.0.1", broker_port)) == 0)
            probe.close()
            close()

        node.driver.close = slow_close  # type: ignore[method-assign]
        node.driver.fail_stop(OSError(errno.ENOSPC, "No space left on device"))
        code = await asyncio.wait_for(running, 10)
        assert await asyncio.wait_for(reader.read(), 1) == b""  # the open connection was cut
        writer.close()
        return code

    assert asyncio.run(scenario()) == EXIT_FAILED
    assert listening_during_shutdown == [False]


def test_a_failed_offset_checkpoint_written_on_its_thread_stops_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition logs' offset checkpoints are written on a thread: an I/O error there (found: ENOSPC
    creating replication-offset-checkpoint.tmp, the broker served on) stops the node like one in the tick."""
    import errno

    from kraftlab.node.process import application

    def write_checkpoints(values: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "replication-offset-checkpoint.tmp")

    monkeypatch.setattr(application, "write_checkpoints", write_checkpoints)
    config, _ = _combined_node(tmp_path)
    assert asyncio.run(asyncio.wait_for(NodeServer(config).run(), 20)) == EXIT_FAILED
    assert config.journal_file is not None
    failed = [e for e in read_journal(config.journal_file) if e["ev"] == "log_dir_failed"]
    assert len(failed) == 1 and failed[0]["errno"] == "ENOSPC"
    assert failed[0]["path"] == "replication-offset-checkpoint.tmp"
