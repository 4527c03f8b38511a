"""Authorization of the data plane (node.security.enforce): Produce needs WRITE on the topic, a
consumer's Fetch READ, ListOffsets and OffsetForLeaderEpoch DESCRIBE — refused topics answered
TOPIC_AUTHORIZATION_FAILED per partition beside what the core served — and a follower's Fetch
(replica id >= 0) CLUSTER_ACTION on the cluster."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.security.acl import AclBinding, AclOperation, ResourceType
from kraftlab.node.security.authorizer import StandardAuthorizer
from kraftlab.node.security.enforce import screen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from replication_helpers import batch, fetch, list_offsets, manager, produce, replies, set_topic

from kraftlab.node.controller.messages import as_values, build
from kraftlab.node.metadata.image import PartitionInfo

ALICE = "User:alice"


def check(acls: list[AclBinding]):  # type: ignore[no-untyped-def]
    authorizer = StandardAuthorizer()
    return lambda op, rtype, name: authorizer.authorize(acls, ALICE, "h", op, rtype, name).allowed


def allow(rtype: int, name: str, op: int) -> AclBinding:
    return AclBinding(rtype, name, 3, ALICE, "*", op, 3)


def two_topics(request: object, field: str) -> object:
    """`request` naming topics "a" and "b" (the same partitions for both)."""
    values = as_values(request)
    first = values[field][0]
    values[field] = [{**first, **{k: n for k in ("name", "topic") if k in first}} for n in ("a", "b")]
    return build(type(request), values)


def test_produce_serves_writable_topics_and_refuses_the_rest(tmp_path: Path) -> None:
    m = manager(tmp_path)
    image = MetadataImage()
    for n, tid in (("a", 1), ("b", 2)):
        set_topic(image, n, {0: PartitionInfo((1,), (1,), leader=1)}, uuid.UUID(int=tid))
    m.apply_image(image, 0)
    request = two_topics(produce(batch("x")), "topic_data")
    s = screen("Produce", request, check([allow(ResourceType.TOPIC, "a", AclOperation.WRITE)]), image, True)
    assert s.reply is None and [t.name for t in s.request.topic_data] == ["a"]
    m.handle("p", s.request, 0)
    answer = s.finish(replies(m)["p"])
    got = {t.name: (t.partition_responses[0].error_code, t.partition_responses[0].base_offset)
           for t in answer.responses}
    assert got == {"a": (ErrorCode.none, 0), "b": (ErrorCode.topic_authorization_failed, -1)}
    acks0 = screen("Produce", two_topics(produce(batch("x"), acks=0), "topic_data"),
                   check([allow(ResourceType.TOPIC, "a", AclOperation.WRITE)]), image, True)
    assert acks0.finish(None) is None  # acks=0: still no answer


def test_fetch_and_list_offsets_need_read_and_describe() -> None:
    image = MetadataImage()
    nothing = check([])
    refused = screen("Fetch", fetch(0, topic="a"), nothing, image, True).reply
    part = refused.responses[0].partitions[0]
    assert part.error_code == ErrorCode.topic_authorization_failed and part.high_watermark == -1
    reader = check([allow(ResourceType.TOPIC, "a", AclOperation.READ)])
    assert screen("Fetch", fetch(0, topic="a"), reader, image, True).request is not None
    listed = screen("ListOffsets", list_offsets(-1, topic="a"), reader, image, True).reply  # READ implies DESCRIBE
    assert listed is None
    refused_list = screen("ListOffsets", list_offsets(-1, topic="a"), nothing, image, True).reply
    assert refused_list.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


def test_a_followers_fetch_needs_cluster_action() -> None:
    image = MetadataImage()
    reader = check([allow(ResourceType.TOPIC, "a", AclOperation.READ)])
    denied = screen("Fetch", fetch(0, topic="a", replica=2), reader, image, True).reply
    assert denied is not None and denied.error_code == ErrorCode.cluster_authorization_failed
    broker = check([allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)])
    assert screen("Fetch", fetch(0, topic="a", replica=2), broker, image, True).request is not None
