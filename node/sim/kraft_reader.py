"""A client reading the cluster through the cluster simulator's brokers, as Kafka's clients learn it,
and the judgement of each answer against the image of the broker that gave it.

A broker answers these from its own metadata image, at once; the rules, in Kafka's words:
- Metadata (v12, all topics or some by name, an unknown one among them): the brokers listed are
  exactly the image's unfenced brokers with an endpoint on the listener asked on; a known topic is
  NONE with its id and every partition's leader, leader epoch, replicas and ISR as the image holds
  them, LEADER_NOT_AVAILABLE for a partition with no leader; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
- DescribeCluster (v2): the unfenced brokers (every broker, fenced ones marked, when
  IncludeFencedBrokers); asked for the controllers' endpoints (KIP-919 endpoint type 2) a broker
  answers MISMATCHED_ENDPOINT_TYPE and nothing else.
- DescribeClientQuotas (v1, every entity): exactly the image's quotas (which the admin client
  alters through the controllers).
- DescribeAcls (v3, a filter matching any binding): every binding of the image, once;
  DescribeUserScramCredentials (v0, all users — asked with null or an empty list — or some by
  name): each named user without a
  credential RESOURCE_NOT_FOUND, the others NONE with the mechanisms the image holds.
- Read-your-writes (judged by the simulator on each acknowledgement): a broker that relays a
  topic's creation before its visibility wait has run out shows the topic in its own image.
A broker that is not serving reads may refuse (the connection closes); that is never judged wrong.
"""

from __future__ import annotations

import random
from typing import Any

from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i8

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import NO_LEADER

LISTENER = "PLAINTEXT"


