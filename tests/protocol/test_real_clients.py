"""Real Kafka clients (librdkafka via confluent-kafka, and kafka-python) against the protocol server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from kraftlab.node.protocol.server import ProtocolServer
from protocol.handlers import TopicStore, example_registry

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python uses deprecated importlib APIs


@pytest.fixture
def served_store() -> Iterator[tuple[TopicStore, int]]:
    """The example registry served on a loopback port from a background event loop."""
    store = TopicStore(topics={"alpha": 1})
    loop = asyncio.new_event_loop()
    server = ProtocolServer(example_registry(store), "127.0.0.1", 0)
    loop.run_until_complete(server.start())
    store.port = server.port
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield store, server.port
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_librdkafka_lists_and_creates_topics(served_store: tuple[TopicStore, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    store, port = served_store
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "broker.address.family": "v4"})
    metadata = admin.list_topics(timeout=10)
    assert list(metadata.topics) == ["alpha"]
    assert [(b.id, b.port) for b in metadata.brokers.values()] == [(1, port)]
    futures = admin.create_topics([NewTopic("beta", 2, 1)], operation_timeout=5)
    assert futures["beta"].result(timeout=10) is None
    assert store.topics == {"alpha": 1, "beta": 2}
    again = admin.create_topics([NewTopic("beta", 2, 1)], operation_timeout=5)
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        again["beta"].result(timeout=10)


def test_kafka_python_lists_topics(served_store: tuple[TopicStore, int]) -> None:
    from kafka import KafkaAdminClient

    _, port = served_store
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=10_000)
    try:
        assert sorted(admin.list_topics()) == ["alpha"]
    finally:
        admin.close()
