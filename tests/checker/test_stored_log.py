"""StoredLogMatching: log matching judged on the metadata logs as the nodes stored them — real
segments written by the node's DiskLog, dumped as `kraft-node dump-log --batches-only` prints them
(Kafka's DumpLogSegments text), parsed and compared; one pair must fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kraftlab.checker.raft.stored import STORED_LOG_FILE, check_stored_logs, parse_dump
from kraftlab.checker.run import check_run
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.log import DiskLog


def _stored(tmp: Path, node: str, epochs: list[int], other: int = -1) -> Path:
    """A node's metadata log, one batch of one record per epoch given (offset i in epochs[i]; at
    offset `other` a record no other node has), on disk and dumped beside a journal as the run
    collects it."""
    metadata = tmp / node / "metadata"
    log = DiskLog.open(metadata, segment_bytes=200)  # small: several segments
    log.append([Batch(i, ep, (Record(None, b"v%d-%d%s" % (i, ep, node.encode() if i == other else b"")),),
                      append_time_ms=1000 + i) for i, ep in enumerate(epochs)])
    log.flush()
    dump = subprocess.run([sys.executable, "-m", "kraftlab.node.cli", "dump-log", "--batches-only", str(metadata)],
                          capture_output=True, text=True, check=True)
    out = tmp / "nodes" / node / STORED_LOG_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump.stdout)
    return out


def test_stored_logs_that_agree_below_their_divergent_tails_pass(tmp_path: Path) -> None:
    a = _stored(tmp_path, "n1", [1, 1, 2, 2, 4])
    b = _stored(tmp_path, "n2", [1, 1, 2, 3, 3])  # a tail in epoch 3 the other log skips: not yet cut
    batches = parse_dump(a.read_text())
    assert [(x.base, x.epoch) for x in batches] == [(0, 1), (1, 1), (2, 2), (3, 2), (4, 4)]
    res = check_stored_logs([a, b])
    assert res["valid"] is True and res["rules"]["StoredLogMatching"]["valid"] is True


def test_a_stored_log_keeping_an_epoch_below_a_shared_entry_fails(tmp_path: Path) -> None:
    a = _stored(tmp_path, "n1", [1, 1, 2, 2])
    b = _stored(tmp_path, "n2", [1, 2, 2, 2])  # offset 1 in epoch 2, below entries both hold in epoch 2
    res = check_stored_logs([a, b])
    assert res["valid"] is False
    [anomaly] = res["anomalies"]
    assert "both hold offset 3 in epoch 2" in anomaly["explanation"]
    assert "offset 1 one holds epoch 1 and the other epoch 2" in anomaly["explanation"]


def test_two_stored_batches_at_one_offset_in_one_epoch_fail(tmp_path: Path) -> None:
    a = _stored(tmp_path, "n1", [1, 1, 2], other=1)
    b = _stored(tmp_path, "n2", [1, 1, 2], other=1)
    res = check_stored_logs([a, b])
    assert res["valid"] is False
    [anomaly] = res["anomalies"]
    assert "at offset 1 in epoch 1" in anomaly["explanation"] and "two batches at one offset" in anomaly["explanation"]


def test_a_run_with_dumps_beside_its_journals_judges_them(tmp_path: Path) -> None:
    a = _stored(tmp_path, "n1", [1, 1, 2])
    b = _stored(tmp_path, "n2", [1, 2, 2])
    for p in (a, b):
        (p.parent / "journal.jsonl").write_text("")
    res = check_run(journal_paths=[a.parent / "journal.jsonl", b.parent / "journal.jsonl"])
    assert res["checkers"]["stored_log"]["valid"] is False


def test_the_runner_s_check_of_a_run_directory_judges_the_stored_logs(tmp_path: Path) -> None:
    """`kraftlab test` and `kraftlab analyze` check a run directory through kraftlab.checking: the
    dumps the run collected beside the journals are judged there too."""
    from kraftlab.checking import check_run as check_run_dir
    from kraftlab.store import RunDir

    a = _stored(tmp_path, "n1", [1, 1, 2])
    b = _stored(tmp_path, "n2", [1, 2, 2])
    for p in (a, b):
        (p.parent / "journal.jsonl").write_text("")
    (tmp_path / "history.jsonl").write_text("")
    res = check_run_dir(RunDir(tmp_path), timeout=None, memory_bytes=None)
    assert res["checkers"]["stored_log"]["valid"] is False
