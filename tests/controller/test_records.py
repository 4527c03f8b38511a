"""Metadata record framing: round trips through kio, KIP-631 header bytes, decoder errors, dump JSON."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RecordFormatError,
    RegisterBrokerRecord,
    TopicRecord,
    decode,
    encode,
    from_log_record,
    to_json,
    to_log_record,
    uuid_from_kafka,
    uuid_to_kafka,
)

ids = st.integers(min_value=0, max_value=2**31 - 1)
uuids = st.uuids()
int_lists = st.lists(ids, max_size=6).map(tuple)


@given(
    pid=ids,
    tid=uuids,
    isr=st.none() | int_lists,
    leader=st.integers(min_value=-2, max_value=100),
    replicas=st.none() | int_lists,
    removing=st.none() | int_lists,
    adding=st.none() | int_lists,
)
def test_partition_change_round_trip(pid, tid, isr, leader, replicas, removing, adding) -> None:
    rec = PartitionChangeRecord(
        partition_id=pid,
        topic_id=tid,
        isr=isr,
        leader=leader,
        replicas=replicas,
        removing_replicas=removing,
        adding_replicas=adding,
    )
    assert decode(encode(rec)) == rec


@given(
    bid=ids,
    epoch=st.integers(min_value=0, max_value=2**62),
    rack=st.none() | st.text(max_size=5),
    fenced=st.booleans(),
    shutdown=st.booleans(),
    port=st.integers(min_value=0, max_value=65535),
)
def test_register_broker_round_trip(bid, epoch, rack, fenced, shutdown, port) -> None:
    rec = RegisterBrokerRecord(
        broker_id=bid,
        incarnation_id=uuid.UUID(int=bid + 1),
        broker_epoch=epoch,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="10.0.0.1", port=port, security_protocol=0),),
        features=(BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=7),),
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=shutdown,
    )
    assert decode(encode(rec)) == rec


def test_frame_header_is_kafkas() -> None:
    tid = uuid.UUID(int=7)
    value = encode(TopicRecord(name="bar", topic_id=tid))
    # Kafka's frame version 1 (AbstractApiMessageSerde), record type 2 (TopicRecord), version 0, the payload
    assert value[:3] == bytes([1, 2, 0])
    assert encode(FenceBrokerRecord(id=1, epoch=0))[:3] == bytes([1, 7, 0])
    assert encode(NoOpRecord())[:3] == bytes([1, 20, 0])
    assert encode(RegisterBrokerRecord(broker_id=1, incarnation_id=tid, broker_epoch=0))[:3] == bytes([1, 0, 1])
    assert encode(PartitionRecord(partition_id=0, topic_id=tid))[:3] == bytes([1, 3, 0])
    assert encode(PartitionChangeRecord(partition_id=0, topic_id=tid))[:3] == bytes([1, 5, 0])
    # logs written before the node matched Kafka (frame version 0) still load
    assert decode(bytes([0]) + value[1:]) == decode(value)


def test_log_record_has_null_key() -> None:
    rec = to_log_record(NoOpRecord())
    assert rec.key is None
    assert from_log_record(rec) == NoOpRecord()


@pytest.mark.parametrize(
    "value",
    [
        b"",
        bytes([2, 2, 0]),
        bytes([1, 99, 0]),
        bytes([0, 2, 9]) + b"x",
        bytes([0, 2, 0, 5]),
        encode(NoOpRecord()) + b"z",
    ],
)
def test_decoder_rejects_garbage(value: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode(value)


def test_dump_json_matches_kip631_example() -> None:
    tid = uuid_from_kafka("GU_rXds2FGppL1JqXYpx2g")
    assert uuid_to_kafka(tid) == "GU_rXds2FGppL1JqXYpx2g"
    assert to_json(TopicRecord(name="bar", topic_id=tid)) == {
        "type": "TOPIC_RECORD",
        "version": 0,
        "data": {"name": "bar", "topicId": "GU_rXds2FGppL1JqXYpx2g"},
    }
    j = to_json(PartitionRecord(partition_id=0, topic_id=tid, replicas=(1,), isr=(1,), leader=1, leader_epoch=0))
    assert j["type"] == "PARTITION_RECORD"
    assert j["data"]["replicas"] == [1] and j["data"]["leaderEpoch"] == 0
    assert to_json(FenceBrokerRecord(id=1, epoch=0))["data"] == {"id": 1, "epoch": 0}


def test_dump_payload_is_one_json_line() -> None:
    import json

    from kraftlab.node.metadata.records import dump_payload
    from kraftlab.node.raft.ports import Record

    line = dump_payload(to_log_record(FenceBrokerRecord(id=3, epoch=42)))
    assert line is not None and "\n" not in line
    assert json.loads(line) == {"type": "FENCE_BROKER_RECORD", "version": 0, "data": {"id": 3, "epoch": 42}}
    assert dump_payload(Record(None, b"\x00\x63\x00")).startswith("undecodable metadata record")
    assert dump_payload(Record(None, None)) is None


@given(
    pid=ids,
    tid=uuids,
    replicas=int_lists,
    isr=int_lists,
    removing=st.none() | int_lists,
    adding=st.none() | int_lists,
    leader=st.integers(min_value=-1, max_value=2**31 - 1),
    epochs=st.tuples(st.integers(min_value=-1, max_value=2**31 - 1), st.integers(min_value=-1, max_value=2**31 - 1)),
    elr=int_lists,
)
def test_fast_partition_encoder_matches_kio(pid, tid, replicas, isr, removing, adding, leader, epochs, elr) -> None:
    import io

    from kraftlab.node.metadata import records as r

    rec = PartitionRecord(
        partition_id=pid,
        topic_id=tid,
        replicas=replicas,
        isr=isr,
        removing_replicas=removing,
        adding_replicas=adding,
        leader=leader,
        leader_epoch=epochs[0],
        partition_epoch=epochs[1],
        last_known_elr=elr,
    )
    buf = io.BytesIO()
    r._WRITERS[PartitionRecord](buf, rec)
    assert encode(rec) == bytes([1, 3, 0]) + buf.getvalue()
    assert decode(encode(rec)) == rec


@given(
    pid=st.integers(min_value=0, max_value=2**31 - 1),
    tid=uuids,
    isr=st.none() | int_lists,
    leader=st.integers(min_value=-2, max_value=2**31 - 1),
    replicas=st.none() | int_lists,
    removing=st.none() | int_lists,
    adding=st.none() | int_lists,
    elr=st.none() | int_lists,
)
def test_fast_partition_change_encoder_matches_kio(pid, tid, isr, leader, replicas, removing, adding, elr) -> None:
    import io

    from kraftlab.node.metadata import records as r

    rec = PartitionChangeRecord(
        partition_id=pid,
        topic_id=tid,
        isr=isr,
        leader=leader,
        replicas=replicas,
        removing_replicas=removing,
        adding_replicas=adding,
        last_known_elr=elr,
    )
    buf = io.BytesIO()
    r._WRITERS[PartitionChangeRecord](buf, rec)
    assert encode(rec) == bytes([1, 5, 0]) + buf.getvalue()
    assert decode(encode(rec)) == rec
