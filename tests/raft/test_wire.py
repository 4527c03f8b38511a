"""Every Raft message survives the trip through kio's Kafka wire encoding and back."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from kio_bytes import through_bytes

from kraftlab.node.controller.messages import build
from kraftlab.node.process.transport import register_raft_apis
from kraftlab.node.protocol.registry import ApiRegistry
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.raft.membership import wire as voter_wire
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.voters import Endpoint, Voter

E = m.Errors


DIRECTORY = uuid.UUID(int=(7 << 64) | 3)

REQUESTS = [
    m.VoteRequest(7, 2, 6, 120, True),
    m.VoteRequest(7, 2, 6, 120, False),
    m.BeginQuorumEpochRequest(9, 3),
    m.EndQuorumEpochRequest(9, 3, (2, 1)),
    m.DescribeQuorumRequest(),
    m.FetchRequest(4, 2, 1000, 3, 500),
    m.FetchRequest(4, 8, 0, 0, 0),
    m.FetchRequest(4, 8, 0, 0, 0, DIRECTORY),
    m.FetchSnapshotRequest(4, 2, OffsetAndEpoch(300, 3), 4096, 1 << 20),
    m.FetchSnapshotRequest(4, 2, OffsetAndEpoch(300, 3), 4096, 1 << 20, DIRECTORY),
]

BATCHES = (
    Batch(10, 3, (Record(b"k", b"v"), Record(None, b"w")), False, 1234),
    Batch(12, 3, (Record(b"\x00\x00\x00\x02", b"lc"),), True, 1250),
)

RESPONSES = [
    m.VoteResponse(E.NONE, 7, None, True),
    m.VoteResponse(E.FENCED_LEADER_EPOCH, 8, 3, False),
    m.BeginQuorumEpochResponse(E.NONE, 9, 3),
    m.EndQuorumEpochResponse(E.NOT_LEADER_OR_FOLLOWER, 9, None),
    m.DescribeQuorumResponse(
        E.NONE, 1, 5, 77, (m.ReplicaState(1, 80, 10, 10), m.ReplicaState(2, 77, 9, -1)), (m.ReplicaState(9, 3),)
    ),
    m.FetchResponse(E.NONE, 4, 1, 12, 0, BATCHES),
    m.FetchResponse(E.NONE, 4, 1, 12, 0, (), OffsetAndEpoch(8, 2)),
    m.FetchResponse(E.NONE, 4, 1, 12, 100, (), None, OffsetAndEpoch(100, 3)),
    m.FetchResponse(E.NOT_LEADER_OR_FOLLOWER, 5, None, 0),
    m.FetchSnapshotResponse(E.NONE, 4, 1, OffsetAndEpoch(100, 3), 9000, 4096, b"\x01\x02chunk"),
    m.FetchSnapshotResponse(E.SNAPSHOT_NOT_FOUND, 4, 1, OffsetAndEpoch(100, 3)),
]


@pytest.mark.parametrize("message", REQUESTS, ids=lambda r: type(r).__name__)
def test_request_round_trip(message: m.Request) -> None:
    entity = wire.request_to_wire(message, cluster_id="c1", destination=3)
    assert type(entity) is wire.REQUEST_ENTITIES[type(message)]
    assert wire.request_from_wire(through_bytes(entity)) == message


@pytest.mark.parametrize("message", RESPONSES, ids=lambda r: type(r).__name__)
def test_response_round_trip(message: m.Response) -> None:
    entity = wire.response_to_wire(message)
    assert type(entity) is wire.RESPONSE_ENTITIES[type(message)]
    assert wire.response_from_wire(through_bytes(entity)) == message


def test_versions_are_the_documented_ones() -> None:
    versions = {t.__name__: int(e.__version__) for t, e in wire.REQUEST_ENTITIES.items()}
    assert versions == {
        "VoteRequest": 2,
        "BeginQuorumEpochRequest": 0,
        "EndQuorumEpochRequest": 0,
        "DescribeQuorumRequest": 1,
        "FetchRequest": 17,
        "FetchSnapshotRequest": 1,
    }
    assert wire.MIN_VERSIONS == {1: 12, 59: 0}


@pytest.mark.parametrize("version", wire.FETCH_VERSIONS)
def test_fetch_at_every_served_version_carries_what_it_can(version: int) -> None:
    """Every Fetch version the node serves goes through and back; the replica's directory id only
    from v17 (KIP-853) — before it, the leader sees the replica as (id, none), as Kafka's does."""
    message = m.FetchRequest(4, 2, 1000, 3, 500, DIRECTORY)
    entity = wire.request_to_wire(message, "c1", version=version)
    assert int(entity.__version__) == version
    expected = message if version >= 17 else dataclasses.replace(message, replica_directory_id=None)
    assert wire.request_from_wire(through_bytes(entity)) == expected
    response = m.FetchResponse(E.NONE, 4, 1, 12, 0, BATCHES)
    answer = wire.response_to_wire(response, version)
    assert int(answer.__version__) == version
    assert wire.response_from_wire(through_bytes(answer)) == response


