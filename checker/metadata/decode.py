"""Metadata record values decoded by Kafka's own schemas, independently of the node's code.

A record value is Kafka's frame (AbstractApiMessageSerde): frame version 1, the record type (its
api key) and the record version as unsigned varints, then the body in the flexible encoding:
big-endian integers, 16-byte UUIDs, compact strings and arrays (length + 1 as an unsigned varint,
0 for null), and a tagged-field section after each struct. The field lists below are written from
Kafka's metadata schemas (metadata/src/main/resources/common/metadata/*.json) for the versions
this checker knows; the node's own encoder is never consulted, so a node that writes a record
Kafka's tools would misread is caught here. kraftlab's own tagged field (RegisterBrokerRecord tag
10000: incarnations replaced, in snapshots) is read as documented in docs/contracts.md; other
unknown tags are skipped, as Kafka skips them.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KAFKA_FRAME_VERSION = 1
LEGACY_FRAME_VERSION = 0
"""kraft-node before it matched Kafka; read with a note so old stores still check."""


class DecodeError(ValueError):
    """A value Kafka's schemas cannot decode (says why)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    type: str
    """Kafka's record name, e.g. `PartitionChangeRecord`."""
    version: int
    fields: dict[str, Any]
    frame_version: int


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise DecodeError(f"truncated: wanted {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise DecodeError("unsigned varint longer than 5 bytes")

    def fixed(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def compact_string(self, nullable: bool = False) -> str | None:
        n = self.uvarint()
        if n == 0:
            if not nullable:
                raise DecodeError("null in a non-nullable string")
            return None
        return self.take(n - 1).decode("utf-8")

    def compact_array(self, element: Callable[[_Reader], Any], nullable: bool = False) -> list[Any] | None:
        n = self.uvarint()
        if n == 0:
            if not nullable:
                raise DecodeError("null in a non-nullable array")
            return None
        return [element(self) for _ in range(n - 1)]

    def tagged(self, known: dict[int, Callable[[_Reader], Any]]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            body = self.take(size)
            if tag in known:
                sub = _Reader(body)
                out[tag] = known[tag](sub)
                if sub.pos != len(body):
                    raise DecodeError(f"tagged field {tag}: {len(body) - sub.pos} bytes left over")
        return out


def _i8(r: _Reader) -> int:
    return int(r.fixed(">b"))


def _i16(r: _Reader) -> int:
    return int(r.fixed(">h"))


def _u16(r: _Reader) -> int:
    return int(r.fixed(">H"))


def _i32(r: _Reader) -> int:
    return int(r.fixed(">i"))


def _i64(r: _Reader) -> int:
    return int(r.fixed(">q"))


def _bool(r: _Reader) -> bool:
    b = r.take(1)[0]
    if b not in (0, 1):
        raise DecodeError(f"boolean byte {b}")
    return b == 1


def _uuid(r: _Reader) -> str:
    return str(uuid.UUID(bytes=r.take(16)))


def _ints(nullable: bool = False) -> Callable[[_Reader], list[int] | None]:
    return lambda r: r.compact_array(_i32, nullable)


def _uuids(r: _Reader) -> list[str] | None:
    return r.compact_array(_uuid)


def _endpoint(r: _Reader) -> dict[str, Any]:
    out = {"name": r.compact_string(), "host": r.compact_string(), "port": _u16(r), "security_protocol": _i16(r)}
    r.tagged({})
    return out


def _feature(r: _Reader) -> dict[str, Any]:
    out = {"name": r.compact_string(), "min": _i16(r), "max": _i16(r)}
    r.tagged({})
    return out


REPLACED_INCARNATIONS_TAG = 10_000
DIRECTORIES_TAG = 10_001
"""kraft-node's PartitionRecord Directories (version 0, tagged; Kafka's are untagged from version 1)."""


def _register_broker(r: _Reader, v: int) -> dict[str, Any]:
    out: dict[str, Any] = {"broker_id": _i32(r)}
    if v >= 2:
        out["is_migrating_zk_broker"] = _bool(r)
    out |= {"incarnation_id": _uuid(r), "broker_epoch": _i64(r), "endpoints": r.compact_array(_endpoint),
            "features": r.compact_array(_feature), "rack": r.compact_string(nullable=True), "fenced": _bool(r)}
    out["in_controlled_shutdown"] = _bool(r) if v >= 1 else False
    tags = r.tagged({0: _uuids, REPLACED_INCARNATIONS_TAG: _uuids})
    out["log_dirs"] = tags.get(0)
    out["replaced_incarnations"] = tags.get(REPLACED_INCARNATIONS_TAG) or []
    return out


def _topic(r: _Reader, v: int) -> dict[str, Any]:
    out = {"name": r.compact_string(), "topic_id": _uuid(r)}
    r.tagged({})
    return out


def _partition(r: _Reader, v: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_id": _i32(r), "topic_id": _uuid(r), "replicas": _ints()(r), "isr": _ints()(r),
                           "removing": _ints(True)(r) or [], "adding": _ints(True)(r) or [], "leader": _i32(r),
                           "leader_epoch": _i32(r), "partition_epoch": _i32(r)}
    if v >= 1:
        out["directories"] = r.compact_array(_uuid)
    tags = r.tagged({0: _i8, 1: _ints(True), 2: _ints(True), DIRECTORIES_TAG: _uuids})
    out["directories"] = tags.get(DIRECTORIES_TAG) or out.get("directories") or []
    out["leader_recovery_state"] = tags.get(0, 0)
    out["elr"] = tags.get(1) or []
    out["last_known_elr"] = tags.get(2) or []
    return out


def _config(r: _Reader, v: int) -> dict[str, Any]:
    out = {"resource_type": _i8(r), "resource_name": r.compact_string(), "name": r.compact_string(),
           "value": r.compact_string(nullable=True)}
    r.tagged({})
    return out


NO_LEADER_CHANGE = -2


def _partition_change(r: _Reader, v: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_id": _i32(r), "topic_id": _uuid(r)}
    tags = r.tagged({0: _ints(True), 1: _i32, 2: _ints(True), 3: _ints(True), 4: _ints(True), 5: _i8,
                     6: _ints(True), 7: _ints(True), 8: _uuids})
    out |= {"isr": tags.get(0), "leader": tags.get(1, NO_LEADER_CHANGE), "replicas": tags.get(2),
            "removing": tags.get(3), "adding": tags.get(4), "leader_recovery_state": tags.get(5),
            "elr": tags.get(6), "last_known_elr": tags.get(7), "directories": tags.get(8)}
    return out


def _broker_and_epoch(r: _Reader, v: int) -> dict[str, Any]:
    out = {"broker_id": _i32(r), "broker_epoch": _i64(r)}
    r.tagged({})
    return out


def _remove_topic(r: _Reader, v: int) -> dict[str, Any]:
    out = {"topic_id": _uuid(r)}
    r.tagged({})
    return out


def _feature_level(r: _Reader, v: int) -> dict[str, Any]:
    out = {"name": r.compact_string(), "feature_level": _i16(r)}
    r.tagged({})
    return out


def _registration_change(r: _Reader, v: int) -> dict[str, Any]:
    out: dict[str, Any] = {"broker_id": _i32(r), "broker_epoch": _i64(r)}
    tags = r.tagged({0: _i8, 1: _i8, 2: _uuids})
    out |= {"fenced": tags.get(0, 0), "in_controlled_shutdown": tags.get(1, 0), "log_dirs": tags.get(2)}
    return out


def _bytes(r: _Reader) -> str:
    """A compact bytes field, as base64 (the image form's spelling of bytes)."""
    n = r.uvarint()
    if n == 0:
        raise DecodeError("null in non-nullable bytes")
    return base64.b64encode(r.take(n - 1)).decode()


def _user_scram_credential(r: _Reader, v: int) -> dict[str, Any]:
    out = {"name": r.compact_string(), "mechanism": _i8(r), "salt": _bytes(r), "stored_key": _bytes(r),
           "server_key": _bytes(r), "iterations": _i32(r)}
    r.tagged({})
    return out


def _remove_user_scram_credential(r: _Reader, v: int) -> dict[str, Any]:
    out = {"name": r.compact_string(), "mechanism": _i8(r)}
    r.tagged({})
    return out


def _access_control_entry(r: _Reader, v: int) -> dict[str, Any]:
    out = {"id": _uuid(r), "resource_type": _i8(r), "resource_name": r.compact_string(), "pattern_type": _i8(r),
           "principal": r.compact_string(), "host": r.compact_string(), "operation": _i8(r),
           "permission_type": _i8(r)}
    r.tagged({})
    return out


def _remove_access_control_entry(r: _Reader, v: int) -> dict[str, Any]:
    out = {"id": _uuid(r)}
    r.tagged({})
    return out


def _quota_entity(r: _Reader) -> list[Any]:
    out = [r.compact_string(), r.compact_string(nullable=True)]
    r.tagged({})
    return out


def _client_quota(r: _Reader, v: int) -> dict[str, Any]:
    out = {"entity": r.compact_array(_quota_entity), "key": r.compact_string(), "value": r.fixed(">d"),
           "remove": _bool(r)}
    r.tagged({})
    return out


def _producer_ids(r: _Reader, v: int) -> dict[str, Any]:
    out = {"broker_id": _i32(r), "broker_epoch": _i64(r), "next_producer_id": _i64(r)}
    r.tagged({})
    return out


def _delegation_token(r: _Reader, v: int) -> dict[str, Any]:
    out = {"owner": r.compact_string(), "requester": r.compact_string(),
           "renewers": r.compact_array(lambda x: x.compact_string()), "issue_timestamp": _i64(r),
           "max_timestamp": _i64(r), "expiration_timestamp": _i64(r), "token_id": r.compact_string()}
    r.tagged({})
    return out


def _remove_delegation_token(r: _Reader, v: int) -> dict[str, Any]:
    out = {"token_id": r.compact_string()}
    r.tagged({})
    return out


def _no_op(r: _Reader, v: int) -> dict[str, Any]:
    r.tagged({})
    return {}


SCHEMAS: dict[int, tuple[str, int, Callable[[_Reader, int], dict[str, Any]]]] = {
    0: ("RegisterBrokerRecord", 3, _register_broker),
    1: ("UnregisterBrokerRecord", 0, _broker_and_epoch),
    2: ("TopicRecord", 0, _topic),
    3: ("PartitionRecord", 1, _partition),
    4: ("ConfigRecord", 0, _config),
    5: ("PartitionChangeRecord", 0, _partition_change),
    7: ("FenceBrokerRecord", 0, _broker_and_epoch),
    8: ("UnfenceBrokerRecord", 0, _broker_and_epoch),
    9: ("RemoveTopicRecord", 0, _remove_topic),
    10: ("DelegationTokenRecord", 0, _delegation_token),
    11: ("UserScramCredentialRecord", 0, _user_scram_credential),
    12: ("FeatureLevelRecord", 0, _feature_level),
    14: ("ClientQuotaRecord", 0, _client_quota),
    15: ("ProducerIdsRecord", 0, _producer_ids),
    17: ("BrokerRegistrationChangeRecord", 2, _registration_change),
    18: ("AccessControlEntryRecord", 0, _access_control_entry),
    19: ("RemoveAccessControlEntryRecord", 0, _remove_access_control_entry),
    20: ("NoOpRecord", 0, _no_op),
    22: ("RemoveUserScramCredentialRecord", 0, _remove_user_scram_credential),
    26: ("RemoveDelegationTokenRecord", 0, _remove_delegation_token),
}
"""Kafka's api key → (record name, highest version this checker knows, body reader)."""


def decode(value: bytes) -> Decoded:
    """Decode one metadata record value with Kafka's schemas; DecodeError says why it cannot."""
    r = _Reader(value)
    frame = r.uvarint()
    if frame not in (KAFKA_FRAME_VERSION, LEGACY_FRAME_VERSION):
        raise DecodeError(f"frame version {frame} (Kafka writes and reads {KAFKA_FRAME_VERSION})")
    api_key, version = r.uvarint(), r.uvarint()
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise DecodeError(f"unknown metadata record type {api_key}")
    name, highest, body = schema
    if version > highest:
        raise DecodeError(f"{name} version {version} (known up to {highest})")
    fields = body(r, version)
    if r.pos != len(value):
        raise DecodeError(f"{name}: {len(value) - r.pos} bytes after the record")
    return Decoded(name, version, fields, frame)
