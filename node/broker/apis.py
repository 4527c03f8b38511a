"""The broker's client-facing request handlers (sans-IO).

- Metadata (any version): only unfenced brokers appear (their endpoint on the listener the
  request came in on); leaders, leader epochs, replicas and ISRs from the broker's image;
  LEADER_NOT_AVAILABLE for a leaderless partition, fenced replicas listed as offline;
  UNKNOWN_TOPIC_OR_PARTITION for an unknown requested topic (no auto-creation), UNKNOWN_TOPIC_ID
  for an unknown topic asked for by id.
- DescribeCluster (any version): cluster id and the unfenced brokers (fenced ones too, marked,
  when a v2 request asks with IncludeFencedBrokers); asked for controllers (KIP-919's endpoint
  type 2) a broker answers MISMATCHED_ENDPOINT_TYPE, for an unknown type UNSUPPORTED_ENDPOINT_TYPE.
- CreateTopics / DeleteTopics / IncrementalAlterConfigs / AlterConfigs / CreatePartitions (any
  version): forwarded to the active controller as v7 / v6 / v1 / v2 / v3 (`Forward`), and the
  controller's answer relayed back in the client's version. DescribeConfigs: the dynamic configs
  from the broker's image. A forward that could not be sent is retried until the client's timeout;
  one that was sent but got no answer is answered REQUEST_TIMED_OUT (its outcome is unknown, and
  so is NOT_CONTROLLER's: a controller that lost leadership may still see the write committed by
  its successor).
- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: the partitions' data plane
  (node.broker.replication's ReplicaManager, given as `replicas`; `on_metadata` hands it each new image).
- InitProducerId (any version): a producer id from this broker's block (node.broker.producer_ids,
  which asks the active controller for blocks: `AllocateIds`, answered through `producer_ids`).
- Controller APIs (BrokerRegistration, BrokerHeartbeat, …) get NOT_CONTROLLER, as in Kafka.
- Read-your-writes on the forwarding broker: a successful create/delete/CreatePartitions is
  relayed once this broker's own image shows it (or after `visibility_wait_ms`), so a client that reads from the
  broker it wrote through sees its write.
- A broker that is not RUNNING (or PENDING_CONTROLLED_SHUTDOWN), or that fenced itself,
  refuses client requests (`Refused`: the server closes the connection).

The controller id shown to clients is the lowest unfenced broker (clients send admin requests
to brokers, which forward them), or -1 when none is.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as ControllerAlterClientQuotas
from kio.schema.alter_configs.v2.request import AlterConfigsRequest as ControllerAlterConfigs
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest as ControllerAlterUserScramCredentials,
)
from kio.schema.create_acls.v3.request import CreateAclsRequest as ControllerCreateAcls
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest as ControllerCreatePartitions
from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig
from kio.schema.create_topics.v7.request import CreateTopicsRequest as ControllerCreateTopics
from kio.schema.delete_acls.v3.request import DeleteAclsRequest as ControllerDeleteAcls
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as ControllerDeleteTopics
from kio.schema.delete_topics.v6.request import DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    IncrementalAlterConfigsRequest as ControllerIncrementalAlterConfigs,
)

from kraftlab.node.broker import security_apis
from kraftlab.node.broker.client_quotas import describe_client_quotas_response
from kraftlab.node.broker.lifecycle import BrokerLifecycle, BrokerState
from kraftlab.node.broker.metadata import BrokerMetadata
from kraftlab.node.broker.outputs import ClientReply
from kraftlab.node.broker.producer_ids import AllocateIds, IdReply, ProducerIdManager
from kraftlab.node.broker.replication import DATA_PLANE_APIS, AlterIsr, FetchFromLeader, ReplicaManager
from kraftlab.node.controller.messages import api_name, as_values, build, respond
from kraftlab.node.controller.quorum_controller import CONTROLLER_APIS, error_response
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import NO_LEADER, RESOURCE_BROKER, RESOURCE_TOPIC
from kraftlab.node.protocol.durations import millis


@dataclass(frozen=True, slots=True)
class Refused:
    token: Any
    reason: str


@dataclass(frozen=True, slots=True)
class Forward:
    """Send `request` to the active controller; answer with `on_forward_response(token, …)` or
    `on_forward_failure(token, now_ms, sent=…)`."""

    token: int
    request: Any


def _topic_id(result: Any) -> uuid.UUID | None:
    """A CreateTopics/DeleteTopics result's topic id; None where the version has none (or the zero id)."""
    tid = getattr(result, "topic_id", None)
    return tid if isinstance(tid, uuid.UUID) and tid.int else None


