"""End to end: Kafka's own clients list a cluster with many topics — the Metadata answer of a broker
must parse in librdkafka (confluent-kafka, and kcat when installed) whatever the topic count.

librdkafka sizes the buffer it parses a Metadata response into at four times the response's wire
length (five with `client.rack`); each topic and partition it keeps costs a fixed number of bytes.
Short topic names with one partition and one replica are the tightest case: at Metadata v9 (no
topic ids) ten such topics already failed with "tmpabuf memory shortage", against Kafka's v12 they
fit. One controller and two brokers (Kafka's quickstart keys); 150 topics named `m0`… (one
partition, one replica; every tenth with three partitions and two replicas), created in batches;
the cluster is this module's own, so the names are unique to the run."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from kafka_quickstart import QuickstartCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOPICS = 150


def _layout(i: int) -> tuple[int, int]:
    """(partitions, replication factor) of topic `m{i}`."""
    return (3, 2) if i % 10 == 9 else (1, 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickstartCluster]:
    from confluent_kafka.admin import AdminClient, NewTopic

    with QuickstartCluster(tmp_path_factory.mktemp("metadata-clients"), controllers=1, brokers=2) as c:
        c.start()
        c.wait_healthy()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        names = [f"m{i}" for i in range(TOPICS)]
        for start in range(0, TOPICS, 50):
            batch = [NewTopic(n, *_layout(i)) for i, n in enumerate(names) if start <= i < start + 50]
            for future in admin.create_topics(batch, request_timeout=30).values():
                future.result()
        yield c


def _expected() -> dict[str, tuple[int, int]]:
    return {f"m{i}": _layout(i) for i in range(TOPICS)}


def _listed_by_librdkafka(config: dict[str, str]) -> dict[str, tuple[int, int]]:
    """{topic: (partitions, replicas of partition 0)} from one all-topics Metadata request, once
    every broker's image shows every topic with a leader (creation is visible through the broker
    that forwarded it first)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    deadline = time.monotonic() + 30
    while True:
        try:
            md = admin.list_topics(timeout=10)  # a parse failure raises _BAD_MSG here
        except KafkaException as e:
            raise AssertionError(f"librdkafka could not read the Metadata answer: {e}") from e
        listed = {n: (len(t.partitions), len(t.partitions[0].replicas)) for n, t in md.topics.items()
                  if t.error is None and 0 in t.partitions and all(p.leader >= 0 for p in t.partitions.values())}
        if listed == _expected() or time.monotonic() > deadline:
            return listed
        time.sleep(0.5)


def test_librdkafka_lists_many_short_named_topics(cluster: QuickstartCluster) -> None:
    for broker in cluster.brokers:  # each broker answers from its own image
        listed = _listed_by_librdkafka({"bootstrap.servers": f"localhost:{cluster.ports[broker]}"})
        assert listed == _expected(), sorted(set(_expected().items()) ^ set(listed.items()))[:10]


def test_librdkafka_with_client_rack_lists_many_topics(cluster: QuickstartCluster) -> None:
    """With `client.rack` librdkafka also maps partitions to racks (a larger parse buffer, other code)."""
    listed = _listed_by_librdkafka({"bootstrap.servers": cluster.bootstrap, "client.rack": "r1"})
    assert listed == _expected()


def test_kcat_lists_many_topics(cluster: QuickstartCluster) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    out = subprocess.run([kcat, "-L", "-J", "-b", cluster.bootstrap], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = {t["topic"]: (len(t["partitions"]), len(t["partitions"][0]["replicas"]))
              for t in json.loads(out.stdout)["topics"] if "error" not in t}
    assert listed == _expected(), out.stderr
    assert sorted(b["id"] for b in json.loads(out.stdout)["brokers"]) == cluster.brokers
