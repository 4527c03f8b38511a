"""The broker's Metadata answers, byte for byte against a second implementation of Kafka's schema.

kio (the node's codec) and kafka-python's protocol classes are both built from Kafka's message JSON
but are separate code: every version the broker serves (0..12) must decode with kafka-python's
MetadataResponse of that version and encode back to the very same bytes — no trailing byte, no
field of another version, null strings and compact arrays as Kafka writes them. The answers cover
a topic with two partitions, a topic whose only replica's broker is fenced (leaderless, an offline
replica), an unknown topic, and the broker list without the fenced broker."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
from broker_harness import MiniCluster
from kafka.protocol.metadata import MetadataResponse as KafkaPythonMetadataResponse
from test_apis import _create, _up

from kraftlab.node.protocol.codec import encode_entity
from kraftlab.node.protocol.served import BROKER_API_VERSIONS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python reads its schemas the old way
_, LOWEST, HIGHEST = BROKER_API_VERSIONS["Metadata"]


def _request(version: int, names: tuple[str, ...] | None) -> Any:
    module = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    fields = {f.name for f in dataclasses.fields(module.MetadataRequest)}
    flags = {k: False for k in ("allow_auto_topic_creation", "include_cluster_authorized_operations",
                                "include_topic_authorized_operations") if k in fields}
    if names is None:
        return module.MetadataRequest(topics=None if version else (), **flags)
    topic_fields = {f.name for f in dataclasses.fields(module.MetadataRequestTopic)}
    ids = {"topic_id": None} if "topic_id" in topic_fields else {}
    return module.MetadataRequest(topics=tuple(module.MetadataRequestTopic(name=n, **ids) for n in names), **flags)


@pytest.fixture(scope="module")
def cluster() -> MiniCluster:
    mc = MiniCluster()
    _up(mc)
    _create(mc, "two", partitions=2, rf=2)
    _create(mc, "lone", partitions=1, rf=1)
    mc.run(100)
    lone = mc.brokers[101].metadata.image.topic("lone")
    assert lone is not None
    owner = lone.partitions[0].replicas[0]
    # the lone replica's broker is cut off until fenced: its partition is left leaderless, its replica offline
    mc.cut.add(owner)
    mc.run_until(lambda: mc.active().future_image.brokers[owner].fenced, max_ms=15_000)
    mc.run(500)
    return mc


@pytest.mark.parametrize("version", range(LOWEST, HIGHEST + 1))
def test_metadata_answer_is_kafkas_bytes(cluster: MiniCluster, version: int) -> None:
    asker = next(b for b in cluster.brokers if b not in cluster.cut)
    for names in (None, ("two", "lone", "missing")):
        response = cluster.client(asker, f"md-{version}-{names}", _request(version, names)).response
        ours = encode_entity(response)
        theirs = KafkaPythonMetadataResponse[version].decode(ours)
        assert theirs.encode() == ours, f"v{version}: kafka-python re-encodes {theirs} differently"
        listed = {t.name: t for t in theirs.topics}
        assert set(listed) == {"two", "lone", *(() if names is None else ("missing",))}
        assert [p.leader_id for p in listed["lone"].partitions] == [-1]
        if version >= 5:
            assert [list(p.offline_replicas) for p in listed["lone"].partitions] == [
                list(listed["lone"].partitions[0].replica_nodes)]
        assert len(theirs.brokers) == len(cluster.brokers) - 1