@dataclass
class _Settling:
    """A controller answer held until this broker's image shows its effect."""

    client_token: Any
    response: Any
    created: tuple[tuple[str, uuid.UUID | None], ...]
    """(topic, the id the controller gave it — None from a CreateTopics version without ids)."""
    deleted: tuple[tuple[str, uuid.UUID | None], ...]
    """(topic, the id it had — None from a DeleteTopics version without ids)."""
    deadline_ms: int | None = None
    grown: tuple[tuple[str, int], ...] = ()
    """(topic, partition count) that CreatePartitions reached."""


@dataclass
class _Pending:
    client_token: Any
    client_request: Any
    controller_request: Any
    deadline_ms: int
    retry_at_ms: int | None = None


Output = ClientReply | Refused | Forward | AllocateIds | JournalEvent | FetchFromLeader | AlterIsr
READ_APIS = frozenset({"Metadata", "DescribeCluster", "DescribeConfigs", "DescribeAcls",
                       "DescribeUserScramCredentials", "DescribeClientQuotas"})
"""Answered from the broker's own image, changing nothing."""
FORWARDED_APIS = (
    "CreateTopics", "DeleteTopics", "IncrementalAlterConfigs", "AlterConfigs", "CreateAcls", "DeleteAcls",
    "AlterUserScramCredentials", "CreatePartitions", "AlterClientQuotas",
)
_FORWARDED_AS = {  # forwarded at the controller's version, rebuilt field by field
    "CreateAcls": ControllerCreateAcls, "DeleteAcls": ControllerDeleteAcls,
    "AlterUserScramCredentials": ControllerAlterUserScramCredentials,
}


def _controller_for_clients(image: MetadataImage) -> int:
    unfenced = sorted(b.id for b in image.brokers.values() if not b.fenced)
    return unfenced[0] if unfenced else -1


AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's value of the *_authorized_operations fields when the client did not ask for them."""


def _visible_brokers(image: MetadataImage, listener: str, include_fenced: bool = False) -> list[dict[str, Any]]:
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.id):
        ep = b.endpoint(listener)
        if (include_fenced or not b.fenced) and ep is not None:
            out.append(
                {
                    "node_id": b.id,
                    "broker_id": b.id,
                    "host": ep.host,
                    "port": ep.port,
                    "rack": b.rack,
                    "is_fenced": b.fenced,
                }
            )
    return out


