"""Control records: Kafka's ControlRecordType key (the one definition, also used by node.storage) and
the LeaderChangeMessage the Raft core writes itself (and its decoding).

A control record's key is `version (int16) = 0, type (int16)` as Kafka's ControlRecordType writes
it. The LeaderChangeMessage value is the flexible-version LeaderChangeMessage v0 (version int16,
LeaderId int32, Voters and GrantingVoters as compact arrays of {VoterId int32}, empty tagged fields),
serialised by kio from Kafka's schema.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from enum import IntEnum

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.leader_change_message.v0.data import Voter as LeaderChangeVoter
from kio.schema.types import BrokerId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kraftlab.node.raft.ports import Record

_KEY = struct.Struct(">hh")
CONTROL_KEY_VERSION = 0
LEADER_CHANGE_VERSION = 0
"""Kafka's `ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION`: the value is LeaderChangeMessage v0."""
_write_leader_change = entity_writer(LeaderChangeMessage)
_read_leader_change = entity_reader(LeaderChangeMessage)


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


LEADER_CHANGE = ControlRecordType.LEADER_CHANGE


def control_key(kind: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(kind))


def control_type(key: bytes | None) -> int:
    """The control record type a key encodes (an int: unknown types are returned, not rejected);
    ValueError when the key is not a control record key. As Kafka's `ControlRecordType.parseTypeId`:
    a key of a later version is read as version 0 (a key version may only add fields), a negative
    version is corruption."""
    if key is None or len(key) < _KEY.size:
        raise ValueError(f"control record key too short: {key!r}")
    version, kind = _KEY.unpack_from(key)
    if version < CONTROL_KEY_VERSION:
        raise ValueError(f"invalid control record key version {version}")
    return int(kind)


def leader_change_record(leader_id: int, voters: Sequence[int], granting: Sequence[int]) -> Record:
    buf = io.BytesIO()
    _write_leader_change(buf, LeaderChangeMessage(
        version=i16(LEADER_CHANGE_VERSION),
        leader_id=BrokerId(leader_id),
        voters=tuple(LeaderChangeVoter(voter_id=i32(v)) for v in voters),
        granting_voters=tuple(LeaderChangeVoter(voter_id=i32(v)) for v in granting),
    ))
    return Record(control_key(LEADER_CHANGE), buf.getvalue())


def decode_leader_change(record: Record) -> tuple[int, list[int], list[int]]:
    """(leader id, voters, granting voters) of a LeaderChangeMessage record; ValueError if malformed."""
    if control_type(record.key) != LEADER_CHANGE or record.value is None:
        raise ValueError("not a LeaderChangeMessage record")
    try:
        message, size = _read_leader_change(record.value, 0)
    except Exception as exc:  # kio's native reader raises several unrelated types
        raise ValueError(f"malformed LeaderChangeMessage: {exc}") from None
    if size != len(record.value):
        raise ValueError(f"malformed LeaderChangeMessage: {len(record.value) - size} trailing bytes")
    return int(message.leader_id), [int(v.voter_id) for v in message.voters], [
        int(v.voter_id) for v in message.granting_voters
    ]
