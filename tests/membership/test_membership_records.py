"""KRaftVersionRecord and VotersRecord: Kafka's bytes, round trips, and refusal of malformed values."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.raft.control import ControlRecordType, control_key
from kraftlab.node.raft.membership.records import (
    describe_membership_record,
    kraft_version_record,
    parse_kraft_version,
    parse_voters,
    voters_record,
)
from kraftlab.node.raft.ports import Record
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet

DIR1 = uuid.UUID("0f3e6f40-b4aa-499c-9e2f-7ac905141e80")


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return bytes([len(raw) + 1]) + raw


def test_kraft_version_record_is_kafkas_bytes() -> None:
    record = kraft_version_record(1)
    # key: ControlRecordType version 0, type 5; value: Version int16 0, KRaftVersion int16 1, no tagged fields
    assert record.key == struct.pack(">hh", 0, 5)
    assert record.value == bytes.fromhex("0000000100")
    assert parse_kraft_version(record) == 1


def test_voters_record_is_kafkas_bytes() -> None:
    voters = VoterSet([Voter(1, DIR1, (Endpoint("CONTROLLER", "n1", 9093),), (0, 1))])
    record = voters_record(voters)
    expected = (
        b"\x00\x00"  # Version
        + b"\x02"  # compact array: 1 voter
        + struct.pack(">i", 1)
        + DIR1.bytes
        + b"\x02"  # compact array: 1 endpoint
        + _compact_string("CONTROLLER")
        + _compact_string("n1")
        + struct.pack(">H", 9093)
        + b"\x00"  # endpoint tagged fields
        + struct.pack(">hh", 0, 1)
        + b"\x00"  # KRaftVersionFeature tagged fields
        + b"\x00"  # voter tagged fields
        + b"\x00"  # record tagged fields
    )
    assert record.key == struct.pack(">hh", 0, 6)
    assert record.value == expected
    assert parse_voters(record) == voters


uuids = st.uuids().filter(lambda u: u.int != 0)
endpoints = st.lists(
    st.builds(Endpoint, st.text(min_size=1, max_size=12), st.text(max_size=20), st.integers(0, 65535)),
    max_size=3,
    unique_by=lambda e: e.name,
)


@st.composite
def voter_sets(draw: st.DrawFn) -> VoterSet:
    ids = draw(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=7, unique=True))
    voters = []
    for i in ids:
        low = draw(st.integers(0, 1))
        voters.append(Voter(i, draw(uuids), tuple(draw(endpoints)), (low, draw(st.integers(low, 3)))))
    return VoterSet(voters)


@given(voter_sets())
def test_voters_round_trip(voters: VoterSet) -> None:
    assert parse_voters(voters_record(voters)) == voters


def test_voters_need_directory_ids_and_a_voter() -> None:
    with pytest.raises(ValueError, match="directory id"):
        voters_record(VoterSet.of_ids([1, 2]))
    with pytest.raises(ValueError, match="at least one voter"):
        voters_record(VoterSet([]))


def _voters_value(body: bytes) -> Record:
    return Record(control_key(ControlRecordType.KRAFT_VOTERS), body)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b"", "malformed"),
        (b"\x00\x00\x01\x00", "no voters"),  # an empty voter array
        (b"\x00\x01\x01\x00", "version 1"),
        (voters_record(VoterSet([Voter(1, DIR1)])).value + b"\x00", "trailing"),  # type: ignore[operator]
        (
            b"\x00\x00\x02" + struct.pack(">i", 1) + bytes(16) + b"\x01" + struct.pack(">hh", 0, 1) + b"\x00\x00\x00",
            "directory id",
        ),
        (
            b"\x00\x00\x02" + struct.pack(">i", 1) + DIR1.bytes + b"\x01" + struct.pack(">hh", 2, 1) + b"\x00\x00\x00",
            "range",
        ),
    ],
)
def test_malformed_voters_records_are_refused(value: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_voters(_voters_value(value))


def test_duplicate_voter_ids_and_endpoint_names_are_refused() -> None:
    one = voters_record(VoterSet([Voter(1, DIR1)])).value or b""
    voter = one[3:-1]
    with pytest.raises(ValueError, match="twice"):
        parse_voters(_voters_value(b"\x00\x00\x03" + voter + voter + b"\x00"))
    e = _compact_string("C") + _compact_string("h") + b"\x00\x01\x00"
    doubled = (
        b"\x00\x00\x02"
        + struct.pack(">i", 1)
        + DIR1.bytes
        + b"\x03"
        + e
        + e
        + struct.pack(">hh", 0, 1)
        + b"\x00\x00\x00"
    )
    with pytest.raises(ValueError, match="endpoint name twice"):
        parse_voters(_voters_value(doubled))


def test_wrong_control_type_and_unknown_kraft_version() -> None:
    with pytest.raises(ValueError, match="not a KRAFT_VOTERS"):
        parse_voters(kraft_version_record(0))
    with pytest.raises(ValueError, match=r"unsupported kraft\.version 7"):
        parse_kraft_version(Record(control_key(ControlRecordType.KRAFT_VERSION), b"\x00\x00\x00\x07\x00"))
    with pytest.raises(ValueError, match="unsupported"):
        kraft_version_record(2)


def test_dump_text_names_fields_as_kafka() -> None:
    text = describe_membership_record(voters_record(VoterSet([Voter(3, DIR1, (Endpoint("CONTROLLER", "n3", 9093),))])))
    assert text is not None and text.startswith("KRaftVoters ")
    assert '"voterId": 3' in text and '"voterDirectoryId": "Dz5vQLSqSZyeL3rJBRQegA"' in text
    assert '"name": "CONTROLLER", "host": "n3", "port": 9093' in text
    assert describe_membership_record(kraft_version_record(1)) == 'KRaftVersion {"version": 0, "kRaftVersion": 1}'