def metadata_response(request: Any, image: MetadataImage, cluster_id: str, listener: str) -> Any:
    topics = request.topics
    if topics is None or (type(request).__version__ == 0 and not topics):
        wanted = [(t.name, None) for t in sorted(image.topics.values(), key=lambda t: t.name)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in topics]
    out: list[dict[str, Any]] = []
    for name, tid in wanted:
        topic = image.topic(name) if name is not None else image.topics.get(tid) if tid is not None else None
        if topic is None:  # asked by id (v12+, no name): UNKNOWN_TOPIC_ID with a null name, as Kafka answers
            error = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
            out.append({"name": name, "topic_id": tid, "error_code": error})  # kio: None is the zero id
            continue
        parts = []
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            parts.append(
                {
                    "error_code": ErrorCode.leader_not_available if p.leader == NO_LEADER else ErrorCode.none,
                    "partition_index": pid,
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": p.replicas,
                    "isr_nodes": p.isr,
                    "offline_replicas": tuple(r for r in p.replicas if not image.is_usable(r)),
                }
            )
        out.append(
            {
                "error_code": ErrorCode.none,
                "name": topic.name,
                "topic_id": topic.topic_id,
                "partitions": parts,
                "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return respond(
        request,
        {
            "brokers": _visible_brokers(image, listener),
            "cluster_id": cluster_id,
            "controller_id": _controller_for_clients(image),
            "topics": out,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        },
    )


_ENDPOINT_BROKERS, _ENDPOINT_CONTROLLERS = 1, 2  # DescribeCluster's EndpointType (KIP-919)


def describe_cluster_response(request: Any, image: MetadataImage, cluster_id: str, listener: str) -> Any:
    endpoint_type = getattr(request, "endpoint_type", _ENDPOINT_BROKERS)
    if endpoint_type != _ENDPOINT_BROKERS:  # v1+ only (v0 has no endpoint type)
        if endpoint_type == _ENDPOINT_CONTROLLERS:
            code, text = ErrorCode.mismatched_endpoint_type, "The request was sent to an endpoint of type BROKER, " \
                "but we wanted an endpoint of type CONTROLLER"
        else:
            code, text = ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {endpoint_type}"
        return respond(request, {"error_code": code, "error_message": text})
    return respond(
        request,
        {
            "error_code": ErrorCode.none,
            "cluster_id": cluster_id,
            "controller_id": _controller_for_clients(image),
            "brokers": _visible_brokers(image, listener, bool(getattr(request, "include_fenced_brokers", False))),
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        },
    )


_CONFIG_SOURCE = {RESOURCE_TOPIC: 1, RESOURCE_BROKER: 2}  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG
_DEFAULT_BROKER_SOURCE = 4  # DYNAMIC_DEFAULT_BROKER_CONFIG


def describe_configs_response(request: Any, image: MetadataImage) -> Any:
    """The dynamic configs of each resource from the image (no static defaults are listed)."""
    results = []
    for res in request.resources:
        rtype, name = res.resource_type, res.resource_name
        if rtype == RESOURCE_TOPIC and image.topic(name) is None:
            results.append(
                {
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": "unknown topic",
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
            continue
        if rtype not in (RESOURCE_TOPIC, RESOURCE_BROKER):
            results.append(
                {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": "unsupported resource type",
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
            continue
        keys = res.configuration_keys
        source = _DEFAULT_BROKER_SOURCE if rtype == RESOURCE_BROKER and name == "" else _CONFIG_SOURCE[rtype]
        entries = image.configs.get((rtype, name), {})
        configs = [
            {"name": k, "value": v, "read_only": False, "config_source": source, "is_sensitive": False}
            for k, v in sorted(entries.items())
            if keys is None or k in keys
        ]
        results.append(
            {"error_code": ErrorCode.none, "resource_type": rtype, "resource_name": name, "configs": configs}
        )
    return respond(request, {"results": results})


def to_controller_create(req: Any) -> ControllerCreateTopics:
    return ControllerCreateTopics(
        topics=tuple(
            CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=tuple(
                    CreatableReplicaAssignment(partition_index=a.partition_index, broker_ids=tuple(a.broker_ids))
                    for a in t.assignments
                ),
                configs=tuple(CreatableTopicConfig(name=c.name, value=c.value) for c in t.configs),
            )
            for t in req.topics
        ),
        timeout=req.timeout,
        validate_only=bool(getattr(req, "validate_only", False)),
    )


def to_controller_delete(req: Any) -> ControllerDeleteTopics:
    if hasattr(req, "topics"):
        states = tuple(DeleteTopicState(name=t.name, topic_id=t.topic_id) for t in req.topics)
    else:
        states = tuple(DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in req.topic_names)
    return ControllerDeleteTopics(topics=states, timeout=req.timeout)


class BrokerApis:
    def __init__(
        self,
        cluster_id: str,
        metadata: BrokerMetadata,
        lifecycle: BrokerLifecycle,
        retry_backoff_ms: int = 100,
        visibility_wait_ms: int = 2000,
        replicas: ReplicaManager | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.metadata = metadata
        self.lifecycle = lifecycle
        self.retry_backoff_ms = retry_backoff_ms
        self.visibility_wait_ms = visibility_wait_ms
        self._pending: dict[int, _Pending] = {}
        self._settling: list[_Settling] = []
        self._forwards = 0
        self._outbox: list[Output] = []
        self.replicas = replicas
        """The partitions' data plane (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch); None: not served."""
        self._image_offset = -2
        self._caught_up = False
        self.producer_ids = ProducerIdManager(
            lifecycle.config.node_id, lambda: self.lifecycle.broker_epoch, retry_backoff_ms)

    def take_outputs(self) -> list[Output]:
        self._release_settled(None)
        for o in self.producer_ids.take_outputs():
            self._outbox.append(ClientReply(o.token, o.response) if isinstance(o, IdReply) else o)
        if self.replicas is not None:
            self._outbox.extend(self.replicas.take_outputs())
        out, self._outbox = self._outbox, []
        return out

    def _release_settled(self, now_ms: int | None) -> None:
        if not self._settling:
            return
        image = self.metadata.image
        keep = []
        for s in self._settling:
            if now_ms is not None and s.deadline_ms is None:
                s.deadline_ms = now_ms + self.visibility_wait_ms
            visible = (  # this write's topic, by its id: not an older or newer one of the same name
                all(n in image.topic_ids if tid is None else image.topic_ids.get(n) == tid for n, tid in s.created)
                and all(n not in image.topic_ids if tid is None else image.topic_ids.get(n) != tid
                        for n, tid in s.deleted)
                and all(len(getattr(image.topic(n), "partitions", ())) >= count for n, count in s.grown)
            )
            expired = now_ms is not None and s.deadline_ms is not None and now_ms >= s.deadline_ms
            if visible or expired:
                self._outbox.append(ClientReply(s.client_token, s.response))
            else:
                keep.append(s)
        self._settling = keep

    def serves(self, request: Any, now_ms: int) -> bool:
        """Whether `request` is served now (rather than refused: a broker not running, or fenced
        itself, the self-fencing bound checked at `now_ms`); only then is it authorized, so a refused
        request leaves no authorization decision."""
        self.lifecycle.check_self_fence(now_ms)
        if api_name(request) in READ_APIS:
            return self.lifecycle.serving_reads()
        return self.lifecycle.accepting_client_requests()

    def handle(self, token: Any, request: Any, now_ms: int, listener: str = "PLAINTEXT") -> None:
        api = api_name(request)
        if api in CONTROLLER_APIS and api not in FORWARDED_APIS:
            self._outbox.append(ClientReply(token, error_response(request, ErrorCode.not_controller)))
            return
        if not self.serves(request, now_ms):
            reason = "fenced itself" if self.lifecycle.self_fenced else self.lifecycle.state.name
            self._outbox.append(Refused(token, reason))
            return
        image = self.metadata.image
        if api == "Metadata":
            self._outbox.append(ClientReply(token, metadata_response(request, image, self.cluster_id, listener)))
        elif api == "DescribeCluster":
            self._outbox.append(
                ClientReply(token, describe_cluster_response(request, image, self.cluster_id, listener))
            )
        elif api == "CreateTopics":
            self._forward(token, request, to_controller_create(request), now_ms)
        elif api == "DeleteTopics":
            self._forward(token, request, to_controller_delete(request), now_ms)
        elif api == "IncrementalAlterConfigs":
            self._forward(token, request, build(ControllerIncrementalAlterConfigs, as_values(request)), now_ms)
        elif api == "AlterConfigs":
            self._forward(token, request, build(ControllerAlterConfigs, as_values(request)), now_ms)
        elif api == "CreatePartitions":
            self._forward(token, request, build(ControllerCreatePartitions, as_values(request)), now_ms)
        elif api == "AlterClientQuotas":
            self._forward(token, request, build(ControllerAlterClientQuotas, as_values(request)), now_ms)
        elif api == "DescribeClientQuotas":
            self._outbox.append(ClientReply(token, describe_client_quotas_response(request, image)))
        elif api == "DescribeConfigs":
            self._outbox.append(ClientReply(token, describe_configs_response(request, image)))
        elif api in DATA_PLANE_APIS and self.replicas is not None:
            self.replicas.handle(token, request, now_ms)
        elif api == "InitProducerId":
            self.producer_ids.handle(token, request, now_ms)
        elif api in _FORWARDED_AS:
            self._forward(token, request, build(_FORWARDED_AS[api], as_values(request)), now_ms)
        elif api == "DescribeAcls":
            self._outbox.append(ClientReply(token, security_apis.describe_acls_response(request, image)))
        elif api == "DescribeUserScramCredentials":
            self._outbox.append(
                ClientReply(token, security_apis.describe_user_scram_credentials_response(request, image))
            )
        else:
            self._outbox.append(Refused(token, f"unsupported API {api}"))

    def _forward(self, token: Any, request: Any, controller_request: Any, now_ms: int) -> None:
        timeout_ms = millis(getattr(request, "timeout", 30_000))
        self._forwards += 1
        self._pending[self._forwards] = _Pending(token, request, controller_request, now_ms + max(timeout_ms, 0))
        self._outbox.append(Forward(self._forwards, controller_request))

    def on_forward_response(self, fwd: int, response: Any, now_ms: int | None = None) -> None:
        p = self._pending.pop(fwd, None)
        if p is None:
            return
        relayed = respond(p.client_request, as_values(response))
        created: tuple[tuple[str, uuid.UUID | None], ...] = ()
        deleted: tuple[tuple[str, uuid.UUID | None], ...] = ()
        if api_name(response) == "CreateTopics" and not getattr(p.controller_request, "validate_only", False):
            created = tuple((t.name, _topic_id(t)) for t in response.topics if t.error_code == ErrorCode.none)
        elif api_name(response) == "DeleteTopics":
            deleted = tuple((t.name, _topic_id(t)) for t in response.responses
                            if t.error_code == ErrorCode.none and t.name)
        grown: tuple[tuple[str, int], ...] = ()
        if api_name(response) == "CreatePartitions" and not p.controller_request.validate_only:
            counts = {t.name: int(t.count) for t in p.controller_request.topics}
            grown = tuple((r.name, counts[r.name]) for r in response.results
                          if r.error_code == ErrorCode.none and r.name in counts)
        deadline = now_ms + self.visibility_wait_ms if now_ms is not None else None
        self._settling.append(_Settling(p.client_token, relayed, created, deleted, deadline, grown))

    def on_forward_failure(self, fwd: int, now_ms: int, *, sent: bool) -> None:
        p = self._pending.get(fwd)
        if p is None:
            return
        if sent or now_ms + self.retry_backoff_ms > p.deadline_ms:
            del self._pending[fwd]
            self._outbox.append(
                ClientReply(p.client_token, error_response(p.client_request, ErrorCode.request_timed_out))
            )
        else:
            p.retry_at_ms = now_ms + self.retry_backoff_ms

    def on_metadata(self, now_ms: int) -> None:
        """The image may have changed: the partitions take their new roles — once the controller
        has said this broker caught up with the metadata log (as Kafka's broker publishes to its
        replica manager only after that initial catch-up): a restarted broker still replaying an
        old image would otherwise lead partitions in epochs the quorum has moved on from."""
        offset = self.metadata.highest_offset
        if self.lifecycle.state in (BrokerState.NOT_RUNNING, BrokerState.STARTING) and not self._caught_up:
            return
        self._caught_up = True
        if self.replicas is not None and offset != self._image_offset:
            self._image_offset = offset
            self.replicas.apply_image(self.metadata.image, now_ms)

    def tick(self, now_ms: int) -> None:
        self.on_metadata(now_ms)
        if self.replicas is not None:
            self.replicas.tick(now_ms)
        self._release_settled(now_ms)
        self.producer_ids.tick(now_ms)
        for fwd, p in list(self._pending.items()):
            if p.retry_at_ms is not None and now_ms >= p.retry_at_ms:
                p.retry_at_ms = None
                self._outbox.append(Forward(fwd, p.controller_request))
