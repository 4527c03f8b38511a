"""The broker's request dispatch of the data plane (BrokerApis with a ReplicaManager): Produce and
Fetch reach the replication core once the broker runs, and are refused (the connection closed) while
it starts or once it has fenced itself, as Kafka's brokers refuse clients then; partitions take
their roles only once the broker caught up with the metadata log."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from broker_harness import MiniCluster
from kio.schema.errors import ErrorCode
from replication_helpers import batch, fetch, image_with, manager, one_partition, produce

from kraftlab.node.broker.apis import BrokerApis, ClientReply, Refused
from kraftlab.node.broker.lifecycle import BrokerState
from kraftlab.node.metadata.image import PartitionInfo


def test_produce_and_fetch_are_served_only_while_running_and_unfenced(tmp_path: Path) -> None:
    mc = MiniCluster()
    b = mc.brokers[101]
    b.apis = BrokerApis(b.apis.cluster_id, b.metadata, b.lifecycle, replicas=manager(tmp_path, 101))
    b.apis.handle("early", produce(batch("a")), mc.now)
    (out,) = b.apis.take_outputs()
    assert isinstance(out, Refused) and out.reason == "STARTING"
    mc.run_until(lambda: all(x.lifecycle.state == BrokerState.RUNNING for x in mc.brokers.values()))
    b.apis.handle("p", produce(batch("a"), topic="absent"), mc.now)
    b.apis.handle("f", fetch(0, topic="absent"), mc.now)
    got = {o.token: o.response for o in b.apis.take_outputs() if isinstance(o, ClientReply)}
    assert {t: one_partition(r).error_code for t, r in got.items()} == {
        "p": ErrorCode.unknown_topic_or_partition, "f": ErrorCode.unknown_topic_or_partition}
    mc.cut.add(101)
    mc.run_until(lambda: b.lifecycle.self_fenced, max_ms=30_000)
    b.apis.handle("late", fetch(0, topic="absent"), mc.now)
    refused = [o for o in b.apis.take_outputs() if isinstance(o, Refused)]
    assert [(o.token, o.reason) for o in refused] == [("late", "fenced itself")]


def test_partition_roles_wait_for_the_initial_metadata_catch_up(tmp_path: Path) -> None:
    """A broker replaying its metadata log at start takes no partition role from the image until
    the controller says it caught up (Kafka publishes to the replica manager only then): the image
    it replays may name it leader in an epoch the quorum has long left."""
    mc = MiniCluster()
    b = mc.brokers[101]
    stale = SimpleNamespace(image=image_with(partitions={0: PartitionInfo((101,), (101,), leader=101, leader_epoch=0)}),
                            highest_offset=7)
    replicas = manager(tmp_path, 101)
    apis = BrokerApis(b.apis.cluster_id, stale, b.lifecycle, replicas=replicas)  # type: ignore[arg-type]
    assert b.lifecycle.state == BrokerState.STARTING
    apis.on_metadata(mc.now)
    assert replicas.partitions == {}
    mc.run_until(lambda: b.lifecycle.state != BrokerState.STARTING)
    apis.on_metadata(mc.now)
    assert replicas.partitions[("t", 0)].leader_epoch == 0
