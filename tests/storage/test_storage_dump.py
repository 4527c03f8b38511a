"""Dump helpers for `kraft-node dump-log`: batches of segment and snapshot files with positions."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import batches

from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.storage.batches import encode_batch, encode_batches
from kraftlab.node.storage.dump import dump_lines, dumpable_files, file_kind, iter_file_batches
from kraftlab.node.storage.errors import CorruptBatch
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.snapshots import DiskSnapshotStore


def test_segment_batches_with_positions(log_dir: Path) -> None:
    written = batches(0, [1, 2, 2])
    with DiskLog.open(log_dir) as log:
        log.append(written)
        log.flush()
        (path,) = log.segment_paths()
    assert file_kind(path) == "segment"
    found = list(iter_file_batches(path))
    assert [f.batch for f in found] == written
    sizes = [len(encode_batch(b)) for b in written]
    assert [f.position for f in found] == [0, sizes[0], sizes[0] + sizes[1]]


def test_snapshot_dump_names_control_records(tmp_path: Path) -> None:
    store = DiskSnapshotStore(tmp_path)
    store.write(OffsetAndEpoch(9, 2), [Record(b"k", b"v")], 1234)
    path = tmp_path / "00000000000000000009-0000000002.checkpoint"
    assert file_kind(path) == "snapshot"
    lines = list(dump_lines(path, decode=lambda r: f"decoded {r.value!r}"))
    assert "isControl: true" in lines[1] and "position: 0" in lines[1]
    assert "SNAPSHOT_HEADER version: 0 lastContainedLogTimestamp: 1234" in lines[2]
    assert "payload: decoded b'v'" in lines[4]
    assert "SNAPSHOT_FOOTER version: 0" in lines[-1]


def test_damage_ends_the_walk_with_the_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = encode_batches(batches(0, [1, 1]))
    path.write_bytes(data[:-3])
    walked = []
    with pytest.raises(CorruptBatch) as err:
        for fb in iter_file_batches(path):
            walked.append(fb.batch.base_offset)
    assert walked == [0]
    assert err.value.path == str(path) and err.value.position == len(encode_batch(batches(0, [1])[0]))
    assert list(dump_lines(path, records=False))[-1].startswith(f"CORRUPT: corrupt record batch at {path}:")
    assert file_kind(tmp_path / "notes.txt") is None


def test_dumpable_files_of_a_log_dir(log_dir: Path) -> None:
    with DiskLog.open(log_dir, segment_bytes=1) as log:
        log.append(batches(0, [1, 1]))
        log.flush()
    DiskSnapshotStore.in_log_dir(log_dir).write(OffsetAndEpoch(4, 1), [], 0)
    (log_dir / "__cluster_metadata-0" / "quorum-state").write_text("{}")
    names = [p.name for p in dumpable_files(log_dir)]
    assert names == [
        "00000000000000000000.log",
        "00000000000000000002.log",
        "00000000000000000004-0000000001.checkpoint",
    ]
    assert dumpable_files(log_dir / "__cluster_metadata-0") == dumpable_files(log_dir)
    assert dumpable_files(log_dir / "x.log") == [log_dir / "x.log"]
