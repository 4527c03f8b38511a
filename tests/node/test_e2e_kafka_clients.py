"""End to end: Kafka's own clients, unmodified — confluent-kafka (librdkafka) and kafka-python —
against one controller and two brokers configured with Kafka's keys only (kafka_quickstart):
CreatePartitions (and Kafka's errors for it). Topic names are unique per run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka_quickstart import QuickstartCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickstartCluster]:
    with QuickstartCluster(tmp_path_factory.mktemp("clients"), controllers=1, brokers=2) as c:
        c.start()
        c.wait_healthy()
        yield c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s")


def test_confluent_kafka_create_partitions(cluster: QuickstartCluster) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    name = unique("cp-confluent")
    admin.create_topics([NewTopic(name, 1, 2)], request_timeout=15)[name].result()
    admin.create_partitions([NewPartitions(name, 3)], request_timeout=15)[name].result()
    eventually(lambda: len(admin.list_topics(name, timeout=5).topics[name].partitions) == 3, what="3 partitions")
    parts = admin.list_topics(name, timeout=5).topics[name].partitions
    assert all(len(p.replicas) == 2 and p.leader in cluster.brokers for p in parts.values())

    admin.create_partitions([NewPartitions(name, 5)], validate_only=True, request_timeout=15)[name].result()
    assert len(admin.list_topics(name, timeout=5).topics[name].partitions) == 3  # validate_only changed nothing
    for bad, code in ((NewPartitions(name, 2), KafkaError.INVALID_PARTITIONS),
                      (NewPartitions(name, 4, [[1, 2]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
                      (NewPartitions(unique("missing"), 2), KafkaError.UNKNOWN_TOPIC_OR_PART)):
        with pytest.raises(KafkaException) as exc:
            admin.create_partitions([bad], request_timeout=15)[bad.topic].result()
        assert exc.value.args[0].code() == code, exc.value
    admin.delete_topics([name], request_timeout=15)[name].result()


def test_kafka_python_create_partitions(cluster: QuickstartCluster) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)
    try:
        name = unique("cp-kafka-python")
        admin.create_topics([NewTopic(name, 1, 1)])
        admin.create_partitions({name: NewPartitions(total_count=4)})
        eventually(lambda: len(admin.describe_topics([name])[0]["partitions"]) == 4, what="4 partitions")
        brokers = cluster.brokers
        admin.create_partitions({name: NewPartitions(total_count=5, new_assignments=[[brokers[1]]])})
        eventually(lambda: len(admin.describe_topics([name])[0]["partitions"]) == 5, what="5 partitions")
        p4 = next(p for p in admin.describe_topics([name])[0]["partitions"] if p["partition_index"] == 4)
        assert list(p4["replica_nodes"]) == [brokers[1]] and p4["leader_id"] == brokers[1]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({name: NewPartitions(total_count=2)})
        admin.delete_topics([name])
    finally:
        admin.close()
