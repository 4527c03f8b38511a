"""KIP-853's control records, byte for byte as Kafka writes them.

- KRaftVersionRecord (control type 5): `Version int16 = 0, KRaftVersion int16`, flexible v0. The
  `kraft.version` feature: 0 is the static quorum (`controller.quorum.voters`), 1 the dynamic one.
- VotersRecord (control type 6): `Version int16 = 0`, then per voter `VoterId int32,
  VoterDirectoryId uuid, Endpoints [Name, Host, Port uint16], KRaftVersionFeature {Min, Max int16}`.

Both values are serialised by `kio` from Kafka's own message schemas, without a version prefix
(the key says what the record is). Decoding validates what Kafka validates: a known version, no
trailing bytes, a directory id on every voter, unique voter ids and endpoint names, a sane range.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0 import data as vr
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i16, u16

from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.raft.control import ControlRecordType, control_key, control_type
from kraftlab.node.raft.ports import Record
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet

KRAFT_VERSION_0 = 0
"""kraft.version 0: the voter set is `controller.quorum.voters`, fixed for the cluster's life."""
KRAFT_VERSION_1 = 1
"""kraft.version 1: the voter set lives in the log (VotersRecord) and changes with AddRaftVoter/RemoveRaftVoter."""
SUPPORTED_KRAFT_VERSIONS = (KRAFT_VERSION_0, KRAFT_VERSION_1)
"""The range of kraft.version this node supports (the KRaftVersionFeature it advertises)."""

T = TypeVar("T")
_write_kraft_version = entity_writer(KRaftVersionRecord)
_read_kraft_version = entity_reader(KRaftVersionRecord)
_write_voters = entity_writer(vr.VotersRecord)
_read_voters = entity_reader(vr.VotersRecord)


def _decode(reader: Callable[[bytes, int], tuple[T, int]], value: bytes | None, what: str) -> T:
    data = value or b""
    try:
        decoded, size = reader(data, 0)
    except (SerialError, struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"malformed {what}: {e}") from None
    if size != len(data):
        raise ValueError(f"malformed {what}: {len(data) - size} trailing bytes")
    return decoded


def _expect(record: Record, kind: ControlRecordType) -> None:
    found = control_type(record.key)
    if found != kind:
        raise ValueError(f"not a {kind.name} control record (control type {found})")


def kraft_version_record(kraft_version: int) -> Record:
    """The KRaftVersionRecord control record saying the quorum runs `kraft_version`."""
    if kraft_version not in SUPPORTED_KRAFT_VERSIONS:
        raise ValueError(f"unsupported kraft.version {kraft_version} (supported {SUPPORTED_KRAFT_VERSIONS})")
    buf = io.BytesIO()
    _write_kraft_version(buf, KRaftVersionRecord(version=i16(0), k_raft_version=i16(kraft_version)))
    return Record(control_key(ControlRecordType.KRAFT_VERSION), buf.getvalue())


def parse_kraft_version(record: Record) -> int:
    """The kraft.version a KRAFT_VERSION control record carries; ValueError if malformed or unknown."""
    _expect(record, ControlRecordType.KRAFT_VERSION)
    decoded = _decode(_read_kraft_version, record.value, "KRaftVersionRecord")
    if decoded.version != 0:
        raise ValueError(f"unsupported KRaftVersionRecord version {decoded.version}")
    if decoded.k_raft_version not in SUPPORTED_KRAFT_VERSIONS:
        raise ValueError(f"unsupported kraft.version {decoded.k_raft_version}")
    return int(decoded.k_raft_version)


def _to_kio(voter: Voter) -> vr.Voter:
    if voter.directory_id is None:
        raise ValueError(f"voter {voter.node_id} has no directory id: a VotersRecord needs one for every voter")
    low, high = voter.kraft_versions
    return vr.Voter(
        voter_id=BrokerId(voter.node_id),
        voter_directory_id=voter.directory_id,
        endpoints=tuple(vr.Endpoint(name=e.name, host=e.host, port=u16(e.port)) for e in voter.endpoints),
        k_raft_version_feature=vr.KRaftVersionFeature(min_supported_version=i16(low), max_supported_version=i16(high)),
    )


def _from_kio(voter: vr.Voter) -> Voter:
    if voter.voter_directory_id is None or voter.voter_directory_id == uuid.UUID(int=0):
        raise ValueError(f"voter {voter.voter_id} has no directory id")
    names = [e.name for e in voter.endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"voter {voter.voter_id} lists an endpoint name twice: {names}")
    feature = voter.k_raft_version_feature
    low, high = int(feature.min_supported_version), int(feature.max_supported_version)
    if not 0 <= low <= high:
        raise ValueError(f"voter {voter.voter_id} supports an empty kraft.version range [{low}, {high}]")
    return Voter(
        int(voter.voter_id),
        voter.voter_directory_id,
        tuple(Endpoint(e.name, e.host, int(e.port)) for e in voter.endpoints),
        (low, high),
    )


def voters_record(voters: VoterSet) -> Record:
    """The VotersRecord control record carrying `voters` (each with a directory id), ascending by id."""
    if len(voters) == 0:
        raise ValueError("a VotersRecord needs at least one voter")
    members = tuple(_to_kio(v) for i in voters.ids if (v := voters.voter(i)) is not None)
    buf = io.BytesIO()
    _write_voters(buf, vr.VotersRecord(version=i16(0), voters=members))
    return Record(control_key(ControlRecordType.KRAFT_VOTERS), buf.getvalue())


def parse_voters(record: Record) -> VoterSet:
    """The voter set a KRAFT_VOTERS control record carries; ValueError if malformed."""
    _expect(record, ControlRecordType.KRAFT_VOTERS)
    decoded = _decode(_read_voters, record.value, "VotersRecord")
    if decoded.version != 0:
        raise ValueError(f"unsupported VotersRecord version {decoded.version}")
    if not decoded.voters:
        raise ValueError("a VotersRecord with no voters")
    return VoterSet(_from_kio(v) for v in decoded.voters)


def voter_json(voter: Voter) -> dict[str, Any]:
    """A voter as Kafka's JSON converters name its fields (dump-log, describe-quorum)."""
    return {
        "voterId": voter.node_id,
        "voterDirectoryId": uuid_to_kafka(voter.directory_id) if voter.directory_id is not None else None,
        "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in voter.endpoints],
        "kRaftVersionFeature": {
            "minSupportedVersion": voter.kraft_versions[0],
            "maxSupportedVersion": voter.kraft_versions[1],
        },
    }


def describe_membership_record(record: Record) -> str | None:
    """Kafka's DumpLogSegments text of a KRaftVersion or KRaftVoters record; None for other control types."""
    kind = control_type(record.key)
    if kind == ControlRecordType.KRAFT_VERSION:
        return "KRaftVersion " + json.dumps({"version": 0, "kRaftVersion": parse_kraft_version(record)})
    if kind == ControlRecordType.KRAFT_VOTERS:
        voters = parse_voters(record)
        body = [voter_json(v) for i in voters.ids if (v := voters.voter(i)) is not None]
        return "KRaftVoters " + json.dumps({"version": 0, "voters": body})
    return None
