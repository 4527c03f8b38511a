"""End to end on loopback: 3 controllers + 3 brokers as real processes, driven by real Kafka admin
clients (confluent-kafka / librdkafka and kafka-python) on the brokers' listeners."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kraftnode_helpers import ProcessCluster

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def eventually(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll `check` (an exception counts as not yet) until it holds."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s (last error: {last})")


def wait_brokers_unfenced(c: ProcessCluster) -> None:
    """Until every broker's listener lists every broker (only unfenced brokers are listed)."""
    from confluent_kafka.admin import AdminClient

    for port in c.broker_ports.values():
        probe = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        eventually(lambda probe=probe: set(probe.list_topics(timeout=5).brokers) == set(c.broker_ids),  # type: ignore[misc]
                   what="every broker listed")


def test_confluent_admin_topics_survive_controller_kill(tmp_path: Path) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic

    c = ProcessCluster(tmp_path, brokers=3)
    try:
        c.start_all()
        leader, _ = c.wait_leader()
        wait_brokers_unfenced(c)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})

        def create(names: list[str]) -> set[str]:
            futures = admin.create_topics([NewTopic(n, 1, 3) for n in names], request_timeout=15)
            acked = set()
            for name, future in futures.items():
                try:
                    future.result()
                    acked.add(name)
                except Exception as e:  # an unacknowledged create may or may not exist: not checked
                    print(f"create {name}: {e}")
            return acked

        acked = create([f"t{i}" for i in range(10)])
        assert len(acked) == 10
        c.kill(leader, signal.SIGKILL)  # the active controller
        c.wait_leader(exclude=leader)
        acked |= create([f"t{i}" for i in range(10, 20)])
        assert len(acked) >= 15  # a few may fail while the new controller takes over

        def listed() -> set[str]:
            return set(admin.list_topics(timeout=5).topics)

        eventually(lambda: acked <= listed(), what="every acknowledged topic listed")
        md = admin.list_topics(timeout=5)
        for name in acked:
            (part,) = md.topics[name].partitions.values()
            assert sorted(part.replicas) == c.broker_ids and part.leader in c.broker_ids
        assert set(admin.describe_topics(TopicCollection(sorted(acked)))) == acked

        futures = admin.delete_topics(sorted(acked), request_timeout=15)
        for future in futures.values():
            future.result()
        eventually(lambda: not (acked & listed()), what="deleted topics gone")
    finally:
        c.close()


def test_kafka_python_admin(tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    c = ProcessCluster(tmp_path, brokers=3)
    try:
        c.start_all()
        c.wait_leader()
        wait_brokers_unfenced(c)  # kafka-python keeps its first view of the brokers for minutes
        admin: KafkaAdminClient | None = None
        deadline = time.monotonic() + 30
        while admin is None:
            try:
                admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10000)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        try:
            eventually(lambda: len(admin.describe_cluster()["brokers"]) == 3, what="3 brokers")
            names = [f"kp{i}" for i in range(5)]

            def create() -> bool:  # retried: the client's cached metadata may not know the controller yet
                with contextlib.suppress(TopicAlreadyExistsError):
                    admin.create_topics([NewTopic(n, 1, 2) for n in names], timeout_ms=15000)
                return True

            eventually(create, what="topics created")
            eventually(lambda: set(names) <= set(admin.list_topics()), what="topics listed")

            def described() -> bool:  # brokers apply committed metadata a fetch later: poll
                topics = admin.describe_topics(names)
                return sorted(t["name"] for t in topics) == names and all(
                    t["error_code"] == 0 and len(t["partitions"][0]["replica_nodes"]) == 2 for t in topics)

            eventually(described, what="topics described with 2 replicas")
            admin.delete_topics(names, timeout_ms=15000)
            eventually(lambda: not (set(names) & set(admin.list_topics())), what="topics deleted")
        finally:
            admin.close()
    finally:
        c.close()
