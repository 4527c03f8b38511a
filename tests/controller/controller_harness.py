"""The controller test harness: controllers on a FakeQuorum, kio requests, collected outputs."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Feature, Listener
from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState

from kraftlab.node.controller.fake_quorum import FakeQuorum
from kraftlab.node.controller.ports import ControllerConfig, Reply
from kraftlab.node.controller.quorum_controller import QuorumController
from kraftlab.node.metadata.journal import JournalEvent

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"


class Harness:
    def __init__(self, controllers: int = 1, session_timeout_ms: int = 9000, **config: Any) -> None:
        self.q = FakeQuorum()
        self.now = 1_000
        self.ctrls: dict[int, QuorumController] = {}
        for i in range(1, controllers + 1):
            c = QuorumController(
                ControllerConfig(
                    node_id=i, cluster_id=CLUSTER_ID, session_timeout_ms=session_timeout_ms, seed=i, **config
                ),
                self.q.writer(i),
            )
            self.ctrls[i] = c
            self.q.attach(f"c{i}", i, c)
        self.tokens = itertools.count()
        self.replies: dict[int, Any] = {}
        self.events: list[JournalEvent] = []
        self.incarnations: dict[int, uuid.UUID] = {}
        self.elect(1)

    # ---- driving ----
    def active(self) -> QuorumController:
        return self.ctrls[self.q.leader] if self.q.leader is not None else self.ctrls[1]

    def elect(self, node: int, **kw: Any) -> None:
        self.q.elect(node, **kw)
        self.q.commit()
        self.collect()

    def collect(self) -> None:
        for c in self.ctrls.values():
            for out in c.take_outputs():
                if isinstance(out, Reply):
                    self.replies[out.token] = out.response
                else:
                    self.events.append(out)

    def send(self, req: Any, to: int | None = None, principal: str = "User:ANONYMOUS") -> int:
        token = next(self.tokens)
        c = self.ctrls[to] if to is not None else self.active()
        c.handle_request(token, req, self.now, principal=principal)
        self.collect()
        return token

    def commit(self) -> None:
        self.q.commit()
        self.collect()

    def run(self, req: Any, to: int | None = None, principal: str = "User:ANONYMOUS") -> Any:
        token = self.send(req, to, principal)
        self.commit()
        return self.replies.pop(token)

    def tick(self, advance_ms: int = 0) -> None:
        self.now += advance_ms
        for c in self.ctrls.values():
            c.tick(self.now)
        self.collect()
        self.commit()

    def image(self) -> Any:
        return self.active().future_image

    def evs(self, ev: str) -> list[dict[str, Any]]:
        return [e.fields for e in self.events if e.ev == ev]

    # ---- requests ----
    def registration(
        self,
        bid: int,
        incarnation: uuid.UUID | None = None,
        cluster_id: str = CLUSTER_ID,
        features: tuple[tuple[str, int, int], ...] = (("metadata.version", 1, 1),),
        previous_broker_epoch: int = -1,
        log_dirs: tuple[uuid.UUID, ...] = (),
    ) -> Any:
        inc = incarnation or self.incarnations.setdefault(bid, uuid.UUID(int=bid * 1000 + 1))
        return BrokerRegistrationRequest(
            broker_id=bid,
            cluster_id=cluster_id,
            incarnation_id=inc,
            listeners=(Listener(name="PLAINTEXT", host=f"10.0.0.{bid}", port=9092, security_protocol=0),),
            features=tuple(
                Feature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in features
            ),
            rack=None,
            previous_broker_epoch=previous_broker_epoch,
            log_dirs=log_dirs,
        )

    def register(self, bid: int, **kw: Any) -> int:
        resp = self.run(self.registration(bid, **kw))
        assert resp.error_code == 0, resp
        return resp.broker_epoch

    def heartbeat(
        self, bid: int, epoch: int, offset: int | None = None, want_fence: bool = False, want_shut_down: bool = False
    ) -> Any:
        off = self.active().committed_offset if offset is None else offset
        return self.run(
            BrokerHeartbeatRequest(
                broker_id=bid,
                broker_epoch=epoch,
                current_metadata_offset=off,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
            )
        )

    def start_brokers(self, *ids: int) -> dict[int, int]:
        epochs = {b: self.register(b) for b in ids}
        for b, e in epochs.items():
            r = self.heartbeat(b, e)
            assert r.error_code == 0 and not r.is_fenced, r
        return epochs

    def create(
        self, name: str, partitions: int = 1, rf: int = 1, assignments: dict[int, list[int]] | None = None
    ) -> Any:
        assigns = tuple(
            CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(bs)) for p, bs in (assignments or {}).items()
        )
        topic = CreatableTopic(
            name=name,
            num_partitions=-1 if assigns else partitions,
            replication_factor=-1 if assigns else rf,
            assignments=assigns,
            configs=(),
        )
        return self.run(CreateTopicsRequest(topics=(topic,))).topics[0]

    def delete(self, name: str) -> Any:
        return self.run(
            DeleteTopicsRequest(topics=(DeleteTopicState(name=name, topic_id=uuid.UUID(int=0)),), timeout=0)
        ).responses[0]

    def alter_isr(
        self,
        sender: int,
        sender_epoch: int,
        topic: str,
        pid: int,
        isr: list[int],
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        isr_epochs: dict[int, int] | None = None,
    ) -> Any:
        t = self.image().topic(topic)
        p = t.partitions.get(pid)
        pd = PartitionData(
            partition_index=pid,
            leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr_with_epochs=tuple(
                BrokerState(broker_id=b, broker_epoch=(isr_epochs or {}).get(b, -1)) for b in isr
            ),
            partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
        )
        return self.run(
            AlterPartitionRequest(
                broker_id=sender, broker_epoch=sender_epoch, topics=(TopicData(topic_id=t.topic_id, partitions=(pd,)),)
            )
        )
