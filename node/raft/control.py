"""Control records: Kafka's ControlRecordType key (the one definition, also used by node.storage) and
the LeaderChangeMessage the Raft core writes itself (and its decoding).

A control record's key is `version (int16) = 0, type (int16)` as Kafka's ControlRecordType writes
it. The LeaderChangeMessage value is the flexible-version LeaderChangeMessage v0 (version int16,
LeaderId int32, Voters and GrantingVoters as compact arrays of {VoterId int32}, empty tagged fields).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum

from kraftlab.node.raft.ports import Record

_KEY = struct.Struct(">hh")
_I32 = struct.Struct(">i")
CONTROL_KEY_VERSION = 0


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


def _voter_array(ids: Sequence[int]) -> bytes:
    # compact array length (n + 1) as an unsigned varint: n < 127 here, so one byte; then one
    # {VoterId int32, empty tagged fields} struct per voter.
    if len(ids) >= 127:
        raise ValueError("too many voters for a one-byte compact array")
    return bytes([len(ids) + 1]) + b"".join(_I32.pack(i) + b"\x00" for i in ids)


def leader_change_record(leader_id: int, voters: Sequence[int], granting: Sequence[int]) -> Record:
    value = struct.pack(">h", 0) + _I32.pack(leader_id) + _voter_array(voters) + _voter_array(granting) + b"\x00"
    return Record(control_key(LEADER_CHANGE), value)


def decode_leader_change(record: Record) -> tuple[int, list[int], list[int]]:
    """(leader id, voters, granting voters) of a LeaderChangeMessage record."""
    if control_type(record.key) != LEADER_CHANGE or record.value is None:
        raise ValueError("not a LeaderChangeMessage record")
    data = record.value
    leader_id = _I32.unpack_from(data, 2)[0]
    pos = 6
    arrays: list[list[int]] = []
    for _ in range(2):
        n = data[pos] - 1
        pos += 1
        ids = []
        for _ in range(n):
            ids.append(_I32.unpack_from(data, pos)[0])
            pos += 5
        arrays.append(ids)
    return leader_id, arrays[0], arrays[1]
