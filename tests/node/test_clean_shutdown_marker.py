"""A broker proves a clean stop to the controller (KIP-966): a graceful stop writes the clean-shutdown
marker with its broker epoch, the next start takes it and registers with that PreviousBrokerEpoch,
and the marker is gone while it runs (a crash of that life is an unclean shutdown)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kraftlab.node.broker import BrokerState
from kraftlab.node.config import config_from_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.server import EXIT_OK, NodeServer
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id, read_meta_properties
from kraftlab.node.storage.partition.clean_shutdown import CLEAN_SHUTDOWN_FILE
from kraftlab.testing.kraftnode import free_ports, node_properties


def test_a_clean_stop_is_proven_to_the_next_registration(tmp_path: Path) -> None:
    broker_port, controller_port = free_ports(2)
    config = config_from_properties(node_properties(
        1, tmp_path, {1: controller_port},
        **{"process.roles": "broker,controller",
           "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}"}))
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    marker = config.log_dirs[0] / CLEAN_SHUTDOWN_FILE

    async def life() -> tuple[int, int, bool]:
        node = NodeServer(config)
        running = asyncio.create_task(node.run())
        while node.application is None or node.application.lifecycle is None \
                or node.application.lifecycle.state is not BrokerState.RUNNING:
            await asyncio.sleep(0.02)
        marker_while_running = marker.exists()
        epoch = node.application.lifecycle.broker_epoch
        node.request_stop()
        return await asyncio.wait_for(running, 30), epoch, marker_while_running

    code, first_epoch, _ = asyncio.run(life())
    assert code == EXIT_OK
    assert marker.read_text() == f'{{"version": 0, "broker_epoch": {first_epoch}}}'
    code, _, marker_while_running = asyncio.run(life())
    assert code == EXIT_OK and not marker_while_running
    assert config.journal_file is not None
    registered = [e for e in read_journal(config.journal_file)
                  if e["ev"] == "decision" and e["api"] == "BrokerRegistration" and e["error"] == "NONE"]
    assert [e["previous_broker_epoch"] for e in registered] == [-1, first_epoch]


def test_the_directory_shared_with_the_metadata_log_is_registered(tmp_path: Path) -> None:
    """Kafka's default layout (log.dirs names metadata.log.dir too): the broker registers that
    directory's id (KIP-858), so a crash on the same disk can be told from a reformatted one; the
    directory is not watched as a data directory (losing it stops the node)."""
    broker_port, controller_port = free_ports(2)
    shared = tmp_path / "shared"
    config = config_from_properties(node_properties(
        1, tmp_path, {1: controller_port},
        **{"process.roles": "broker,controller", "metadata.log.dir": str(shared), "log.dirs": str(shared),
           "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}"}))
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    directory_id = read_meta_properties(shared).directory_id

    async def life() -> tuple[tuple[object, ...], dict[Path, object]]:
        node = NodeServer(config)
        running = asyncio.create_task(node.run())
        while node.application is None or node.application.lifecycle is None \
                or node.application.lifecycle.state is not BrokerState.RUNNING:
            await asyncio.sleep(0.02)
        app = node.application
        registered = app.broker_metadata.image.brokers[1].log_dirs
        node.request_stop()
        await asyncio.wait_for(running, 30)
        return registered, app._log_dirs

    registered, watched = asyncio.run(life())
    assert directory_id is not None and registered == (directory_id,) and watched == {}
