"""End to end: Kafka's own clients, unmodified — confluent-kafka (librdkafka) and kafka-python —
against one controller and two brokers configured with Kafka's keys only (kafka_quickstart):
CreatePartitions (and Kafka's errors for it); client quotas altered and described (kafka-python's
own AlterClientQuotas/DescribeClientQuotas messages: neither client has an admin call for them) and
the request-rate quota throttling a librdkafka client (its throttle callback). Names are unique per run."""

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


def _kafka_python_send(admin: object, request: object) -> object:
    manager = admin._manager  # type: ignore[attr-defined]
    return manager.run(manager.send, request)


def test_kafka_python_alters_and_describes_client_quotas(cluster: QuickstartCluster) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest as Alter
    from kafka.protocol.admin import DescribeClientQuotasRequest as Describe

    user, client = unique("quota-user"), unique("quota-client")

    def entry(entity: dict[str, str | None], **ops: float | None) -> object:
        return Alter.EntryData(
            entity=[Alter.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[Alter.EntryData.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])

    def alter(*entries: object) -> list[tuple[int, str | None]]:
        resp = _kafka_python_send(admin, Alter(entries=list(entries), validate_only=False))
        return [(e.error_code, e.error_message) for e in resp.entries]  # type: ignore[attr-defined]

    def describe(components: list[tuple[str, int, str | None]], strict: bool = False) -> dict[str, dict[str, float]]:
        resp = _kafka_python_send(admin, Describe(components=[
            Describe.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict))
        assert resp.error_code == 0, resp  # type: ignore[attr-defined]
        return {",".join(f"{e.entity_type}={e.entity_name}" for e in x.entity): {v.key: v.value for v in x.values}
                for x in resp.entries}  # type: ignore[attr-defined]

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)
    try:
        assert alter(entry({"user": user}, producer_byte_rate=1024.0, request_percentage=200.0),
                     entry({"user": user, "client-id": client}, consumer_byte_rate=2048.0)) == [(0, None), (0, None)]
        eventually(lambda: describe([("user", 0, user)], strict=True) == {
            f"user={user}": {"producer_byte_rate": 1024.0, "request_percentage": 200.0}}, what="quota described")
        both = describe([("user", 0, user)])
        assert both[f"client-id={client},user={user}"] == {"consumer_byte_rate": 2048.0}
        (code, message), = alter(entry({"user": user}, no_such_quota=1.0))
        assert code == 42 and "no_such_quota" in (message or "")  # INVALID_REQUEST
        assert alter(entry({"user": user}, producer_byte_rate=None, request_percentage=None)) == [(0, None)]
        eventually(lambda: describe([("user", 0, user)], strict=True) == {}, what="quota removed")
    finally:
        admin.close()


def test_request_rate_quota_throttles_a_librdkafka_client(cluster: QuickstartCluster) -> None:
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest as Alter

    client = unique("throttled")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)
    try:
        entry = Alter.EntryData(entity=[Alter.EntryData.EntityData(entity_type="client-id", entity_name=client)],
                                ops=[Alter.EntryData.OpData(key="request_percentage", value=0.01, remove=False)])
        resp = _kafka_python_send(admin, Alter(entries=[entry], validate_only=False))
        assert resp.entries[0].error_code == 0  # type: ignore[attr-defined]
    finally:
        admin.close()
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": f"localhost:{cluster.ports[cluster.brokers[0]]}", "client.id": client,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    unlimited = Producer({"bootstrap.servers": f"localhost:{cluster.ports[cluster.brokers[0]]}",
                          "client.id": unique("free"), "throttle_cb": lambda event: throttles.append(-1)})
    deadline = time.monotonic() + 60
    while not throttles and time.monotonic() < deadline:  # the quota reaches the broker's image, then bites
        producer.list_topics(timeout=10)
        unlimited.list_topics(timeout=10)
        producer.poll(0.1)
        unlimited.poll(0)
    assert throttles and all(t > 0 for t in throttles), throttles  # throttled, and only the quota's client