@pytest.mark.parametrize("version", wire.FETCH_SNAPSHOT_VERSIONS)
def test_fetch_snapshot_at_every_served_version(version: int) -> None:
    message = m.FetchSnapshotRequest(4, 2, OffsetAndEpoch(300, 3), 4096, 1 << 20, DIRECTORY)
    entity = wire.request_to_wire(message, "c1", version=version)
    expected = message if version >= 1 else dataclasses.replace(message, replica_directory_id=None)
    assert wire.request_from_wire(through_bytes(entity)) == expected
    response = m.FetchSnapshotResponse(E.NONE, 4, 1, OffsetAndEpoch(100, 3), 9000, 4096, b"chunk")
    answer = wire.response_to_wire(response, version)
    assert int(answer.__version__) == version
    assert wire.response_from_wire(through_bytes(answer)) == response


def test_a_fetch_naming_another_topic_id_is_refused() -> None:
    entity = wire.request_to_wire(m.FetchRequest(4, 2, 0, 0, 0))
    topic = entity.topics[0]
    other = dataclasses.replace(entity, topics=(dataclasses.replace(topic, topic_id=uuid.UUID(int=2)),))
    with pytest.raises(wire.WireError):
        wire.request_from_wire(other)


def test_a_request_for_another_topic_is_refused() -> None:
    entity = wire.request_to_wire(m.BeginQuorumEpochRequest(1, 1))
    other = type(entity)(topics=(type(entity.topics[0])(topic_name="other", partitions=entity.topics[0].partitions),))
    with pytest.raises(wire.WireError):
        wire.request_from_wire(other)


def test_followers_fetching_the_same_batches_share_one_response_entity() -> None:
    batch = Batch(5, 2, (Record(b"k", b"v"),), False, 1234)
    first = wire.response_to_wire(m.FetchResponse(m.Errors.NONE, 2, 1, 6, 0, (batch,)))
    assert wire.response_to_wire(m.FetchResponse(m.Errors.NONE, 2, 1, 6, 0, (batch,))) is first
    # another high-water mark, or equal content in other objects: encoded afresh, and still right
    other_hw = wire.response_to_wire(m.FetchResponse(m.Errors.NONE, 2, 1, 5, 0, (batch,)))
    assert other_hw is not first and other_hw.responses[0].partitions[0].high_watermark == 5
    copy = Batch(5, 2, (Record(b"k", b"v2"),), False, 1234)
    fresh = wire.response_to_wire(m.FetchResponse(m.Errors.NONE, 2, 1, 5, 0, (copy,)))
    assert fresh is not other_hw
    assert wire.response_from_wire(fresh).batches == (copy,)


