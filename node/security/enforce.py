"""Which operation each API needs, and the request each principal may have served (pure).

`screen(api, request, check, image)` decides, before a request reaches the controller or broker
core, what the principal may do, with Kafka's operations and error codes:

- CreateTopics: CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED per topic;
- DeleteTopics: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED per topic;
- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the
  topic (TOPIC_AUTHORIZATION_FAILED) or, for broker resources, the cluster
  (CLUSTER_AUTHORIZATION_FAILED), per resource;
- Metadata: DESCRIBE on each topic; others are left out (all topics asked) or answered
  TOPIC_AUTHORIZATION_FAILED (named);
- DescribeCluster, DescribeAcls, DescribeUserScramCredentials, DescribeQuorum,
  ListPartitionReassignments: DESCRIBE on the cluster; CreateAcls, DeleteAcls,
  AlterUserScramCredentials, UnregisterBroker, AlterPartitionReassignments, ElectLeaders: ALTER on
  the cluster; BrokerRegistration, BrokerHeartbeat, AlterPartition: CLUSTER_ACTION on the cluster
  — else CLUSTER_AUTHORIZATION_FAILED;
- AlterClientQuotas / DescribeClientQuotas: ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster;
- InitProducerId: IDEMPOTENT_WRITE on the cluster; AllocateProducerIds: CLUSTER_ACTION;
- Produce: WRITE on the topic; Fetch from a consumer: READ on the topic (from a follower, a replica
  id >= 0: CLUSTER_ACTION on the cluster); ListOffsets and OffsetForLeaderEpoch from a client:
  DESCRIBE on the topic — else TOPIC_AUTHORIZATION_FAILED for each partition of the topic;
- any other API: CLUSTER_ACTION on the cluster (fail safe: an API added without a rule here is
  served to super users and brokers only).

Without an authorizer the ACL APIs answer SECURITY_DISABLED. The result is a `Screening`: a
reply to send now (everything refused), or the request to serve — only its permitted items — and
a `finish` that adds the refused items' results to the core's response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import as_values, build, respond
from kraftlab.node.controller.quorum_controller import error_response
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import RESOURCE_TOPIC
from kraftlab.node.security.acl import CLUSTER_NAME, AclOperation, ResourceType

Check = Callable[[int, int, str], bool]
"""(operation, resource type, resource name) → allowed for the request's principal."""

AUTHORIZATION_FAILED = "Authorization failed."
ACL_APIS = frozenset({"CreateAcls", "DeleteAcls", "DescribeAcls"})
_CLUSTER_OPERATION = {
    "DescribeCluster": AclOperation.DESCRIBE,
    "DescribeAcls": AclOperation.DESCRIBE,
    "DescribeUserScramCredentials": AclOperation.DESCRIBE,
    "DescribeQuorum": AclOperation.DESCRIBE,
    "ListPartitionReassignments": AclOperation.DESCRIBE,
    "CreateAcls": AclOperation.ALTER,
    "DeleteAcls": AclOperation.ALTER,
    "AlterUserScramCredentials": AclOperation.ALTER,
    "UnregisterBroker": AclOperation.ALTER,
    "AlterPartitionReassignments": AclOperation.ALTER,
    "ElectLeaders": AclOperation.ALTER,
    "AlterClientQuotas": AclOperation.ALTER_CONFIGS,  # as Kafka: quotas are cluster configs
    "DescribeClientQuotas": AclOperation.DESCRIBE_CONFIGS,
    "BrokerRegistration": AclOperation.CLUSTER_ACTION,
    "BrokerHeartbeat": AclOperation.CLUSTER_ACTION,
    "AlterPartition": AclOperation.CLUSTER_ACTION,
    "AllocateProducerIds": AclOperation.CLUSTER_ACTION,
    "InitProducerId": AclOperation.IDEMPOTENT_WRITE,  # Kafka's cluster check (KIP-679's WRITE on any topic: not yet)
}


def _same(response: Any) -> Any:
    return response


@dataclass(frozen=True, slots=True)
class _TopicItems:
    """Where a data-plane API keeps its topics and partitions, in its request and its response."""

    operation: AclOperation
    items: str  # request field of the topics
    name: str  # topic name field (request and response)
    partitions: str  # request field of a topic's partitions
    index: str  # request field of a partition's index
    result: str  # response field of the topics
    result_partitions: str
    result_index: str
    filler: tuple[tuple[str, Any], ...] = ()  # other fields of a refused partition's result


_DATA_PLANE = {
    "Produce": _TopicItems(AclOperation.WRITE, "topic_data", "name", "partition_data", "index", "responses",
                           "partition_responses", "index", (("base_offset", -1),)),
    "Fetch": _TopicItems(AclOperation.READ, "topics", "topic", "partitions", "partition", "responses",
                         "partitions", "partition_index", (("high_watermark", -1), ("records", None))),
    "ListOffsets": _TopicItems(AclOperation.DESCRIBE, "topics", "name", "partitions", "partition_index", "topics",
                               "partitions", "partition_index"),
    "OffsetForLeaderEpoch": _TopicItems(AclOperation.DESCRIBE, "topics", "topic", "partitions", "partition",
                                        "topics", "partitions", "partition"),
}  # fmt: skip


