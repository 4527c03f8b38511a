"""Kafka's reading of the metadata log's control records and of a snapshot's layout, from Kafka's
own numbers and schemas (kio), independently of the node's writers (`node.raft.control`,
`node.raft.membership.records`, `node.storage.control`, `node.storage.snapshots`).

Control record types, as apache/kafka's `clients/.../common/record/ControlRecordType.java` numbers
them (ABORT 0, COMMIT 1, LEADER_CHANGE 2, SNAPSHOT_HEADER 3, SNAPSHOT_FOOTER 4 since KIP-630 —
e.g. commit c730af47; KRAFT_VERSION 5 and KRAFT_VOTERS 6 since KIP-853). A control record's key is
the version-prefixed ControlRecordTypeSchema (`int16 version = 0`, then `int16 type`); its value is
the type's message in version 0 (`ControlRecordUtils.*_CURRENT_VERSION = 0`), read here by kio's
generated class and starting with that message's own `Version` field (0).

`judge_batch`: every record of a control batch (attributes bit 0x20) reads as one of KRaft's control
records (types 2 to 6: the metadata log has no transactions, so no ABORT or COMMIT marker), with
nothing left over (a LeaderChange names its leader among the granting voters, a majority of the
voters: KIP-595); every record of a data batch has no key and a value (KRaft's RecordsIterator
refuses anything else — so a control record in a data batch is caught too). `judge_snapshot`
(KIP-630): a snapshot is record batches from offset 0, contiguous; its first batch a control batch
starting with the SnapshotHeaderRecord, followed only by the KRaftVersionRecord and then the
VotersRecord (Kafka's RecordsSnapshotWriter with kraft.version 1); its last batch a control batch
holding exactly the SnapshotFooterRecord; data batches between, of KRaft's data records. A breach
is a `ControlViolation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.control_record_type_schema.v0.data import ControlRecordTypeSchema
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.voters_record.v0.data import VotersRecord
from kio.serial import entity_reader
from kio.serial.readers import read_int16

from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.sim.raft_reading import read_batches

KAFKA_CONTROL_TYPES: dict[int, str] = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
"""Kafka's ControlRecordType numbers (see the module docstring for the citation)."""
VALUE_SCHEMAS: dict[str, type] = {
    "LEADER_CHANGE": LeaderChangeMessage,
    "SNAPSHOT_HEADER": SnapshotHeaderRecord,
    "SNAPSHOT_FOOTER": SnapshotFooterRecord,
    "KRAFT_VERSION": KRaftVersionRecord,
    "KRAFT_VOTERS": VotersRecord,
}
"""The value's message of each control record KRaft writes, at version 0."""
_READ_TYPE = entity_reader(ControlRecordTypeSchema)


class ControlViolation(AssertionError):
    pass


def read_control(record: Record) -> tuple[str, Any]:
    """(Kafka's name of the record's control type, its value as kio reads it)."""
    key = record.key or b""
    if len(key) != 4:
        raise ControlViolation(f"control record key {key!r}: Kafka's is 4 bytes (int16 version, int16 type)")
    version, _ = read_int16(key, 0)
    schema, size = _READ_TYPE(key, 2)
    if version != 0 or size != 2:
        raise ControlViolation(f"control record key {key!r}: version {version}, Kafka writes version 0")
    name = KAFKA_CONTROL_TYPES.get(int(schema.type_))
    if name not in VALUE_SCHEMAS:
        raise ControlViolation(f"control record type {schema.type_} ({name}) is not one KRaft writes")
    value = record.value or b""
    message: Any
    try:
        message, used = entity_reader(VALUE_SCHEMAS[name])(value, 0)
    except Exception as exc:  # kio's native reader raises several unrelated types
        raise ControlViolation(f"{name} value {value!r} does not read as Kafka's schema: {exc}") from exc
    if used != len(value):
        raise ControlViolation(f"{name} value: {len(value) - used} bytes after Kafka's message")
    if message.version != 0:
        raise ControlViolation(f"{name} value says version {message.version}, Kafka writes 0")
    return name, message


def judge_batch(batch: Batch) -> list[tuple[str, Any]]:
    """The control records of `batch` as Kafka reads them (none for a data batch, whose records
    KRaft's `RecordsIterator.decodeDataRecord` takes only without a key and with a value)."""
    if not batch.control:
        for r in batch.records:
            if r.key is not None or not r.value:
                raise ControlViolation(f"data batch at {batch.base_offset}: record key {r.key!r}, value {r.value!r} "
                                       "(KRaft reads a data record only with no key and a non-empty value)")
        return []
    if not batch.records:
        raise ControlViolation(f"control batch at {batch.base_offset} holds no record")
    read = [read_control(r) for r in batch.records]
    for name, message in read:
        if name == "LEADER_CHANGE":
            _judge_leader_change(message, batch)
    return read


def _judge_leader_change(message: Any, batch: Batch) -> None:
    """KIP-595: the leader of an epoch writes who it is, the voters, and the voters that elected it —
    itself among them, a majority of the voters, none twice."""
    voters = [int(v.voter_id) for v in message.voters]
    granting = [int(v.voter_id) for v in message.granting_voters]
    leader = int(message.leader_id)
    if (len(set(voters)) != len(voters) or len(set(granting)) != len(granting) or not set(granting) <= set(voters)
            or leader not in granting or 2 * len(granting) <= len(voters)):
        raise ControlViolation(f"LeaderChange at {batch.base_offset} (epoch {batch.epoch}): leader {leader}, voters "
                               f"{voters}, granting {granting} — the leader must be among the granting voters, a "
                               "majority of the voters")


_HEADER_FOLLOWERS = ("KRAFT_VERSION", "KRAFT_VOTERS")


def judge_snapshot(data: bytes) -> list[Batch]:
    """The snapshot's batches as kio reads them, its KIP-630 layout judged."""
    batches = list(read_batches(data))
    if len(batches) < 2:
        raise ControlViolation(f"a snapshot of {len(batches)} batch(es): a header batch and a footer batch at least")
    expected = 0
    for b in batches:
        if b.base_offset != expected:
            raise ControlViolation(f"snapshot batch at offset {b.base_offset} where {expected} follows")
        expected = b.base_offset + len(b.records)
    header = [name for name, _ in judge_batch(batches[0])]
    if not header or header[0] != "SNAPSHOT_HEADER":
        raise ControlViolation(f"a snapshot's first batch must start with SNAPSHOT_HEADER: {header}")
    followers = header[1:]
    if followers != [k for k in _HEADER_FOLLOWERS if k in followers]:
        raise ControlViolation(f"after the snapshot header Kafka writes KRAFT_VERSION then KRAFT_VOTERS: {header}")
    if followers == ["KRAFT_VOTERS"]:
        raise ControlViolation("a snapshot's KRAFT_VOTERS without the KRAFT_VERSION before it")
    footer = [name for name, _ in judge_batch(batches[-1])]
    if footer != ["SNAPSHOT_FOOTER"]:
        raise ControlViolation(f"a snapshot's last batch must be the SNAPSHOT_FOOTER alone: {footer}")
    for b in batches[1:-1]:
        if b.control:
            raise ControlViolation(f"a control batch at snapshot offset {b.base_offset}, between header and footer")
        judge_batch(b)
    return batches


def judge_batches(batches: Sequence[Batch]) -> None:
    for b in batches:
        judge_batch(b)
