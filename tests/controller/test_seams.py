"""Small seams: version-independent message building, error responses, the controller listener's
API filter, the FanOut state machine, the in-memory writer."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.broker_heartbeat.v0.request import BrokerHeartbeatRequest as Heartbeat0
from kio.schema.create_topics.v2.request import CreatableTopic as CT2
from kio.schema.create_topics.v2.request import CreateTopicsRequest as Create2
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as Delete1
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as Metadata1
from kio.schema.metadata.v12.request import MetadataRequest as Metadata12

from kraftlab.node.controller import InMemoryLog, NotLeader, error_response, is_controller_listener_api
from kraftlab.node.controller.messages import api_name, as_values, build, respond, response_class
from kraftlab.node.metadata.fanout import FanOut
from kraftlab.node.metadata.records import NoOpRecord, to_log_record
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch


def test_build_fills_only_fields_of_the_version() -> None:
    values = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": "r"}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [{"name": "t", "topic_id": uuid.UUID(int=5), "partitions": []}],
    }
    v12 = respond(
        Metadata12(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False), values
    )
    v1 = respond(Metadata1(topics=None), values)
    assert v12.cluster_id == "c" and v12.topics[0].topic_id == uuid.UUID(int=5) and v12.brokers[0].rack == "r"
    assert not hasattr(v1, "cluster_id") and v1.brokers[0].rack == "r" and v1.controller_id == 1
    assert type(v1).__version__ == 1 and type(v12).__version__ == 12
    assert as_values(build(type(v12), as_values(v12))) == as_values(v12)
    assert response_class(Metadata1(topics=None)).__name__ == "MetadataResponse"
    assert api_name(v1) == "Metadata" == api_name(Metadata1(topics=None))


def test_error_responses_per_api() -> None:
    hb = error_response(
        Heartbeat0(broker_id=1, broker_epoch=2, current_metadata_offset=0, want_fence=False, want_shut_down=False),
        ErrorCode.not_controller,
    )
    assert hb.error_code == ErrorCode.not_controller and type(hb).__version__ == 0
    create = error_response(
        Create2(topics=(CT2(name="a", num_partitions=1, replication_factor=1, assignments=(), configs=()),), timeout=0),
        ErrorCode.request_timed_out,
    )
    assert [(t.name, t.error_code) for t in create.topics] == [("a", ErrorCode.request_timed_out)]
    delete = error_response(Delete1(topic_names=("a", "b"), timeout=0), ErrorCode.not_controller)
    assert [r.name for r in delete.responses] == ["a", "b"]


def test_controller_listener_api_filter() -> None:
    for api in (
        "BrokerRegistration",
        "BrokerHeartbeat",
        "AlterPartition",
        "Vote",
        "Fetch",
        "ApiVersions",
        "DescribeQuorum",
        "CreateTopics",
    ):
        assert is_controller_listener_api(api)
    for api in ("Metadata", "Produce", "DescribeCluster", "FindCoordinator"):
        assert not is_controller_listener_api(api)


def test_in_memory_log_refuses_when_not_leader() -> None:
    log = InMemoryLog(epoch=3, start=10)
    assert log.append([to_log_record(NoOpRecord())], 5) == 10
    assert log.batches[0].epoch == 3 and log.end == 11
    log.leader = False
    with pytest.raises(NotLeader):
        log.append([to_log_record(NoOpRecord())], 6)


class _Spy(CommittedReplay):
    def __init__(self) -> None:
        super().__init__()
        self.leaders: list[tuple[int | None, int, bool]] = []

    def handle_load_snapshot(self, snapshot_id, records) -> None:
        self.load_snapshot(snapshot_id, records)

    def handle_commit(self, batches) -> None:
        for b in batches:
            self.apply_batch(b)

    def handle_leader_change(self, leader_id, epoch, local_is_leader) -> None:
        self.leaders.append((leader_id, epoch, local_is_leader))


def test_fanout_feeds_every_machine_and_snapshots_from_the_first() -> None:
    a, b = _Spy(), _Spy()
    fan = FanOut(a, b)
    fan.handle_leader_change(1, 2, True)
    batch = Batch(0, 2, (to_log_record(NoOpRecord()), to_log_record(NoOpRecord())))
    fan.handle_commit([batch])
    fan.handle_commit([batch])  # never twice
    assert a.next_offset == b.next_offset == 2 and a.leaders == b.leaders == [(1, 2, True)]
    assert [e.fields["offset"] for e in a.take_events()] == [0, 1]
    snap = fan.snapshot_records()
    assert snap is not None and snap[0] == OffsetAndEpoch(2, 2)
    assert b.snapshot_records() is None  # kept in step
    fan.handle_load_snapshot(OffsetAndEpoch(7, 3), [])
    assert a.next_offset == b.next_offset == 7
