"""Which requests a principal may have served (node.security.enforce), Kafka's error codes."""

from __future__ import annotations

import uuid

from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v9.request import MetadataRequest, MetadataRequestTopic

from kraftlab.node.broker.apis import metadata_response
from kraftlab.node.controller.messages import respond
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import PartitionRecord, TopicRecord
from kraftlab.node.security.acl import AclBinding, AclOperation, ResourceType
from kraftlab.node.security.authorizer import StandardAuthorizer
from kraftlab.node.security.enforce import screen

ALICE = "User:alice"


def _check(acls: list[AclBinding], principal: str = ALICE):  # type: ignore[no-untyped-def]
    authorizer = StandardAuthorizer()
    return lambda op, rtype, name: authorizer.authorize(acls, principal, "h", op, rtype, name).allowed


def _topic(name: str, op: int) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, 3, ALICE, "*", op, 3)


def _create(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=tuple(CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                                           assignments=(), configs=()) for n in names),
                               timeout=30000, validate_only=False)


def test_create_topics_serves_the_permitted_topics_and_refuses_the_rest() -> None:
    image = MetadataImage()
    s = screen("CreateTopics", _create("a", "b"), _check([_topic("a", AclOperation.CREATE)]), image, True)
    assert s.reply is None and [t.name for t in s.request.topics] == ["a"]
    core = respond(s.request, {"topics": [{"name": "a", "error_code": ErrorCode.none}]})
    final = s.finish(core)
    assert isinstance(final, CreateTopicsResponse)
    assert {t.name: t.error_code for t in final.topics} == {"a": ErrorCode.none,
                                                            "b": ErrorCode.topic_authorization_failed}
    s = screen("CreateTopics", _create("a"), _check([]), image, True)
    assert s.reply is not None and s.reply.topics[0].error_code == ErrorCode.topic_authorization_failed
    cluster = AclBinding(ResourceType.CLUSTER, "kafka-cluster", 3, ALICE, "*", AclOperation.CREATE, 3)
    assert screen("CreateTopics", _create("a", "b"), _check([cluster]), image, True).reply is None


def test_cluster_apis_need_their_operation_and_acl_apis_need_an_authorizer() -> None:
    image = MetadataImage()
    describe = DescribeClusterRequest(include_cluster_authorized_operations=False)
    assert screen("DescribeCluster", describe, _check([]), image, True).reply.error_code == (
        ErrorCode.cluster_authorization_failed)
    assert screen("DescribeCluster", describe, _check([]), image, False).reply is None
    acls = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                               principal_filter=None, host_filter=None, operation=1, permission_type=1)
    assert screen("DescribeAcls", acls, _check([]), image, False).reply.error_code == ErrorCode.security_disabled
    create = CreateAclsRequest(creations=())
    assert screen("CreateAcls", create, _check([]), image, True).reply is not None


def test_metadata_lists_only_describable_topics_and_refuses_named_ones() -> None:
    image = MetadataImage()
    for i, name in enumerate(("a", "b")):
        tid = uuid.UUID(int=i + 1)
        image.apply(TopicRecord(name=name, topic_id=tid))
        image.apply(PartitionRecord(partition_id=0, topic_id=tid, replicas=(1,), isr=(1,), leader=1))
    check = _check([_topic("a", AclOperation.READ)])
    everything = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                 include_cluster_authorized_operations=False,
                                 include_topic_authorized_operations=False)
    s = screen("Metadata", everything, check, image, True)
    listed = s.finish(metadata_response(s.request, image, "c", "PLAINTEXT"))
    assert [t.name for t in listed.topics] == ["a"]
    named = MetadataRequest(topics=(MetadataRequestTopic(name="b"),), allow_auto_topic_creation=False,
                            include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    s = screen("Metadata", named, check, image, True)
    refused = s.finish(metadata_response(s.request, image, "c", "PLAINTEXT"))
    assert [(t.name, t.error_code, t.partitions) for t in refused.topics] == [
        ("b", ErrorCode.topic_authorization_failed, ())]
