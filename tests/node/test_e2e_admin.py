"""End to end on loopback: 3 controllers + 3 brokers as real processes, driven by real Kafka admin
clients (confluent-kafka / librdkafka and kafka-python) on the brokers' listeners."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from pathlib import Path

import pytest

from kraftlab.node.cli import main as cli_main
from kraftlab.node.journal import read_journal
from kraftlab.testing.kraftnode import ProcessCluster
from kraftlab.testing.waiting import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def wait_brokers_unfenced(c: ProcessCluster) -> None:
    """Until every broker's listener lists every broker (only unfenced brokers are listed)."""
    from confluent_kafka.admin import AdminClient

    for port in c.broker_ports.values():
        probe = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        eventually(
            lambda probe=probe: set(probe.list_topics(timeout=5).brokers) == set(c.broker_ids),  # type: ignore[misc]
            what="every broker listed",
        )


def test_confluent_admin_topics_survive_controller_kill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    # the surviving controllers' logs decode: topic records as KIP-631 JSON
    survivor = next(i for i in c.ids if i != leader)
    capsys.readouterr()
    assert cli_main(["dump-log", str(c.meta_dir(survivor))]) == 0
    out = capsys.readouterr().out
    assert out.count('"type":"TOPIC_RECORD"') >= len(acked) and '"type":"REMOVE_TOPIC_RECORD"' in out
    assert '"type":"REGISTER_BROKER_RECORD"' in out


def check_cluster_tools(c: ProcessCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """kraft-node's cluster tools against a broker, controlled shutdown on SIGTERM, then unregister."""
    broker = f"127.0.0.1:{c.broker_ports[c.broker_ids[0]]}"
    capsys.readouterr()
    assert cli_main(["cluster-id", "--bootstrap-server", broker]) == 0
    assert capsys.readouterr().out.strip() == c.cluster_id
    assert cli_main(["describe-quorum", "--bootstrap-server", broker]) == 0
    quorum = json.loads(capsys.readouterr().out)
    assert quorum["leader"] in c.ids and sorted(v["id"] for v in quorum["voters"]) == c.ids
    assert {o["id"] for o in quorum["observers"]} == set(c.broker_ids)
    assert cli_main(["describe-cluster", "--bootstrap-server", broker]) == 0
    assert [b["id"] for b in json.loads(capsys.readouterr().out)["brokers"]] == c.broker_ids

    last = c.broker_ids[-1]
    assert c.kill(last, signal.SIGTERM, timeout=30) == 0
    states = [e["state"] for e in read_journal(c.journal(last)) if e["ev"] == "broker_state"]
    assert states[-2:] == ["PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN"], states

    def unregistered() -> bool:
        capsys.readouterr()
        return cli_main(["unregister", "--bootstrap-server", broker, "--id", str(last)]) == 0

    eventually(unregistered, what="unregister")

    def listed_brokers() -> list[int]:
        capsys.readouterr()
        assert cli_main(["describe-cluster", "--bootstrap-server", broker]) == 0
        return [b["id"] for b in json.loads(capsys.readouterr().out)["brokers"]]

    eventually(lambda: listed_brokers() == c.broker_ids[:-1], what="unregistered broker gone")


def test_kafka_python_admin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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

            eventually(create, timeout=60.0, what="topics created")  # each try may wait 15 s on a loaded machine
            eventually(lambda: set(names) <= set(admin.list_topics()), what="topics listed")

            def described() -> bool:  # brokers apply committed metadata a fetch later: poll
                topics = admin.describe_topics(names)
                return sorted(t["name"] for t in topics) == names and all(
                    t["error_code"] == 0 and len(t["partitions"][0]["replica_nodes"]) == 2 for t in topics
                )

            eventually(described, what="topics described with 2 replicas")
            admin.delete_topics(names, timeout_ms=15000)
            eventually(lambda: not (set(names) & set(admin.list_topics())), what="topics deleted")
        finally:
            admin.close()
        check_cluster_tools(c, capsys)
    finally:
        c.close()
