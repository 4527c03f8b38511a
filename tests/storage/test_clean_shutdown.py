"""The clean-shutdown marker: written at a clean stop, taken (read, then deleted durably) at the next
start; anything short of every directory agreeing on one epoch is no proof (-1)."""

from __future__ import annotations

from pathlib import Path

from kraftlab.node.storage.partition.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    take_previous_broker_epoch,
    write_markers,
)


def test_a_marker_is_taken_once(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    write_markers(dirs, 42)
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).read_text() == '{"version": 0, "broker_epoch": 42}'
    assert take_previous_broker_epoch(dirs) == 42
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert take_previous_broker_epoch(dirs) == -1  # a crash of the life that took it is unclean


def test_no_proof_without_agreement(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "missing"
    for d in (a, b):
        d.mkdir()
    write_markers([a], 7)
    assert take_previous_broker_epoch([a, b]) == -1  # b was lost and formatted anew: no marker
    assert not (a / CLEAN_SHUTDOWN_FILE).exists()
    write_markers([a], 7)
    write_markers([b], 8)
    assert take_previous_broker_epoch([a, b]) == -1
    assert take_previous_broker_epoch([c]) == -1  # a directory not created yet
    assert take_previous_broker_epoch([]) == -1


def test_a_damaged_marker_is_no_proof(tmp_path: Path) -> None:
    for text in ('{"version": 0, "broker_epoch": 4', '{"version": 1, "broker_epoch": 4}',
                 '{"version": 0, "broker_epoch": true}', '{"version": 0, "broker_epoch": -5}', "[]"):
        (tmp_path / CLEAN_SHUTDOWN_FILE).write_text(text)
        assert take_previous_broker_epoch([tmp_path]) == -1, text
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
