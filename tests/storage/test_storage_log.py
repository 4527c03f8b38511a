"""DiskLog on disk: segments, reopen, torn tails, bit flips, the hw-checkpoint guard, crash loss."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_helpers import batches, make_batch

from kraftlab.node.raft.ports import LogCorruption, OffsetAndEpoch
from kraftlab.node.storage.batches import encode_batch, encode_batches
from kraftlab.node.storage.checkpoint import HighWatermarkCheckpoint
from kraftlab.node.storage.errors import CommittedDataDamaged, CorruptStateFile
from kraftlab.node.storage.layout import partition_dir, segment_name
from kraftlab.node.storage.log import DiskLog


def seg_files(log_dir: Path) -> list[str]:
    return sorted(p.name for p in partition_dir(log_dir).glob("*.log"))


def filled(log_dir: Path, epochs: list[int], segment_bytes: int = 1 << 30, flush: bool = True) -> DiskLog:
    log = DiskLog.open(log_dir, segment_bytes=segment_bytes)
    log.append(batches(0, epochs))
    if flush:
        log.flush()
    return log


def test_round_trip_and_reopen(log_dir: Path) -> None:
    written = batches(0, [1, 1, 2, 3, 3])
    with DiskLog.open(log_dir) as log:
        log.append(written)
        log.flush()
        assert log.read(0, 1 << 20) == written
    with DiskLog.open(log_dir) as log:
        assert log.recovery.damage is None
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (0, 10, 3)
        assert log.read(0, 1 << 20) == written
        assert log.read(4, 1) == [written[2]]  # at least one batch, even over budget
        assert log.read_bytes(4, 1 << 20) == encode_batches(written[2:])
        assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)
        assert log.flushed_end_offset() == 10


def test_segments_roll_at_the_configured_size(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    limit = 2 * size + 10  # two batches fit (batches from offset 10 on are 2 bytes longer), three do not
    with DiskLog.open(log_dir, segment_bytes=limit) as log:
        log.append(batches(0, [1] * 5))
        log.flush()
    assert seg_files(log_dir) == [segment_name(0), segment_name(4), segment_name(8)]
    assert (partition_dir(log_dir) / segment_name(4)).stat().st_size == 2 * size
    with DiskLog.open(log_dir, segment_bytes=limit) as log:
        assert log.read(0, 1 << 20) == batches(0, [1] * 5)
        log.append([make_batch(10, 1)])
        assert [p.name for p in log.segment_paths()] == [segment_name(0), segment_name(4), segment_name(8)]


def test_truncate_across_segments_then_reopen(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    with DiskLog.open(log_dir, segment_bytes=2 * size) as log:
        log.append(batches(0, [1, 1, 2, 2, 3, 3]))
        log.flush()
        log.truncate_to(4)
        assert (log.end_offset(), log.last_epoch(), log.flushed_end_offset()) == (4, 1, 4)
        assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 1)
        assert seg_files(log_dir) == [segment_name(0), segment_name(4)]
        assert (partition_dir(log_dir) / segment_name(4)).stat().st_size == 0
        log.append([make_batch(4, 5)])
    with DiskLog.open(log_dir, segment_bytes=2 * size) as log:
        assert log.read(0, 1 << 20) == [*batches(0, [1, 1]), make_batch(4, 5)]


def test_torn_tail_every_byte_position_recovers_to_the_previous_batch(log_dir: Path) -> None:
    log = filled(log_dir, [1, 1, 2])
    log.close()
    seg = partition_dir(log_dir) / segment_name(0)
    full = seg.read_bytes()
    boundary = len(encode_batches(batches(0, [1, 1])))
    for cut in range(boundary, len(full)):
        seg.write_bytes(full[:cut])
        with DiskLog.open(log_dir) as log:
            assert log.end_offset() == 4
            assert log.last_epoch() == 1
            assert seg.stat().st_size == boundary
            damage = log.recovery.damage
            if cut == boundary:
                assert damage is None
                continue
            assert damage is not None and (damage.position, damage.offset) == (boundary, 4)
            assert damage.dropped_bytes == cut - boundary
            events = log.recovery.journal_events()
            assert [e["ev"] for e in events] == ["recovery", "corruption", "truncate"]
            assert events[0]["hw_checkpoint"] == log.recovery.hw_checkpoint
            assert events[2] == {"ev": "truncate", "to": 4, "from": 4, "reason": "corrupt-tail"}
            log.append([make_batch(4, 2)])  # the log goes on from the boundary
            log.flush()
        seg.write_bytes(full)


def test_bit_flip_above_hw_truncates_and_below_hw_refuses(log_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled(log_dir, [1, 1, 1, 1])
    log.checkpoint_hw(4)
    log.close()
    seg = partition_dir(log_dir) / segment_name(0)
    original = seg.read_bytes()
    size = len(encode_batch(make_batch(0, 1)))
    damaged = bytearray(original)
    damaged[3 * size + 40] ^= 0x10  # batch at offset 6, above hw 4
    seg.write_bytes(bytes(damaged))
    with DiskLog.open(log_dir) as log:
        assert log.end_offset() == 6
        assert log.recovery.damage is not None and "CRC" in log.recovery.damage.reason
    assert "truncating to offset 6" in caplog.text
    damaged = bytearray(original)
    damaged[size + 40] ^= 0x10  # batch at offset 2, below hw 4
    seg.write_bytes(bytes(damaged))
    with pytest.raises(CommittedDataDamaged, match=r"ends at offset 2 .*CRC.*high-water mark 4") as err:
        DiskLog.open(log_dir)
    assert (err.value.path, err.value.offset, err.value.hw) == (str(seg), 2, 4)
    assert seg.read_bytes() == bytes(damaged)  # nothing touched


def test_hw_checkpoint_never_exceeds_the_flushed_end(log_dir: Path) -> None:
    with DiskLog.open(log_dir) as log:
        log.append(batches(0, [1, 1]))
        log.flush()
        log.append([make_batch(4, 1)])
        log.checkpoint_hw(6)
        assert log.hw_checkpoint.read() == 4


def test_missing_middle_segment_is_a_gap(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    log = filled(log_dir, [1] * 6, segment_bytes=2 * size)
    log.close()
    (partition_dir(log_dir) / segment_name(4)).unlink()
    with DiskLog.open(log_dir, segment_bytes=2 * size) as log:
        assert log.end_offset() == 4
        assert "previous one ends at 4" in log.recovery.damage.reason  # type: ignore[union-attr]
        assert log.recovery.damage.old_end_offset == 12  # type: ignore[union-attr]
    assert seg_files(log_dir) == [segment_name(0)]


def test_gap_below_hw_refuses(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    log = filled(log_dir, [1] * 6, segment_bytes=2 * size)
    log.checkpoint_hw(10)
    log.close()
    (partition_dir(log_dir) / segment_name(4)).unlink()
    before = seg_files(log_dir)
    with pytest.raises(LogCorruption, match="high-water mark 10"):
        DiskLog.open(log_dir, segment_bytes=2 * size)
    assert seg_files(log_dir) == before and len(before) >= 2


def test_damage_covered_by_a_snapshot_restarts_at_the_snapshot(log_dir: Path) -> None:
    log = filled(log_dir, [1, 1, 2, 2])
    log.checkpoint_hw(6)
    log.close()
    seg = partition_dir(log_dir) / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[60] ^= 1
    seg.write_bytes(bytes(data))
    with DiskLog.open(log_dir, snapshot_id=OffsetAndEpoch(6, 2)) as log:
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (6, 6, 2)
        assert log.recovery.reset_to_snapshot == OffsetAndEpoch(6, 2)
        assert [e["reason"] for e in log.recovery.journal_events() if e["ev"] == "truncate"] == [
            "corrupt-tail",
            "snapshot",
        ]
    assert seg_files(log_dir) == [segment_name(6)]


def test_delete_before_keeps_segments_reaching_the_offset_and_reopens_with_the_snapshot(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    log = filled(log_dir, [1, 1, 2, 2, 3], segment_bytes=2 * size)
    log.delete_before(7)  # segments [0,4) goes; [4,8) holds offset 7
    assert log.start_offset() == 4 and seg_files(log_dir) == [segment_name(4), segment_name(8)]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)  # the epoch before the start
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    log.close()
    with pytest.raises(LogCorruption, match="starts at offset 4"):
        DiskLog.open(log_dir, segment_bytes=2 * size)
    with DiskLog.open(log_dir, segment_bytes=2 * size, snapshot_id=OffsetAndEpoch(6, 2)) as log:
        assert log.read(4, 1 << 20) == batches(4, [2, 2, 3])


def test_delete_before_everything_leaves_an_empty_log_at_the_end(log_dir: Path) -> None:
    size = len(encode_batch(make_batch(0, 1)))
    with filled(log_dir, [1, 2], segment_bytes=size) as log:
        log.delete_before(4)
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (4, 4, 2)
        assert seg_files(log_dir) == [segment_name(4)]
    with DiskLog.open(log_dir, snapshot_id=OffsetAndEpoch(4, 2)) as log:
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (4, 4, 2)
        assert log.recovery.reset_to_snapshot is None


def test_reset_to_snapshot_survives_reopen(log_dir: Path) -> None:
    with filled(log_dir, [1, 1, 1], segment_bytes=100) as log:
        log.reset_to_snapshot(OffsetAndEpoch(50, 7))
        assert seg_files(log_dir) == [segment_name(50)]
        log.append([make_batch(50, 7)])
        log.flush()
    with DiskLog.open(log_dir, snapshot_id=OffsetAndEpoch(50, 7)) as log:
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (50, 52, 7)
        assert log.end_offset_for_epoch(6) == OffsetAndEpoch(50, 7)


def test_a_snapshot_beyond_the_log_resets_it_on_open(log_dir: Path) -> None:
    filled(log_dir, [1, 1]).close()
    with DiskLog.open(log_dir, snapshot_id=OffsetAndEpoch(10, 3)) as log:
        assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (10, 10, 3)
        assert log.recovery.reset_to_snapshot == OffsetAndEpoch(10, 3)


def test_corrupt_hw_checkpoint_is_an_error_not_zero(log_dir: Path) -> None:
    filled(log_dir, [1]).close()
    (partition_dir(log_dir) / "hw-checkpoint").write_text("0\n1\n__cluster_metadata 0 1")
    with pytest.raises(LogCorruption, match="expected 3 lines") as err:
        DiskLog.open(log_dir)
    assert isinstance(err.value.__cause__, CorruptStateFile)
    for bad in ["", "1\n1\n__cluster_metadata 0 1\n", "0\n1\nother 0 1\n", "0\n1\n__cluster_metadata 0 -1\n"]:
        (partition_dir(log_dir) / "hw-checkpoint").write_text(bad)
        with pytest.raises(CorruptStateFile):
            HighWatermarkCheckpoint(partition_dir(log_dir) / "hw-checkpoint").read()


def test_hw_checkpoint_round_trip_in_kafka_format(tmp_path: Path) -> None:
    cp = HighWatermarkCheckpoint(tmp_path / "hw-checkpoint")
    assert cp.read() == 0
    cp.write(1234)
    assert (tmp_path / "hw-checkpoint").read_text() == "0\n1\n__cluster_metadata 0 1234\n"
    assert cp.read() == 1234
    with pytest.raises(ValueError):
        cp.write(-1)


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from storage_helpers import batches
    from kraftlab.node.storage.log import DiskLog
    log = DiskLog.open({log_dir!r}, segment_bytes=200)
    log.append(batches(0, [1, 1, 1]))
    log.flush()
    log.append(batches(6, [2, 2, 2, 2]))  # rolls segments, never flushed
    print(log.end_offset(), log.flushed_end_offset(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_sigkill_loses_nothing_the_kernel_holds(log_dir: Path) -> None:
    """A process crash is not a power loss: the written tail survives in the page cache (a power
    loss is tested on the disk-fault filesystem: tests/diskfs)."""
    expected_end = 14
    code = CHILD.format(log_dir=str(log_dir))
    # `-c` imports from the working directory: storage_helpers sits beside this test
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.split() == ["14", "6"]
    with DiskLog.open(log_dir, segment_bytes=200) as log:
        assert log.end_offset() == expected_end
        assert log.read(0, 1 << 20) == batches(0, [1, 1, 1, 2, 2, 2, 2])[: expected_end // 2]
        assert log.recovery.damage is None
    assert os.listdir(partition_dir(log_dir))
