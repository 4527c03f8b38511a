"""Snapshots carry the KRaftVersion and KRaftVoters records in their header batch, as Kafka writes
them; the bootstrap checkpoint 0-0 is such a snapshot with no data records."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraftlab.node.raft.control import leader_change_record
from kraftlab.node.raft.membership.records import kraft_version_record, voters_record
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.voters import Voter, VoterSet
from kraftlab.node.storage.batches import decode_batches, encode_batch
from kraftlab.node.storage.bootstrap import read_bootstrap_checkpoint, write_bootstrap_checkpoint
from kraftlab.node.storage.control import snapshot_footer, snapshot_header
from kraftlab.node.storage.errors import CorruptSnapshot
from kraftlab.node.storage.snapshots import DiskSnapshotStore, decode_snapshot, decode_snapshot_control, encode_snapshot

VOTERS = VoterSet(Voter(i, uuid.UUID(int=1000 + i)) for i in (1, 2, 3))
MEMBERSHIP = [kraft_version_record(1), voters_record(VOTERS)]


def test_header_batch_holds_the_membership_records(tmp_path: Path) -> None:
    store = DiskSnapshotStore(tmp_path)
    sid = OffsetAndEpoch(10, 3)
    store.write(sid, [Record(None, b"a"), Record(None, b"b")], 5, MEMBERSHIP)
    batches = decode_batches(store.path(sid).read_bytes())
    assert batches[0].control and batches[0].records[1:] == tuple(MEMBERSHIP)
    assert batches[1].base_offset == 3  # the data records follow the three control records
    assert store.read_records(sid) == [Record(None, b"a"), Record(None, b"b")]
    assert store.read_control_records(sid) == MEMBERSHIP
    static = OffsetAndEpoch(11, 3)
    store.write(static, [Record(None, b"a")], 5)
    assert store.read_control_records(static) == []


def _snapshot(*header_batch: Record) -> bytes:
    data = encode_batch(Batch(0, 1, header_batch, True))
    return data + encode_batch(Batch(len(header_batch), 1, (snapshot_footer(),), True))


@pytest.mark.parametrize(
    "records",
    [
        (snapshot_header(0), leader_change_record(1, [1], [1])),  # not a membership record
        (snapshot_header(0), voters_record(VOTERS), kraft_version_record(1)),  # not Kafka's order
        (snapshot_header(0), kraft_version_record(1), kraft_version_record(1)),  # twice
        (snapshot_header(0), Record(kraft_version_record(1).key, b"\x00")),  # malformed
        (kraft_version_record(1), snapshot_header(0)),  # the header is not first
    ],
)
def test_bad_header_batches_are_refused(records: tuple[Record, ...]) -> None:
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(_snapshot(*records))
    with pytest.raises(CorruptSnapshot):
        decode_snapshot_control(_snapshot(*records))


def test_encode_decode_round_trip() -> None:
    data = encode_snapshot(OffsetAndEpoch(4, 1), [Record(None, b"x")], 0, control_records=MEMBERSHIP)
    assert decode_snapshot(data) == [Record(None, b"x")] and decode_snapshot_control(data) == MEMBERSHIP


def test_bootstrap_checkpoint_round_trip_and_damage(tmp_path: Path) -> None:
    assert read_bootstrap_checkpoint(tmp_path) is None
    path = write_bootstrap_checkpoint(tmp_path, VOTERS, 1234)
    boot = read_bootstrap_checkpoint(tmp_path)
    assert boot is not None and boot.voters == VOTERS and boot.kraft_version == 1
    assert decode_snapshot(path.read_bytes()) == []
    with pytest.raises(FileExistsError):
        write_bootstrap_checkpoint(tmp_path, VOTERS, 1234)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshot):
        read_bootstrap_checkpoint(tmp_path)
    path.write_bytes(encode_snapshot(OffsetAndEpoch(0, 0), [], 0, control_records=[kraft_version_record(1)]))
    with pytest.raises(CorruptSnapshot, match="without a VotersRecord"):
        read_bootstrap_checkpoint(tmp_path)
