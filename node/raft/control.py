"""Control records the Raft core writes itself: the LeaderChangeMessage (and its decoding).

Encoded as Kafka does: the key is the control record key (version int16, type int16) and the
value the flexible-version LeaderChangeMessage v0 (version int16, LeaderId int32, Voters and
GrantingVoters as compact arrays of {VoterId int32}, empty tagged fields).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from node.raft.ports import Record

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4

_KEY = struct.Struct(">hh")
_I32 = struct.Struct(">i")


def control_key(kind: int) -> bytes:
    return _KEY.pack(0, kind)


def control_type(record: Record) -> int | None:
    """The control type of a control record's key, or None when the key is not one."""
    if record.key is None or len(record.key) != _KEY.size:
        return None
    return _KEY.unpack(record.key)[1]


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
    if control_type(record) != LEADER_CHANGE or record.value is None:
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
