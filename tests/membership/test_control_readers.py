"""The node's control-record readers handed every control record Kafka writes, and keys Kafka's
`ControlRecordType.parseTypeId` reads or refuses: each reader takes its own type only
(`ControlRecordUtils.validateControlRecordType`: another type is refused, never read as its own),
a key of a later version reads as version 0, a shorter key or a negative version is refused, and
the voter-set reader (`KRaftControlRecordStateMachine.handleBatch`) reads KRaftVersion and Voters
records and skips every other control type."""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0 import data as lc
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0 import data as vr
from kio.serial import entity_writer
from kio.static.primitive import i16, i32, i64, u16

from kraftlab.node.raft.control import control_type, decode_leader_change
from kraftlab.node.raft.membership.log_voters import ControlRecordState
from kraftlab.node.raft.membership.records import parse_kraft_version, parse_voters
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet

DIRECTORY = uuid.UUID(int=(7 << 64) | 1)


def _value(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _key(kind: int, version: int = 0, tail: bytes = b"") -> bytes:
    return struct.pack(">hh", version, kind) + tail


VALUES: dict[int, bytes] = {
    0: b"\x00\x00\x00\x00\x00\x05",  # ABORT: EndTransactionMarker (version, coordinator epoch)
    1: b"\x00\x00\x00\x00\x00\x05",  # COMMIT
    2: _value(lc.LeaderChangeMessage(version=i16(0), leader_id=BrokerId(1), voters=(lc.Voter(voter_id=i32(1)),),
                                     granting_voters=(lc.Voter(voter_id=i32(1)),))),
    3: _value(SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(9))),
    4: _value(SnapshotFooterRecord(version=i16(0))),
    5: _value(KRaftVersionRecord(version=i16(0), k_raft_version=i16(1))),
    6: _value(vr.VotersRecord(version=i16(0), voters=(vr.Voter(
        voter_id=BrokerId(3), voter_directory_id=DIRECTORY,
        endpoints=(vr.Endpoint(name="CONTROLLER", host="n3", port=u16(9093)),),
        k_raft_version_feature=vr.KRaftVersionFeature(min_supported_version=i16(0), max_supported_version=i16(1)),
    ),))),
    7: b"\x00\x00",  # a type Kafka does not know (ControlRecordType.UNKNOWN)
}
"""One control record value of every type, written by Kafka's schemas."""
VOTERS = VoterSet([Voter(3, DIRECTORY, (Endpoint("CONTROLLER", "n3", 9093),), (0, 1))])
READERS: dict[int, tuple[Callable[[Record], Any], Any]] = {
    2: (decode_leader_change, (1, [1], [1])),
    5: (parse_kraft_version, 1),
    6: (parse_voters, VOTERS),
}
"""Each reader by the type it reads, and what it reads from VALUES."""


@pytest.mark.parametrize("own", sorted(READERS))
@pytest.mark.parametrize("kind", sorted(VALUES))
@pytest.mark.parametrize("key_version", [0, 1, 7])
def test_each_reader_reads_its_own_type_only(own: int, kind: int, key_version: int) -> None:
    reader, read = READERS[own]
    record = Record(_key(kind, key_version, b"\x00" * key_version), VALUES[kind])
    assert control_type(record.key) == kind
    if kind == own:
        assert reader(record) == read
        return
    with pytest.raises(ValueError):
        reader(record)
    with pytest.raises(ValueError):  # the reader's own value under another type's key: the key decides
        reader(Record(record.key, VALUES[own]))


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00", _key(6, -1), _key(5, -7), _key(2, -1)])
def test_a_key_kafka_refuses_is_refused_by_every_reader(key: bytes | None) -> None:
    for reader, _ in READERS.values():
        for value in VALUES.values():
            with pytest.raises(ValueError):
                reader(Record(key, value))
    with pytest.raises(ValueError):
        control_type(key)
    with pytest.raises(ValueError):
        ControlRecordState(VoterSet([])).apply_record(0, Record(key, VALUES[6]))


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_the_voter_set_reader_skips_every_other_control_type(kind: int) -> None:
    initial = VoterSet.of_ids([1, 2, 3])
    state = ControlRecordState(initial)
    state.apply_batch(Batch(4, 1, (Record(_key(kind, 1, b"\x00"), VALUES[kind]),), True, 0))
    expected = {5: (1, initial), 6: (0, VOTERS)}.get(kind, (0, initial))
    assert (state.kraft_version, state.latest_voters) == expected
    assert state.last_change_offset() == (4 if kind == 6 else -1)
    assert state.kraft_version_at(3) == 0
