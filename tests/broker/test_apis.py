"""Client-facing broker APIs: Metadata and DescribeCluster from the image, forwarding of
CreateTopics/DeleteTopics in the client's version, refusals."""

from __future__ import annotations

import datetime
import uuid

from broker_harness import CLUSTER_ID, MiniCluster
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.create_topics.v4.request import CreatableTopic as CT4
from kio.schema.create_topics.v4.request import CreateTopicsRequest as CreateTopics4
from kio.schema.create_topics.v7.request import CreatableTopic as CT7
from kio.schema.create_topics.v7.request import CreateTopicsRequest as CreateTopics7
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as DeleteTopics1
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest as DescribeCluster2
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as Metadata1
from kio.schema.metadata.v12.request import MetadataRequest as Metadata12
from kio.schema.metadata.v12.request import MetadataRequestTopic

from kraftlab.node.broker.apis import ClientReply, Refused
from kraftlab.node.broker.lifecycle import BrokerState


def _up(mc: MiniCluster) -> None:
    mc.run_until(lambda: all(b.lifecycle.state == BrokerState.RUNNING for b in mc.brokers.values()))


def _create(mc: MiniCluster, name: str, partitions: int = 3, rf: int = 3, via: int = 101) -> object:
    req = CreateTopics4(
        topics=(CT4(name=name, num_partitions=partitions, replication_factor=rf, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5),
    )
    reply = mc.client(via, f"create-{name}", req)
    assert isinstance(reply, ClientReply)
    assert type(reply.response).__version__ == 4
    return reply.response.topics[0]


def test_create_forwarded_in_client_version_and_visible_in_metadata(mc: MiniCluster) -> None:
    _up(mc)
    r = _create(mc, "t1")
    assert r.error_code == ErrorCode.none
    assert _create(mc, "t1", via=102).error_code == ErrorCode.topic_already_exists
    mc.run(200)  # brokers replay the committed records
    md = mc.client(
        103, "md", Metadata12(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    ).response
    assert md.cluster_id == CLUSTER_ID
    assert sorted(b.node_id for b in md.brokers) == [101, 102, 103]
    assert {b.host for b in md.brokers} == {"10.0.0.101", "10.0.0.102", "10.0.0.103"}
    (t,) = md.topics
    assert t.name == "t1" and len(t.partitions) == 3
    assert t.topic_authorized_operations == -(2**31)  # Kafka's value when not asked for
    img = mc.active().committed_image
    for p in t.partitions:
        ip = img.topic("t1").partitions[p.partition_index]
        assert p.leader_id == ip.leader and tuple(p.isr_nodes) == ip.isr and p.leader_epoch == ip.leader_epoch



def test_metadata_by_topic_id_as_kafka_answers(mc: MiniCluster) -> None:
    """v12 asks by id: a known id gets its topic by name, an unknown one UNKNOWN_TOPIC_ID with a null
    name (Kafka's answer; UNKNOWN_TOPIC_OR_PARTITION is for names)."""
    _up(mc)
    _create(mc, "byid", partitions=2, rf=1)
    mc.run(50)
    known = mc.brokers[101].metadata.image.topic("byid")
    assert known is not None
    missing = uuid.uuid4()
    md = mc.client(
        101,
        "md-ids",
        Metadata12(
            topics=(MetadataRequestTopic(topic_id=known.topic_id, name=None),
                    MetadataRequestTopic(topic_id=missing, name=None)),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    ).response
    found, unknown = md.topics
    assert (found.name, found.topic_id, found.error_code, len(found.partitions)) == (
        "byid", known.topic_id, ErrorCode.none, 2)
    assert (unknown.name, unknown.topic_id, unknown.error_code, unknown.partitions) == (
        None, missing, ErrorCode.unknown_topic_id, ())

def test_fenced_broker_hidden_from_metadata_and_not_leader_or_isr(mc: MiniCluster) -> None:
    _up(mc)
    _create(mc, "t", partitions=6)
    mc.cut.add(102)
    mc.run_until(lambda: mc.active().future_image.brokers[102].fenced, max_ms=15_000)
    mc.run(200)
    md = mc.client(101, "md", Metadata1(topics=None)).response
    assert 102 not in [b.node_id for b in md.brokers]
    for p in md.topics[0].partitions:
        assert p.leader_id != 102 and 102 not in p.isr_nodes
    dc = mc.client(101, "dc", DescribeClusterRequest(include_cluster_authorized_operations=False)).response
    assert sorted(b.broker_id for b in dc.brokers) == [101, 103] and dc.cluster_id == CLUSTER_ID
    # DescribeCluster v2 lists fenced brokers too when asked, marked
    asked = DescribeCluster2(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True)
    dc2 = mc.client(101, "dc2", asked).response
    assert {b.broker_id: b.is_fenced for b in dc2.brokers} == {101: False, 102: True, 103: False}
    not_asked = DescribeCluster2(
        include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False
    )
    assert sorted(b.broker_id for b in mc.client(101, "dc3", not_asked).response.brokers) == [101, 103]



def test_describe_cluster_for_controllers_refused_as_kafka_refuses(mc: MiniCluster) -> None:
    """A broker asked for the controllers' endpoints (KIP-919 endpoint type 2) answers
    MISMATCHED_ENDPOINT_TYPE, an unknown endpoint type UNSUPPORTED_ENDPOINT_TYPE — the error alone."""
    _up(mc)
    for endpoint_type, code in ((2, ErrorCode.mismatched_endpoint_type), (7, ErrorCode.unsupported_endpoint_type)):
        request = DescribeCluster2(include_cluster_authorized_operations=False, endpoint_type=endpoint_type,
                                   include_fenced_brokers=False)
        dc = mc.client(101, f"dc-{endpoint_type}", request).response
        assert (dc.error_code, dc.brokers, dc.cluster_id) == (code, (), "")
        assert dc.error_message

def test_unknown_topic_and_delete_forwarding(mc: MiniCluster) -> None:
    _up(mc)
    _create(mc, "gone", partitions=1, rf=1)
    md = mc.client(
        101,
        "md",
        Metadata12(
            topics=(MetadataRequestTopic(topic_id=None, name="nope"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    ).response
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    reply = mc.client(101, "del", DeleteTopics1(topic_names=("gone", "nope"), timeout=datetime.timedelta(seconds=5)))
    codes = {r.name: r.error_code for r in reply.response.responses}
    assert codes == {"gone": ErrorCode.none, "nope": ErrorCode.unknown_topic_or_partition}
    mc.run(200)
    assert mc.brokers[102].metadata.image.topic("gone") is None


def test_forward_retried_while_no_controller_then_times_out(mc: MiniCluster) -> None:
    _up(mc)
    mc.q.depose()
    req = CreateTopics4(
        topics=(CT4(name="x", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(milliseconds=1_000),
    )
    mc.brokers[101].apis.handle("c", req, mc.now)
    mc._route_apis(101)
    mc.run(500)
    assert "c" not in mc.client_replies
    mc.q.elect(2)
    mc.q.commit()
    mc.run_until(lambda: "c" in mc.client_replies, max_ms=2_000)
    assert mc.client_replies["c"].response.topics[0].error_code == ErrorCode.none
    mc.q.depose()
    mc.brokers[101].apis.handle("d", req, mc.now)
    mc._route_apis(101)
    mc.run(1_500)
    assert mc.client_replies["d"].response.topics[0].error_code == ErrorCode.request_timed_out


def test_refusals(mc: MiniCluster) -> None:
    b = mc.brokers[101]
    b.apis.handle("early", Metadata1(topics=None), mc.now)
    (out,) = b.apis.take_outputs()
    assert isinstance(out, Refused) and out.reason == "STARTING"
    _up(mc)
    b.apis.handle(
        "hb",
        BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=1, current_metadata_offset=0, want_fence=False, want_shut_down=False
        ),
        mc.now,
    )
    (out,) = b.apis.take_outputs()
    assert isinstance(out, ClientReply) and out.response.error_code == ErrorCode.not_controller


def test_write_visible_on_the_forwarding_broker_before_the_reply(mc: MiniCluster) -> None:
    _up(mc)
    b = mc.brokers[102]
    req = CreateTopics4(
        topics=(CT4(name="ryw", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5),
    )
    b.apis.handle("w", req, mc.now)
    mc._route_apis(102)
    mc.run_until(lambda: "w" in mc.client_replies)
    assert b.metadata.image.topic("ryw") is not None
    reply = mc.client(102, "del", DeleteTopics1(topic_names=("ryw",), timeout=datetime.timedelta(seconds=5)))
    assert reply.response.responses[0].error_code == ErrorCode.none
    assert b.metadata.image.topic("ryw") is None


def test_reply_released_after_visibility_wait_when_the_broker_lags(mc: MiniCluster) -> None:
    _up(mc)
    b = mc.brokers[101]
    req = CreateTopics4(
        topics=(CT4(name="lag", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5),
    )
    b.apis.handle("l", req, mc.now)
    (fwd,) = b.apis.take_outputs()
    fwd_token = fwd.token
    c = mc.active()
    c.handle_request(("x", 0, 0), fwd.request, mc.now)
    mc.q.committed_end = mc.q.end_offset  # committed, but delivered to the controllers only
    for i in mc.ctrls:
        mc.q.deliver(f"c{i}")
    (reply,) = [o for o in c.take_outputs() if type(o).__name__ == "Reply"]
    b.apis.on_forward_response(fwd_token, reply.response, mc.now)
    assert b.apis.take_outputs() == []  # held: not visible here yet
    b.apis.tick(mc.now + 1_999)
    assert b.apis.take_outputs() == []
    b.apis.tick(mc.now + 2_000)
    (out,) = b.apis.take_outputs()
    assert out.response.topics[0].error_code == ErrorCode.none


def test_reply_held_while_the_broker_shows_an_older_topic_of_the_same_name(mc: MiniCluster) -> None:
    """Read-your-writes by topic id: a broker whose image still shows the deleted `same` has not
    shown the new `same` its client created, nor the delete before it."""
    _up(mc)
    assert _create(mc, "same", via=102).error_code == ErrorCode.none
    mc.run(200)
    b, c = mc.brokers[101], mc.active()
    old = b.metadata.image.topic_ids["same"]

    def through_controller_only(token: str, request: object) -> object:
        b.apis.handle(token, request, mc.now)
        (fwd,) = b.apis.take_outputs()
        c.handle_request(("x", 0, 0), fwd.request, mc.now)
        mc.q.committed_end = mc.q.end_offset  # committed, but delivered to the controllers only
        for i in mc.ctrls:
            mc.q.deliver(f"c{i}")
        (reply,) = [o for o in c.take_outputs() if type(o).__name__ == "Reply"]
        b.apis.on_forward_response(fwd.token, reply.response, mc.now)
        return reply.response

    deleted = through_controller_only("d", DeleteTopics1(topic_names=("same",), timeout=datetime.timedelta(seconds=5)))
    assert deleted.responses[0].error_code == ErrorCode.none
    created = through_controller_only("c", CreateTopics7(
        topics=(CT7(name="same", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5), validate_only=False))
    assert created.topics[0].error_code == ErrorCode.none and created.topics[0].topic_id != old
    assert b.metadata.image.topic_ids["same"] == old
    assert b.apis.take_outputs() == []  # held: the name shows, but not this write's topic
    mc.run(200)  # the broker replays the delete and the create: both released
    assert b.metadata.image.topic_ids["same"] == created.topics[0].topic_id
    assert {"d", "c"} <= set(mc.client_replies)


def test_config_changes_forwarded_and_described(mc: MiniCluster) -> None:
    from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.incremental_alter_configs.v0.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    _up(mc)
    _create(mc, "cfg", partitions=1, rf=1)
    req = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=2,
                resource_name="cfg",
                configs=(AlterableConfig(name="retention.ms", config_operation=0, value="60000"),),
            ),
        ),
        validate_only=False,
    )
    reply = mc.client(101, "alter", req).response
    assert type(reply).__version__ == 0 and reply.responses[0].error_code == ErrorCode.none
    mc.run(300)
    describe = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(resource_type=2, resource_name="cfg", configuration_keys=None),
            DescribeConfigsResource(resource_type=2, resource_name="nope", configuration_keys=None),
        ),
        include_synonyms=False,
    )
    got = mc.client(102, "describe", describe).response
    assert [(c.name, c.value) for c in got.results[0].configs] == [("retention.ms", "60000")]
    assert got.results[1].error_code == ErrorCode.unknown_topic_or_partition


def test_create_partitions_forwarded_and_visible_on_the_forwarding_broker(mc: MiniCluster) -> None:
    from kio.schema.create_partitions.v1.request import CreatePartitionsRequest as CreatePartitions1
    from kio.schema.create_partitions.v1.request import CreatePartitionsTopic as CPT1

    _up(mc)
    assert _create(mc, "grow", partitions=1, rf=2).error_code == ErrorCode.none
    mc.run(200)
    req = CreatePartitions1(topics=(CPT1(name="grow", count=4, assignments=None), CPT1(name="x", count=2,
                                                                                      assignments=None)),
                            timeout=datetime.timedelta(seconds=5), validate_only=False)
    reply = mc.client(102, "cp", req)
    assert isinstance(reply, ClientReply) and type(reply.response).__version__ == 1
    assert {r.name: r.error_code for r in reply.response.results} == {
        "grow": ErrorCode.none, "x": ErrorCode.unknown_topic_or_partition}
    assert len(mc.brokers[102].metadata.image.topic("grow").partitions) == 4  # read-your-writes
    shrink = CreatePartitions1(topics=(CPT1(name="grow", count=2, assignments=None),),
                               timeout=datetime.timedelta(seconds=5), validate_only=False)
    assert mc.client(101, "cp2", shrink).response.results[0].error_code == ErrorCode.invalid_partitions
