"""End to end: producer ids for idempotent producers, from Kafka's own clients, unmodified, against
one controller and two brokers configured with Kafka's keys only (kafka_quickstart).

librdkafka's idempotent producer acquires its producer id (InitProducerId) from a broker, which
holds a block granted by the controller (AllocateProducerIds, a ProducerIdsRecord in the log);
kafka-python's own InitProducerId message gets distinct ids from either broker, and a transactional
id is refused (no transaction coordinator here); the brokers' journalled grants pass the metadata
checker's producer-id rules."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pytest
from kafka_quickstart import QuickstartCluster

from kraftlab.checker.journal import journals_from
from kraftlab.checker.metadata.check import check_metadata

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

COORDINATOR_NOT_AVAILABLE = 15


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickstartCluster]:
    with QuickstartCluster(tmp_path_factory.mktemp("pids"), controllers=1, brokers=2) as c:
        c.start()
        c.wait_healthy()
        yield c


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_librdkafka_idempotent_producer_acquires_its_producer_id(cluster: QuickstartCluster) -> None:
    from confluent_kafka import Producer

    lines = _Lines()
    logger = logging.getLogger(f"rdkafka-{id(lines)}")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "debug": "eos",
                         "logger": logger})
    acquired: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while not acquired and time.monotonic() < deadline:
        producer.poll(0.2)
        acquired = [(int(m[1]), int(m[2])) for line in lines.lines
                    if (m := re.search(r"Acquired PID\{Id:(\d+),Epoch:(\d+)\}", line))]
    assert acquired, "\n".join(lines.lines[-20:])
    pid, epoch = acquired[0]
    assert epoch == 0
    grants = [e for b in cluster.brokers for e in cluster.journal(b) if e["ev"] == "producer_id"]
    assert pid in [e["producer_id"] for e in grants]


def test_kafka_python_init_producer_id_gets_distinct_ids_from_either_broker(cluster: QuickstartCluster) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15_000)
    manager = admin._manager  # type: ignore[attr-defined]
    try:
        ids = []
        for broker in cluster.brokers * 2:
            resp = manager.run(manager.send, InitProducerIdRequest(transactional_id=None,
                                                                   transaction_timeout_ms=60_000), broker)
            assert (resp.error_code, resp.producer_epoch) == (0, 0), resp
            ids.append(resp.producer_id)
        assert len(set(ids)) == len(ids)
        assert ids[0] // 1000 != ids[1] // 1000  # each broker hands out its own block
        tx = manager.run(manager.send, InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=60_000),
                         cluster.brokers[0])
        assert (tx.error_code, tx.producer_id) == (COORDINATOR_NOT_AVAILABLE, -1)
    finally:
        admin.close()


def test_the_journalled_grants_pass_the_metadata_checker(cluster: QuickstartCluster) -> None:
    entries = [e for i in cluster.procs for e in cluster.journal(i)]
    res = check_metadata(journals_from(entries))
    assert res["valid"] is True, res["explanation"]
    assert "ProducerIdUnique" not in res.get("not_checked", {})
    assert res["stats"]["producer_ids_handed_out"] >= 4 and res["stats"]["producer_id_blocks_received"] >= 2
