"""An in-memory Kafka cluster at the kio request → response level: the `Transport` seam's fake.

It answers exactly the requests (and versions) the workload clients send: ApiVersions v0
(advertising one version per api, `SERVED` unless `served` says otherwise); DescribeQuorum v1 on
controller addresses; BrokerRegistration v4, BrokerHeartbeat v1, UnregisterBroker v0,
AlterPartition v3 on the active controller (NOT_CONTROLLER elsewhere); CreateTopics v7 and
DeleteTopics v6 anywhere (a broker "forwards"); Metadata v12 and DescribeCluster v1 on brokers;
the ACL APIs and DescribeConfigs v1 anywhere (`workloads.fake_acls`); AlterUserScramCredentials v0
anywhere and SASL SCRAM logins on the brokers' SASL addresses (`workloads.fake_scram`).
The semantics follow KIP-631 and Kafka's controller: broker epochs are log offsets, leases fence
silent brokers, fencing leaves ISRs and leaderships, AlterPartition is a compare-and-set on the
leader and partition epochs. Reads see the current state (a correct, linearizable cluster).

Faults (seeded): `p_not_controller` (answer NOT_CONTROLLER, having applied or not), `p_timeout`
(RequestTimedOut, applied or not), `p_lost` (applied, then ConnectionLost); `down` addresses
refuse connections. Planted bugs (`bugs`): `accept-stale-epoch` (heartbeats and AlterPartition
ignore the broker epoch), `lose-acked-create` (a create answers NONE but is not applied),
`alter-ignores-epoch` (AlterPartition skips the partition-epoch check), `reuse-epoch`
(a registration gets the previous registration's epoch), `reregister-bumps-epoch` (KAFKA-16952:
a re-sent registration of the registered incarnation gets a new epoch, fenced again), and the
ACL and SCRAM stores' (`fake_acls.BUGS`, `fake_scram.BUGS`).
"""

from __future__ import annotations

import datetime
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_partition.v3 import request as ap_req
from kio.schema.alter_partition.v3 import response as ap_resp
from kio.schema.api_versions.v0 import request as av_req
from kio.schema.api_versions.v0 import response as av_resp
from kio.schema.broker_heartbeat.v1 import request as hb_req
from kio.schema.broker_heartbeat.v1 import response as hb_resp
from kio.schema.broker_registration.v4 import request as reg_req
from kio.schema.broker_registration.v4 import response as reg_resp
from kio.schema.create_topics.v7 import request as ct_req
from kio.schema.create_topics.v7 import response as ct_resp
from kio.schema.delete_topics.v6 import request as dt_req
from kio.schema.delete_topics.v6 import response as dt_resp
from kio.schema.describe_cluster.v1 import request as dc_req
from kio.schema.describe_cluster.v1 import response as dc_resp
from kio.schema.describe_quorum.v1 import request as dq_req
from kio.schema.describe_quorum.v1 import response as dq_resp
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md_req
from kio.schema.metadata.v12 import response as md_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.unregister_broker.v0 import request as un_req
from kio.schema.unregister_broker.v0 import response as un_resp
from kio.static.primitive import i16, i32, i32Timedelta, i64

from kraftlab.node.protocol.errors import ClientClosed, ConnectFailed, ConnectionLost, RequestTimedOut
from kraftlab.workloads import fake_acls, fake_scram

ZERO = i32Timedelta.parse(datetime.timedelta(0))
NO_AUTHORIZED_OPERATIONS = i32(-2147483648)  # Kafka's INT32_MIN: authorized operations not asked for
CLUSTER_ID = "fake-cluster-0000000000"
BUGS = frozenset({"accept-stale-epoch", "lose-acked-create", "alter-ignores-epoch", "reuse-epoch",
                  "reregister-bumps-epoch"}) | fake_acls.BUGS | fake_scram.BUGS
SERVED = {3: 12, 18: 0, 19: 7, 20: 6, 55: 1, 56: 3, 60: 1, 62: 4, 63: 1, 64: 0,
          **fake_acls.SERVED, **fake_scram.SERVED}  # api key → the one version