class BrokerReader:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def request(self, image: MetadataImage) -> Any:
        """The next read, drawn against the topics of `image` (the broker's own)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.5:
            names = sorted(t.name for t in image.topics.values())
            if not names or rng.random() < 0.3:
                return MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False)
            asked = [*rng.sample(names, min(len(names), rng.randint(1, 3))), f"no-such-topic-{rng.randrange(3)}"]
            return MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in asked),
                                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        if roll < 0.85:
            return DescribeClusterRequest(include_cluster_authorized_operations=False,
                                          endpoint_type=i8(2 if rng.random() < 0.15 else 1),
                                          include_fenced_brokers=rng.random() < 0.5)
        if roll < 0.9:
            return DescribeClientQuotasRequest(components=(), strict=False)
        if roll < 0.95:  # ANY (1) for every enum, null for every string: matches every binding
            return DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                                       principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1))
        pick = rng.random()  # all users (null or, as Kafka also reads it, an empty list) or some by name
        users = None if pick < 0.3 else () if pick < 0.5 else tuple(
            UserName(name=f"user-{i}") for i in range(rng.randint(1, 2)))
        return DescribeUserScramCredentialsRequest(users=users)

    @staticmethod
    def judge(request: Any, image: MetadataImage, response: Any) -> str | None:
        """Why `response` is not what the broker holding `image` must answer to `request`, or None."""
        if isinstance(request, MetadataRequest):
            return _judge_metadata(request, image, response)
        if isinstance(request, DescribeClusterRequest):
            return _judge_describe_cluster(request, image, response)
        if isinstance(request, DescribeAclsRequest):
            return _judge_acls(image, response)
        if isinstance(request, DescribeUserScramCredentialsRequest):
            return _judge_scram(request, image, response)
        return _judge_quotas(image, response)


def _unfenced(image: MetadataImage, fenced_too: bool = False) -> dict[int, bool]:
    return {b.id: b.fenced for b in image.brokers.values()
            if (fenced_too or not b.fenced) and b.endpoint(LISTENER) is not None}


def _judge_metadata(request: MetadataRequest, image: MetadataImage, response: Any) -> str | None:
    brokers = sorted(b.node_id for b in response.brokers)
    if brokers != sorted(_unfenced(image)):
        return f"Metadata listed brokers {brokers}, the broker's image has {sorted(_unfenced(image))} unfenced"
    asked = [str(t.name) for t in request.topics] if request.topics is not None else sorted(
        t.name for t in image.topics.values())
    got = {t.name: t for t in response.topics}
    if sorted(got) != sorted(asked):
        return f"Metadata answered topics {sorted(got)}, asked for {sorted(asked)}"
    for name in asked:
        info, t = image.topic(name), got[name]
        if info is None:
            if t.error_code != ErrorCode.unknown_topic_or_partition or t.partitions:
                return f"Metadata of unknown topic {name}: {t.error_code.name} with {len(t.partitions)} partitions"
            continue
        if t.error_code != ErrorCode.none or t.topic_id != info.topic_id:
            return f"Metadata of topic {name}: {t.error_code.name}, id {t.topic_id} (image: NONE, {info.topic_id})"
        parts = {p.partition_index: p for p in t.partitions}
        if sorted(parts) != sorted(info.partitions):
            return f"Metadata of topic {name} lists partitions {sorted(parts)}, the image {sorted(info.partitions)}"
        for pid, held in info.partitions.items():
            p = parts[pid]
            want_error = ErrorCode.leader_not_available if held.leader == NO_LEADER else ErrorCode.none
            shown = (p.error_code, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
            want = (want_error, held.leader, held.leader_epoch, list(held.replicas), list(held.isr))
            if shown != want:
                return f"Metadata of {name}-{pid} says {shown}, the image holds {want}"
    return None


def _judge_describe_cluster(request: DescribeClusterRequest, image: MetadataImage, response: Any) -> str | None:
    if request.endpoint_type != 1:
        if response.error_code != ErrorCode.mismatched_endpoint_type or response.brokers:
            return (f"DescribeCluster for controllers answered {response.error_code.name} with "
                    f"{len(response.brokers)} brokers; a broker answers MISMATCHED_ENDPOINT_TYPE alone")
        return None
    shown = {b.broker_id: b.is_fenced for b in response.brokers}
    want = _unfenced(image, fenced_too=request.include_fenced_brokers)
    if response.error_code != ErrorCode.none or shown != want:
        return (f"DescribeCluster (include fenced: {request.include_fenced_brokers}) answered "
                f"{response.error_code.name} {shown}, the broker's image has {want}")
    return None


def _judge_quotas(image: MetadataImage, response: Any) -> str | None:
    shown = {tuple((c.entity_type, c.entity_name) for c in e.entity): {v.key: v.value for v in e.values}
             for e in response.entries or ()}
    want = {tuple(entity): dict(values) for entity, values in image.client_quotas.items() if values}
    if response.error_code != ErrorCode.none or shown != want:
        return f"DescribeClientQuotas answered {response.error_code.name} {shown}, the broker's image holds {want}"
    return None


def _judge_acls(image: MetadataImage, response: Any) -> str | None:
    shown = sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for r in response.resources for a in r.acls)
    want = sorted((b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
                  for b in image.acls.values())
    if response.error_code != ErrorCode.none or shown != want:
        return f"DescribeAcls matching any binding answered {response.error_code.name} {shown}, the image holds {want}"
    return None


def _judge_scram(request: DescribeUserScramCredentialsRequest, image: MetadataImage, response: Any) -> str | None:
    held: dict[str, list[int]] = {}
    for user, mechanism in sorted(image.scram):
        held.setdefault(user, []).append(mechanism)
    names = list(held) if not request.users else [u.name for u in request.users]
    want = {n: (ErrorCode.none, held[n]) if n in held else (ErrorCode.resource_not_found, []) for n in names}
    shown = {r.user: (r.error_code, [c.mechanism for c in r.credential_infos]) for r in response.results}
    if response.error_code != ErrorCode.none or shown != want:
        return f"DescribeUserScramCredentials of {names} answered {response.error_code.name} {shown}, want {want}"
    return None
