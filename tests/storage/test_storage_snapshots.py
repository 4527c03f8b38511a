"""DiskSnapshotStore: write/read, chunked fetch into a partial file, freeze validation, cleanup."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch

from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.storage.batches import decode_batches, encode_batches
from kraftlab.node.storage.control import ControlRecordType, control_type, parse_snapshot_header
from kraftlab.node.storage.errors import CorruptSnapshot
from kraftlab.node.storage.snapshots import DiskSnapshotStore, decode_snapshot, encode_snapshot

SID = OffsetAndEpoch(120, 4)
RECORDS = [Record(f"k{i}".encode(), bytes([i % 256]) * (i % 50)) for i in range(300)] + [Record(None, None)]


def store_at(tmp_path: Path, name: str = "leader", max_batch_bytes: int = 1 << 20) -> DiskSnapshotStore:
    return DiskSnapshotStore(tmp_path / name / "__cluster_metadata-0", max_batch_bytes)


def test_file_layout_header_and_footer(tmp_path: Path) -> None:
    store = store_at(tmp_path, max_batch_bytes=500)
    store.write(SID, RECORDS, append_time_ms=1_700_000_000_123)
    path = store.directory / "00000000000000000120-0000000004.checkpoint"
    assert path.exists() and store.ids() == [SID] and store.latest() == SID
    batches = decode_batches(path.read_bytes())
    assert len(batches) > 3  # records split by the byte budget
    first, last = batches[0], batches[-1]
    assert first.control and last.control and first.base_offset == 0
    assert control_type(first.records[0].key) == ControlRecordType.SNAPSHOT_HEADER
    assert parse_snapshot_header(first.records[0]).last_contained_log_timestamp == 1_700_000_000_123
    assert control_type(last.records[0].key) == ControlRecordType.SNAPSHOT_FOOTER
    assert last.next_offset == len(RECORDS) + 2
    assert {b.epoch for b in batches} == {4}
    assert read_batch(path.read_bytes(), 0)[0].attributes == 0x20  # kio agrees: a control batch
    assert store.read_records(SID) == RECORDS
    assert store.size(SID) == path.stat().st_size


@settings(max_examples=25)
@given(st.lists(st.builds(Record, st.none() | st.binary(max_size=64), st.none() | st.binary(max_size=64)), max_size=60))
def test_encode_decode_round_trip(records: list[Record]) -> None:
    assert decode_snapshot(encode_snapshot(SID, records, 5, max_batch_bytes=200)) == records


def test_chunked_fetch_between_stores_then_freeze(tmp_path: Path) -> None:
    leader, follower = store_at(tmp_path, "leader", 700), store_at(tmp_path, "follower")
    leader.write(SID, RECORDS, 1)
    size, position = leader.size(SID), 0
    while position < size:
        chunk = leader.read_bytes(SID, position, 333)
        follower.write_bytes(SID, position, chunk)
        position += len(chunk)
        if position == 999:  # a resent chunk: the part file is cut back and rewritten
            follower.write_bytes(SID, 666, leader.read_bytes(SID, 666, 333))
    assert follower.partial_size(SID) == size
    assert follower.ids() == []  # not visible until frozen
    follower.freeze(SID)
    assert follower.ids() == [SID] and follower.read_records(SID) == RECORDS
    assert (follower.directory / "00000000000000000120-0000000004.checkpoint").read_bytes() == leader.read_bytes(
        SID, 0, size
    )


def test_a_gap_in_chunks_is_refused(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.write_bytes(SID, 0, b"x" * 10)
    with pytest.raises(ValueError, match="gap"):
        store.write_bytes(SID, 11, b"y")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: d[:-1], "truncated"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "CRC"),
        (lambda d: d + b"\x00", "truncated batch header"),
        (lambda d: b"", "0 batch"),
    ],
)
def test_freeze_validates_and_drops_a_bad_part(tmp_path: Path, damage: Callable[[bytes], bytes], reason: str) -> None:
    leader, follower = store_at(tmp_path, "leader"), store_at(tmp_path, "follower")
    leader.write(SID, RECORDS[:10], 1)
    follower.write_bytes(SID, 0, damage(leader.read_bytes(SID, 0, 1 << 20)))
    with pytest.raises(CorruptSnapshot, match=reason):
        follower.freeze(SID)
    assert follower.ids() == [] and follower.partial_size(SID) == 0


def test_freeze_requires_header_first_and_footer_last() -> None:
    data = encode_snapshot(SID, RECORDS[:3], 1)
    batches = decode_batches(data)
    with pytest.raises(CorruptSnapshot, match="footer"):
        decode_snapshot(encode_batches(batches[:-1]))
    with pytest.raises(CorruptSnapshot, match="offset"):
        decode_snapshot(encode_batches(batches[1:]))


def test_partial_files_are_removed_on_open_and_by_delete_before(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    old, new = OffsetAndEpoch(10, 1), OffsetAndEpoch(20, 2)
    store.write(old, RECORDS[:3], 1)
    store.write(new, RECORDS[:5], 2)
    store.write_bytes(OffsetAndEpoch(30, 2), 0, b"partial")
    reopened = DiskSnapshotStore(store.directory)
    assert sorted(os.listdir(store.directory)) == [
        "00000000000000000010-0000000001.checkpoint",
        "00000000000000000020-0000000002.checkpoint",
    ]
    reopened.write_bytes(OffsetAndEpoch(30, 2), 0, b"partial")
    reopened.delete_before(new)
    assert reopened.ids() == [new] and os.listdir(store.directory) == ["00000000000000000020-0000000002.checkpoint"]
    with pytest.raises(KeyError):
        reopened.read_records(old)


def test_write_is_idempotent_and_frozen_files_are_immutable(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.write(SID, RECORDS[:3], 1)
    store.write(SID, RECORDS[:9], 1)
    assert store.read_records(SID) == RECORDS[:3]


def test_corruption_of_a_frozen_snapshot_is_detected_on_read(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.write(SID, RECORDS, 1)
    path = store.directory / "00000000000000000120-0000000004.checkpoint"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshot, match="CRC"):
        store.read_records(SID)