def _data_plane(api: str, request: Any, check: Check) -> Screening:
    """A data-plane request with the topics the principal may not touch answered
    TOPIC_AUTHORIZATION_FAILED per partition; replicas (replica id >= 0) need CLUSTER_ACTION."""
    if api in ("Fetch", "OffsetForLeaderEpoch") and int(getattr(request, "replica_id", -1)) >= 0:
        if check(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return Screening(request=request)
        return Screening(reply=_cluster_refusal(api, request, ErrorCode.cluster_authorization_failed))
    shape = _DATA_PLANE[api]
    kept, refused = [], []
    for t in getattr(request, shape.items):
        name = getattr(t, shape.name)
        if check(shape.operation, ResourceType.TOPIC, name):
            kept.append(t)
            continue
        refused.append({shape.name: name, shape.result_partitions: [
            {shape.result_index: int(getattr(p, shape.index)), "error_code": ErrorCode.topic_authorization_failed,
             **dict(shape.filler)} for p in getattr(t, shape.partitions)]})  # fmt: skip
    screening = _partial(request, shape.items, kept, shape.result, refused)
    finish = screening.finish
    return Screening(screening.reply, screening.request,
                     lambda response: None if response is None else finish(response))  # acks=0: no answer


@dataclass
class Screening:
    reply: Any | None = None
    """Answer this now; the core never sees the request."""
    request: Any | None = None
    """Serve this (the permitted part of the request)."""
    finish: Callable[[Any], Any] = field(default=_same)
    """Applied to the core's response to `request` before it goes back."""


def _cluster_refusal(api: str, request: Any, code: ErrorCode) -> Any:
    """The whole request refused with `code` wherever its response carries errors."""
    return error_response(request, code)


def _partial(
    request: Any, items_field: str, kept: list[Any], result_field: str, refused: list[dict[str, Any]]
) -> Screening:
    if not refused:
        return Screening(request=request)
    if not kept:
        return Screening(reply=respond(request, {result_field: refused}))
    values = as_values(request)
    values[items_field] = [as_values(x) for x in kept]
    subset = build(type(request), values)

    def finish(response: Any) -> Any:
        merged = as_values(response)
        merged[result_field] = list(merged[result_field]) + refused
        return respond(request, merged)

    return Screening(request=subset, finish=finish)


def _config_resource(check: Check, op: int, rtype: int, name: str) -> ErrorCode:
    if rtype == RESOURCE_TOPIC:
        return ErrorCode.none if check(op, ResourceType.TOPIC, name) else ErrorCode.topic_authorization_failed
    if check(op, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.none
    return ErrorCode.cluster_authorization_failed


def _metadata_finish(request: Any, check: Check) -> Callable[[Any], Any]:
    listed_all = request.topics is None or (type(request).__version__ == 0 and not request.topics)

    def finish(response: Any) -> Any:
        values = as_values(response)
        topics = []
        for t in values["topics"]:
            if check(AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"] or ""):
                topics.append(t)
            elif not listed_all:
                topics.append({"name": t["name"], "topic_id": t.get("topic_id"),
                               "error_code": ErrorCode.topic_authorization_failed})
        values["topics"] = topics
        return respond(request, values)

    return finish


def screen(api: str, request: Any, check: Check, image: MetadataImage, authorizer_enabled: bool) -> Screening:
    """What of `request` the principal behind `check` may have served (see the module's table)."""
    if api in ACL_APIS and not authorizer_enabled:
        return Screening(reply=_cluster_refusal(api, request, ErrorCode.security_disabled))
    if not authorizer_enabled:
        return Screening(request=request)
    if api == "Metadata":
        return Screening(request=request, finish=_metadata_finish(request, check))
    if api == "CreateTopics":
        cluster_create = check(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        kept, refused = [], []
        for t in request.topics:
            if cluster_create or check(AclOperation.CREATE, ResourceType.TOPIC, t.name):
                kept.append(t)
            else:
                refused.append({"name": t.name, "error_code": ErrorCode.topic_authorization_failed,
                                "error_message": AUTHORIZATION_FAILED})
        return _partial(request, "topics", kept, "topics", refused)
    if api == "DeleteTopics":
        by_id = hasattr(request, "topics")
        kept, refused = [], []
        for t in request.topics if by_id else request.topic_names:
            name = (t.name if by_id else t) or ""
            if by_id and not name:
                info = image.topics.get(t.topic_id)
                name = info.name if info is not None else ""
            if name and check(AclOperation.DELETE, ResourceType.TOPIC, name):
                kept.append(t)
            else:
                item = {"name": name or None, "error_code": ErrorCode.topic_authorization_failed,
                        "error_message": AUTHORIZATION_FAILED}
                if by_id:
                    item["topic_id"] = t.topic_id
                refused.append(item)
        return _partial(request, "topics" if by_id else "topic_names", kept, "responses", refused)
    if api in ("DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs"):
        op = AclOperation.DESCRIBE_CONFIGS if api == "DescribeConfigs" else AclOperation.ALTER_CONFIGS
        kept, refused = [], []
        for r in request.resources:
            code = _config_resource(check, op, r.resource_type, r.resource_name)
            if code == ErrorCode.none:
                kept.append(r)
            else:
                refused.append({"resource_type": r.resource_type, "resource_name": r.resource_name,
                                "error_code": code, "error_message": AUTHORIZATION_FAILED})
        return _partial(request, "resources", kept, "results" if api == "DescribeConfigs" else "responses", refused)
    if api in _DATA_PLANE:
        return _data_plane(api, request, check)
    op = _CLUSTER_OPERATION.get(api, AclOperation.CLUSTER_ACTION)  # an API not listed here: fail safe
    if check(op, ResourceType.CLUSTER, CLUSTER_NAME):
        return Screening(request=request)
    return Screening(reply=_cluster_refusal(api, request, ErrorCode.cluster_authorization_failed))