WRITES = (reg_req.BrokerRegistrationRequest, hb_req.BrokerHeartbeatRequest, un_req.UnregisterBrokerRequest,
          ap_req.AlterPartitionRequest, ct_req.CreateTopicsRequest, dt_req.DeleteTopicsRequest, *fake_acls.WRITES,
          *fake_scram.WRITES)


@dataclass
class Reg:
    epoch: int
    incarnation: uuid.UUID | None
    fenced: bool = True
    shutting_down: bool = False
    last_contact: float = 0.0


@dataclass
class Part:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class Topic:
    id: uuid.UUID
    parts: dict[int, Part]


@dataclass
class FakeKafka:
    """The cluster: nodes n1..nN, each a broker and (the first `controllers`) a controller."""

    nodes: int = 3
    controllers: int = 3
    session_timeout_s: float = 9.0
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    p_not_controller: float = 0.0
    p_timeout: float = 0.0
    p_lost: float = 0.0
    bugs: frozenset[str] = frozenset()
    leader: int = 1
    down: set[str] = field(default_factory=set)
    topics: dict[str, Topic] = field(default_factory=dict)
    brokers: dict[int, Reg] = field(default_factory=dict)
    offset: int = 1
    requests: list[Any] = field(default_factory=list)
    served: dict[int, int] = field(default_factory=lambda: dict(SERVED))
    """api key → the one version ApiVersions advertises (a test adds the data plane's keys)."""
    acls: fake_acls.FakeAcls = field(init=False)
    scram: fake_scram.FakeScram = field(init=False)

    def __post_init__(self) -> None:
        if unknown := set(self.bugs) - BUGS:
            raise ValueError(f"unknown bugs {sorted(unknown)}; known: {sorted(BUGS)}")
        self.acls = fake_acls.FakeAcls(frozenset(self.bugs) & fake_acls.BUGS)
        self.scram = fake_scram.FakeScram(frozenset(self.bugs) & fake_scram.BUGS)
        for i in range(1, self.nodes + 1):  # the real brokers: registered and unfenced, never expire
            self.brokers[i] = Reg(self._next_offset(), uuid.uuid4(), fenced=False, last_contact=float("inf"))

    # --- addresses -----------------------------------------------------------------------------

    def spec(self) -> dict[str, dict[str, Any]]:
        """The catalog's cluster dict for this fake."""
        return {f"n{i}": {"id": i, "broker": f"n{i}:9092", "sasl": f"n{i}:9094",
                          "controller": f"n{i}:9093" if i <= self.controllers else None}
                for i in range(1, self.nodes + 1)}

    def connector(self, addr: str) -> FakeTransport:
        return FakeTransport(self, addr)

    # --- transport ----------------------------------------------------------------------------

    async def send(self, addr: str, request: Any, conn: Any = None) -> Any:
        """`request` on the connection `conn` to `addr` (SASL exchanges are per connection)."""
        if addr in self.down:
            raise ConnectFailed(f"cannot connect to {addr}")
        self.requests.append(request)
        if isinstance(request, fake_scram.SASL):
            return self.scram.sasl(request, conn)
        node = int(addr.split(":")[0][1:])
        is_controller = addr.endswith(":9093")
        self._expire()
        if isinstance(request, WRITES):
            r = self.rng.random()
            if r < self.p_not_controller:
                if self.rng.random() < 0.5:  # a deposed leader's record committed by its successor
                    self.handle(request, self.leader, True)
                return self._error_response(request, ErrorCode.not_controller)
            r -= self.p_not_controller
            if r < self.p_timeout:
                if self.rng.random() < 0.5:
                    self.handle(request, node, is_controller)
                raise RequestTimedOut(f"no response from {addr}")
            r -= self.p_timeout
            if r < self.p_lost:
                self.handle(request, node, is_controller)
                raise ConnectionLost(f"{addr}: connection reset")
        return self.handle(request, node, is_controller)

    def handle(self, req: Any, node: int, is_controller: bool) -> Any:
        if isinstance(req, av_req.ApiVersionsRequest):
            return av_resp.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(
                av_resp.ApiVersion(api_key=i16(k), min_version=i16(v), max_version=i16(v))
                for k, v in sorted(self.served.items())))
        if isinstance(req, dq_req.DescribeQuorumRequest):
            return self._describe_quorum()
        if isinstance(req, md_req.MetadataRequest):
            return self._metadata(req)
        if isinstance(req, dc_req.DescribeClusterRequest):
            return dc_resp.DescribeClusterResponse(throttle_time=ZERO, error_code=ErrorCode.none, cluster_id=CLUSTER_ID,
                                                   controller_id=BrokerId(min(self._unfenced(), default=-1)),
                                                   brokers=tuple(dc_resp.DescribeClusterBroker(broker_id=BrokerId(b),
                                                                                               host="h", port=i32(9092))
                                                                 for b in self._unfenced()),
                                                   cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS)
        if isinstance(req, fake_acls.REQUESTS):
            if is_controller and node != self.leader:
                return self._error_response(req, ErrorCode.not_controller)
            return self.acls.handle(req)
        if isinstance(req, fake_scram.WRITES):
            if is_controller and node != self.leader:
                return self._error_response(req, ErrorCode.not_controller)
            return self.scram.alter(req)
        if isinstance(req, ct_req.CreateTopicsRequest | dt_req.DeleteTopicsRequest):
            if is_controller and node != self.leader:
                return self._error_response(req, ErrorCode.not_controller)
            return self._create(req) if isinstance(req, ct_req.CreateTopicsRequest) else self._delete(req)
        if not is_controller:
            return self._error_response(req, ErrorCode.not_controller)
        if node != self.leader:
            return self._error_response(req, ErrorCode.not_controller)
        if isinstance(req, reg_req.BrokerRegistrationRequest):
            return self._register(req)
        if isinstance(req, hb_req.BrokerHeartbeatRequest):
            return self._heartbeat(req)
        if isinstance(req, un_req.UnregisterBrokerRequest):
            return self._unregister(req)
        if isinstance(req, ap_req.AlterPartitionRequest):
            return self._alter(req)
        raise ValueError(f"the fake does not serve {type(req).__name__}")

    # --- membership ---------------------------------------------------------------------------

    def _next_offset(self) -> int:
        self.offset += 1
        return self.offset - 1

    def _unfenced(self) -> list[int]:
        return sorted(b for b, r in self.brokers.items() if not r.fenced)

    def _usable(self, b: int) -> bool:
        r = self.brokers.get(b)
        return r is not None and not r.fenced and not r.shutting_down

    def _alive(self, r: Reg) -> bool:
        return self.clock() - r.last_contact < self.session_timeout_s

    def _expire(self) -> None:
        for b, r in sorted(self.brokers.items()):
            if not r.fenced and not self._alive(r):
                r.fenced = True
                self._leave(b)

    def _register(self, req: Any) -> Any:
        def answer(code: ErrorCode, epoch: int = -1) -> Any:
            return reg_resp.BrokerRegistrationResponse(throttle_time=ZERO, error_code=code, broker_epoch=i64(epoch))

        if req.cluster_id != CLUSTER_ID:
            return answer(ErrorCode.inconsistent_cluster_id)
        old = self.brokers.get(req.broker_id)
        same = old is not None and old.incarnation == req.incarnation_id
        if old is not None and same and "reregister-bumps-epoch" not in self.bugs:
            old.last_contact = self.clock()
            return answer(ErrorCode.none, old.epoch)
        if old is not None and not same and self._alive(old):
            return answer(ErrorCode.duplicate_broker_registration)
        epoch = self._next_offset()
        if "reuse-epoch" in self.bugs and old is not None:
            epoch = old.epoch
        self.brokers[req.broker_id] = Reg(epoch, req.incarnation_id, last_contact=self.clock())
        self._leave(req.broker_id)
        return answer(ErrorCode.none, epoch)

    def _heartbeat(self, req: Any) -> Any:
        def answer(code: ErrorCode, fenced: bool = True, shut: bool = False, caught_up: bool = False) -> Any:
            return hb_resp.BrokerHeartbeatResponse(throttle_time=ZERO, error_code=code, is_caught_up=caught_up,
                                                   is_fenced=fenced, should_shut_down=shut)

        r = self.brokers.get(req.broker_id)
        if r is None:
            return answer(ErrorCode.broker_id_not_registered)
        if r.epoch != req.broker_epoch and "accept-stale-epoch" not in self.bugs:
            return answer(ErrorCode.stale_broker_epoch)
        r.last_contact = self.clock()
        caught_up = req.current_metadata_offset >= r.epoch
        if r.fenced:
            if not req.want_fence and not req.want_shut_down and caught_up:
                r.fenced = False
                self._recover(req.broker_id)
        elif req.want_fence:
            r.fenced = True
            self._leave(req.broker_id)
        elif req.want_shut_down:
            r.shutting_down = True
            self._leave(req.broker_id)
        leads = any(p.leader == req.broker_id for t in self.topics.values() for p in t.parts.values())
        shut = bool(req.want_shut_down) and (r.fenced or (r.shutting_down and not leads))
        return answer(ErrorCode.none, r.fenced, shut, caught_up)

    def _unregister(self, req: Any) -> Any:
        if req.broker_id not in self.brokers:
            return un_resp.UnregisterBrokerResponse(throttle_time=ZERO, error_code=ErrorCode.broker_id_not_registered,
                                                    error_message=None)
        self._next_offset()
        del self.brokers[req.broker_id]
        self._leave(req.broker_id)
        return un_resp.UnregisterBrokerResponse(throttle_time=ZERO, error_code=ErrorCode.none, error_message=None)

    # --- partitions ---------------------------------------------------------------------------

    def _bump(self, p: Part, isr: tuple[int, ...], leader: int) -> None:
        if leader != p.leader:
            p.leader_epoch += 1
        p.isr, p.leader = isr, leader
        p.partition_epoch += 1
        self._next_offset()

    def _leave(self, b: int) -> None:
        """Broker b leaves every ISR and leadership (fenced, shutting down, re-registered, gone)."""
        for t in self.topics.values():
            for p in t.parts.values():
                if b not in p.isr and p.leader != b:
                    continue
                isr = tuple(x for x in p.isr if x != b) or p.isr  # the last member stays (no unclean election)
                leader = next((x for x in isr if self._usable(x)), -1)
                self._bump(p, isr, leader)

    def _recover(self, b: int) -> None:
        for t in self.topics.values():
            for p in t.parts.values():
                if p.leader == -1 and b in p.isr:
                    self._bump(p, p.isr, b)

    def _create(self, req: Any) -> Any:
        out = []
        for t in req.topics:
            code, tid, parts = ErrorCode.none, uuid.uuid4(), {}
            if t.name in self.topics:
                code = ErrorCode.topic_already_exists
            elif t.assignments:
                for a in sorted(t.assignments, key=lambda a: a.partition_index):
                    reps = tuple(a.broker_ids)
                    if not reps or any(b not in self.brokers for b in reps) or not any(map(self._usable, reps)):
                        code = ErrorCode.invalid_replica_assignment
                        break
                    isr = tuple(b for b in reps if self._usable(b))
                    parts[a.partition_index] = Part(reps, isr, isr[0])
            else:
                usable = [b for b in self._unfenced() if self._usable(b)]
                n, rf = max(t.num_partitions, 1), max(t.replication_factor, 1)
                if rf > len(usable):
                    code = ErrorCode.invalid_replication_factor
                else:
                    start = self.rng.randrange(len(usable))
                    for p in range(n):
                        reps = tuple(usable[(start + p + k) % len(usable)] for k in range(rf))
                        parts[p] = Part(reps, reps, reps[0])
            if code == ErrorCode.none and "lose-acked-create" not in self.bugs:
                self._next_offset()
                self.topics[t.name] = Topic(tid, parts)
            out.append(ct_resp.CreatableTopicResult(name=t.name, topic_id=tid if code == ErrorCode.none else None,
                                                    error_code=code, error_message=None,
                                                    topic_config_error_code=i16(0), configs=None))
        return ct_resp.CreateTopicsResponse(throttle_time=ZERO, topics=tuple(out))

    def _delete(self, req: Any) -> Any:
        out = []
        for t in req.topics:
            code = ErrorCode.none
            if t.name not in self.topics:
                code = ErrorCode.unknown_topic_or_partition
            else:
                self._next_offset()
                del self.topics[t.name]
            out.append(dt_resp.DeletableTopicResult(name=t.name, topic_id=None, error_code=code))
        return dt_resp.DeleteTopicsResponse(throttle_time=ZERO, responses=tuple(out))

    def _alter(self, req: Any) -> Any:
        sender = self.brokers.get(req.broker_id)
        if sender is None or (sender.epoch != req.broker_epoch and "accept-stale-epoch" not in self.bugs):
            return ap_resp.AlterPartitionResponse(throttle_time=ZERO, error_code=ErrorCode.stale_broker_epoch,
                                                  topics=())
        by_id = {t.id: t for t in self.topics.values()}
        topics_out = []
        for td in req.topics:
            topic = by_id.get(td.topic_id)
            parts_out = []
            for pd in td.partitions:
                p = topic.parts.get(pd.partition_index) if topic is not None else None
                code = self._validate_alter(req.broker_id, p, pd) if topic is not None else ErrorCode.unknown_topic_id
                if code == ErrorCode.none and p is not None:
                    isr = tuple(s.broker_id for s in pd.new_isr_with_epochs)
                    if set(isr) != set(p.isr):  # as Kafka: an unchanged ISR writes nothing, keeps the epoch
                        self._bump(p, isr, p.leader)
                    parts_out.append(ap_resp.PartitionData(partition_index=pd.partition_index, error_code=code,
                                                           leader_id=BrokerId(p.leader),
                                                           leader_epoch=i32(p.leader_epoch),
                                                           isr=tuple(BrokerId(b) for b in p.isr),
                                                           partition_epoch=i32(p.partition_epoch)))
                else:
                    parts_out.append(ap_resp.PartitionData(partition_index=pd.partition_index, error_code=code,
                                                           leader_id=BrokerId(-1), leader_epoch=i32(-1),
                                                           partition_epoch=i32(-1)))
            topics_out.append(ap_resp.TopicData(topic_id=td.topic_id, partitions=tuple(parts_out)))
        return ap_resp.AlterPartitionResponse(throttle_time=ZERO, error_code=ErrorCode.none, topics=tuple(topics_out))

    def _validate_alter(self, sender: int, p: Part | None, pd: Any) -> ErrorCode:
        if p is None:
            return ErrorCode.unknown_topic_or_partition
        check_pe = "alter-ignores-epoch" not in self.bugs
        if pd.leader_epoch > p.leader_epoch or (check_pe and pd.partition_epoch > p.partition_epoch):
            return ErrorCode.not_controller
        if pd.leader_epoch < p.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if sender != p.leader:
            return ErrorCode.invalid_request
        if check_pe and pd.partition_epoch < p.partition_epoch:
            return ErrorCode.invalid_update_version
        isr = [s.broker_id for s in pd.new_isr_with_epochs]
        if len(set(isr)) != len(isr) or any(b not in p.replicas for b in isr) or p.leader not in isr:
            return ErrorCode.invalid_request
        for s in pd.new_isr_with_epochs:
            r = self.brokers.get(s.broker_id)
            if r is None or r.fenced or r.shutting_down or (s.broker_epoch != -1 and s.broker_epoch != r.epoch):
                return ErrorCode.ineligible_replica
        return ErrorCode.none

    # --- reads --------------------------------------------------------------------------------

    def _describe_quorum(self) -> Any:
        part = dq_resp.PartitionData(partition_index=i32(0), error_code=ErrorCode.none,
                                     leader_id=BrokerId(self.leader), leader_epoch=i32(1),
                                     high_watermark=i64(self.offset), current_voters=(), observers=())
        return dq_resp.DescribeQuorumResponse(error_code=ErrorCode.none,
                                              topics=(dq_resp.TopicData(topic_name=TopicName("__cluster_metadata"),
                                                                        partitions=(part,)),))

    def _metadata(self, req: Any) -> Any:
        names = sorted(self.topics) if req.topics is None else [t.name for t in req.topics]
        out = []
        for name in names:
            t = self.topics.get(name)
            if t is None:
                out.append(md_resp.MetadataResponseTopic(error_code=ErrorCode.unknown_topic_or_partition,
                                                         name=TopicName(name), topic_id=uuid.UUID(int=0), partitions=(),
                                                         topic_authorized_operations=NO_AUTHORIZED_OPERATIONS))
                continue
            parts = tuple(md_resp.MetadataResponsePartition(
                error_code=ErrorCode.none if p.leader != -1 else ErrorCode.leader_not_available,
                partition_index=i32(i), leader_id=BrokerId(p.leader), leader_epoch=i32(p.leader_epoch),
                replica_nodes=tuple(BrokerId(b) for b in p.replicas), isr_nodes=tuple(BrokerId(b) for b in p.isr),
                offline_replicas=tuple(BrokerId(b) for b in p.replicas if not self._usable(b)))
                for i, p in sorted(t.parts.items()))
            out.append(md_resp.MetadataResponseTopic(error_code=ErrorCode.none, name=TopicName(name), topic_id=t.id,
                                                     partitions=parts,
                                                     topic_authorized_operations=NO_AUTHORIZED_OPERATIONS))
        return md_resp.MetadataResponse(
            throttle_time=ZERO, cluster_id=CLUSTER_ID, controller_id=BrokerId(min(self._unfenced(), default=-1)),
            brokers=tuple(md_resp.MetadataResponseBroker(node_id=BrokerId(b), host="h", port=i32(9092))
                          for b in self._unfenced()),
            topics=tuple(out))

    def _error_response(self, req: Any, code: ErrorCode) -> Any:
        if isinstance(req, ct_req.CreateTopicsRequest):
            return ct_resp.CreateTopicsResponse(throttle_time=ZERO, topics=tuple(
                ct_resp.CreatableTopicResult(name=t.name, topic_id=None, error_code=code, error_message=None,
                                             topic_config_error_code=i16(0), configs=None) for t in req.topics))
        if isinstance(req, dt_req.DeleteTopicsRequest):
            return dt_resp.DeleteTopicsResponse(throttle_time=ZERO, responses=tuple(
                dt_resp.DeletableTopicResult(name=t.name, topic_id=None, error_code=code) for t in req.topics))
        if isinstance(req, reg_req.BrokerRegistrationRequest):
            return reg_resp.BrokerRegistrationResponse(throttle_time=ZERO, error_code=code)
        if isinstance(req, hb_req.BrokerHeartbeatRequest):
            return hb_resp.BrokerHeartbeatResponse(throttle_time=ZERO, error_code=code, should_shut_down=False)
        if isinstance(req, un_req.UnregisterBrokerRequest):
            return un_resp.UnregisterBrokerResponse(throttle_time=ZERO, error_code=code, error_message=None)
        if isinstance(req, ap_req.AlterPartitionRequest):
            return ap_resp.AlterPartitionResponse(throttle_time=ZERO, error_code=code, topics=())
        if isinstance(req, fake_acls.REQUESTS):
            return fake_acls.error_response(req, code)
        if isinstance(req, fake_scram.WRITES):
            return fake_scram.error_response(req, code)
        raise ValueError(f"no error response for {type(req).__name__}")


@dataclass
class FakeTransport:
    """One address of the fake cluster (the `Transport` protocol)."""

    cluster: FakeKafka
    addr: str
    closed: bool = False

    async def send(self, request: Any) -> Any:
        if self.closed:
            raise ClientClosed("closed")
        return await self.cluster.send(self.addr, request, self)

    async def close(self) -> None:
        self.closed = True