@pytest.mark.parametrize("entity_class", sorted(set(wire.RESPONSE_ENTITIES.values()), key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("error", [E.CLUSTER_AUTHORIZATION_FAILED, E.INCONSISTENT_CLUSTER_ID, E.UNKNOWN_SERVER_ERROR])
def test_a_peers_top_level_error_applies_to_the_partition(entity_class: type, error: m.Errors) -> None:
    """A Kafka peer refusing a whole request sets only the top-level error (the rest its schema's
    defaults, no partition): every response decodes to the core's message with that error and no
    epoch or leader learnt from it."""
    entity = build(entity_class, {"error_code": int(error)})
    decoded = wire.response_from_wire(through_bytes(entity))
    assert type(wire.response_to_wire(decoded)) is entity_class
    assert decoded.error == error
    assert decoded.epoch == -1 and decoded.leader_id is None


def _named(entity: object, names: tuple[str, ...]) -> list[object]:
    """Every value of a field called one of `names`, anywhere inside a kio entity."""
    found: list[object] = []
    if dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name in names:
                found.append(value)
            found += _named(value, names)
    elif isinstance(entity, tuple):
        for item in entity:
            found += _named(item, names)
    return found


@pytest.mark.parametrize("message", REQUESTS + RESPONSES, ids=lambda r: type(r).__name__)
def test_every_message_names_kafkas_metadata_partition(message: m.Message) -> None:
    """Kafka's voters read and write the metadata log as topic __cluster_metadata (id 1), partition 0: a
    message naming anything else is one a Kafka peer refuses (or misreads)."""
    entity = wire.request_to_wire(message) if m.is_request(message) else wire.response_to_wire(message)
    decoded = through_bytes(entity)
    topics = _named(decoded, ("topic_name", "topic", "name")) + [
        "__cluster_metadata" if i == uuid.UUID(int=1) else i for i in _named(decoded, ("topic_id",))
    ]  # Fetch from v13 names it by Kafka's METADATA_TOPIC_ID
    partitions = _named(decoded, ("partition_index", "partition", "index"))
    assert topics and set(topics) == {"__cluster_metadata"}
    assert partitions and set(partitions) == {0}


def test_a_controller_advertises_every_fetch_version_it_maps() -> None:
    """The Raft listener's ApiVersions ranges are the versions `wire` reads: Fetch 12..17 and
    FetchSnapshot 0..1 (what a peer negotiates from), DescribeQuorum 1..2, the others one each."""
    registry = ApiRegistry()
    register_raft_apis(registry, None, "c1", 1.0)  # type: ignore[arg-type]  # the driver serves requests only
    served = {key: [v for v in range(0, 20) if registry.supports(key, v)] for key in (1, 59, 55, 52)}
    assert served == {1: list(wire.FETCH_VERSIONS), 59: [0, 1], 55: [1, 2], 52: [2]}


@pytest.mark.parametrize("message", [m.VoteRequest(7, 2, 6, 120), m.FetchRequest(4, 2, 0, 0, 0),
                                     m.FetchSnapshotRequest(4, 2, OffsetAndEpoch(300, 3), 0, 1 << 20)],
                         ids=lambda r: type(r).__name__)
def test_a_request_for_another_partition_of_the_metadata_topic_is_refused(message: m.Request) -> None:
    """Kafka's Raft APIs serve partition 0 of __cluster_metadata only (RaftUtil.hasValidTopicPartition)."""
    entity = wire.request_to_wire(message, "c1", 3)
    topic = entity.topics[0]
    index = "partition_index" if hasattr(topic.partitions[0], "partition_index") else "partition"
    other = dataclasses.replace(topic, partitions=(dataclasses.replace(topic.partitions[0], **{index: 1}),))
    with pytest.raises(wire.WireError):
        wire.request_from_wire(dataclasses.replace(entity, topics=(other,)))


def test_an_answer_for_another_partition_of_the_metadata_topic_is_refused() -> None:
    entity = wire.response_to_wire(m.FetchResponse(E.NONE, 4, 1, 12, 0, BATCHES))
    topic = entity.responses[0]
    other = dataclasses.replace(topic, partitions=(dataclasses.replace(topic.partitions[0], partition_index=2),))
    with pytest.raises(wire.WireError):
        wire.response_from_wire(dataclasses.replace(entity, responses=(other,)))


@pytest.mark.parametrize("ms", [8_200_487, 2_127_877_499, 131_383_004, 1, 2**31 - 1])
def test_millisecond_fields_are_read_to_the_millisecond(ms: int) -> None:
    """MaxWaitMs and TimeoutMs are int32 milliseconds: read as float seconds times 1000 they lost one
    millisecond on about one value in a hundred."""
    fetch = m.FetchRequest(4, 2, 0, 0, ms)
    assert wire.request_from_wire(through_bytes(wire.request_to_wire(fetch))) == fetch
    add = m.AddRaftVoterRequest(Voter(4, DIRECTORY, (Endpoint("CONTROLLER", "h", 9093),)), ms)
    assert voter_wire.request_from_wire(through_bytes(voter_wire.request_to_wire(add, "c1"))) == add
