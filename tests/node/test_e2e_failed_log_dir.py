"""A failed log directory end to end: one controller and two brokers, the first with two log
directories. Its replicas are placed on both; when one directory disappears under the running
broker, the broker reports it (BrokerHeartbeat OfflineLogDirs) and the controller moves leadership
and the ISR place of exactly the replicas there to the other broker, as librdkafka's metadata shows;
the replicas on the healthy directory keep their leader."""

from __future__ import annotations

import asyncio
import datetime
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from test_e2e_security import eventually

from kraftlab.node.config import render_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.storage.meta_properties import format_dirs, read_meta_properties
from kraftlab.testing.kraftnode import ProcessCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ProcessCluster, Path, Path]]:
    c = ProcessCluster(tmp_path, n=1, brokers=2)
    b1 = c.broker_ids[0]
    data, data2 = tmp_path / f"n{b1}" / "data", tmp_path / f"n{b1}" / "data2"
    format_dirs([data2], c.cluster_id, b1)
    c.configs[b1].write_text(c.configs[b1].read_text() + render_properties({"log.dirs": f"{data},{data2}"}))
    try:
        c.start_all()
        yield c, data, data2
    finally:
        c.close()


async def create(port: int, topic: str, assignment: list[list[int]]) -> Any:
    """CreateTopics with an explicit replica assignment (confluent-kafka 2.16's NewTopic refuses one)."""
    assigned = tuple(CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(r))
                     for i, r in enumerate(assignment))
    request = CreateTopicsRequest(topics=(CreatableTopic(name=topic, num_partitions=-1, replication_factor=-1,
                                                         assignments=assigned, configs=()),),
                                  timeout=datetime.timedelta(seconds=20), validate_only=False)
    async with ProtocolClient("127.0.0.1", port, request_timeout=30) as client:
        return (await client.send(request)).topics[0]


def partitions(admin: Any, topic: str) -> dict[int, tuple[int, list[int]]]:
    meta = admin.list_topics(topic, timeout=5).topics[topic]
    return {pid: (p.leader, sorted(p.isrs)) for pid, p in meta.partitions.items()}


def test_a_failed_log_directory_moves_leadership_off_its_replicas(cluster: tuple[ProcessCluster, Path, Path]) -> None:
    from confluent_kafka.admin import AdminClient

    c, data, data2 = cluster
    b1, b2 = c.broker_ids
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
    eventually(lambda: len(admin.list_topics(timeout=5).brokers) == 2, what="two brokers")
    topic = f"dirs-{uuid.uuid4().hex[:8]}"
    created = asyncio.run(create(c.broker_ports[b1], topic, [[b1, b2], [b1, b2]]))
    assert created.error_code == ErrorCode.none, created
    both = {0: (b1, [b1, b2]), 1: (b1, [b1, b2])}
    eventually(lambda: partitions(admin, topic) == both, what="both partitions led by the first broker")

    # the controller places partition p on the broker's directories in id order, p mod 2
    gone = read_meta_properties(data2).directory_id
    ids = sorted([read_meta_properties(data).directory_id, gone])
    on_data2 = ids.index(gone)
    # the broker keeps each replica's log where the controller placed it
    eventually(lambda: (data2 / f"{topic}-{on_data2}").is_dir() and (data / f"{topic}-{1 - on_data2}").is_dir(),
               what="the partition logs in their assigned directories")
    shutil.rmtree(data2)  # the disk is gone
    began = time.monotonic()
    moved = {on_data2: (b2, [b2]), 1 - on_data2: (b1, [b1, b2])}
    eventually(lambda: partitions(admin, topic) == moved, what="leadership moved off the failed directory only")
    print(f"leadership moved {time.monotonic() - began:.2f} s after the directory was removed")
    failed = [e for e in read_journal(c.journal(b1)) if e["ev"] == "log_dir_failed"]
    assert [e["directory"] for e in failed] == [str(ids[on_data2])]
    assert admin.list_topics(timeout=5).brokers.keys() == {b1, b2}  # the broker itself stays in service
