"""StopsOnWriteError: after its disk failed a write, a node's process journals nothing more (beyond a
grace) but its own stop notice; the filesystem's record of the errors, not the node's, is the evidence."""

from __future__ import annotations

import json
from typing import Any

from kraftlab.checker.diskerrors import GRACE_MS, check_disk_errors, lives
from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.journal import journals_from

MS = 1_000_000
NODE_IDS = {"n1": 1, "n2": 2}


def _j(node: int, ev: str, at_ms: int, **fields: Any) -> dict[str, Any]:
    return {"node": node, "ev": ev, "ts": at_ms, "mono": at_ms * MS, "rmono": at_ms * MS, **fields}


def _start(node: int, at_ms: int) -> list[dict[str, Any]]:
    return [_j(node, "recovery", at_ms, hw_checkpoint=0, log_start=0, log_end=0),
            _j(node, "start", at_ms + 1, boot_id="b", roles=["controller"], voters=[1, 2])]


def _history(injected: dict[str, list[dict[str, Any]]], f: str = "stop-disk-errors") -> History:
    lines = [{"process": "nemesis", "type": "invoke", "f": f, "time": 1, "value": {}},
             {"process": "nemesis", "type": "ok", "f": f, "time": 2,
              "value": {"nodes": sorted(injected), "injected": injected, "restarted": []}}]
    return History([parse_jsonl_line(json.dumps(x), "<memory>", i + 1, i) for i, x in enumerate(lines)])


def _err(at_ms: int, op: str = "write", errno: str = "EIO") -> dict[str, Any]:
    return {"op": op, "path": "__cluster_metadata-0/00000000000000000000.log", "errno": errno, "rmono": at_ms * MS}


def test_a_node_that_stops_on_the_error_holds() -> None:
    journals = journals_from([*_start(1, 0), _j(1, "append", 100, base=0), _j(1, "hw", 150, hw=1),
                              _j(1, "log_dir_failed", 201 + GRACE_MS, errno="EIO"),  # its own notice: fine
                              *_start(1, 5000), _j(1, "append", 5100, base=1), *_start(2, 0)])
    res = check_disk_errors(journals, _history({"n1": [_err(200)]}), NODE_IDS)
    assert res["valid"] is True and res["checked"] == ["StopsOnWriteError"]
    assert res["stats"] == {"write_errors": 1, "read_errors": 0, "nodes": 1}
    assert "StopsOnReadError" in res["not_checked"]


def test_a_node_that_goes_on_after_a_failed_write_is_caught_once_per_life() -> None:
    journals = journals_from([*_start(1, 0), _j(1, "append", 100, base=0),
                              _j(1, "append", 300, base=1), _j(1, "hw", 250 + GRACE_MS, hw=2),
                              _j(1, "append", 400 + GRACE_MS, base=2), *_start(2, 0)])
    res = check_disk_errors(journals, _history({"n1": [_err(200, "fsync", "ENOSPC"), _err(210)]}), NODE_IDS)
    assert res["valid"] is False and len(res["anomalies"]) == 1
    anomaly = res["anomalies"][0]
    assert anomaly["type"] == "StopsOnWriteError"
    assert "fsync" in anomaly["explanation"] and "ENOSPC" in anomaly["explanation"] and "`hw`" in anomaly["explanation"]
    assert [e["ev"] for e in anomaly["entries"]] == ["append", "hw"]


def test_a_node_that_goes_on_after_a_failed_read_is_caught_and_runs_without_errors_are_not_judged() -> None:
    journals = journals_from([*_start(1, 0), _j(1, "append", 5000, base=0), *_start(2, 0)])
    res = check_disk_errors(journals, _history({"n1": [_err(200, "read")]}), NODE_IDS)
    assert res["valid"] is False and res["checked"] == ["StopsOnReadError"]
    assert res["anomalies"][0]["type"] == "StopsOnReadError" and "cannot read" in res["anomalies"][0]["explanation"]
    assert "StopsOnWriteError" in res["not_checked"] and res["stats"]["read_errors"] == 1
    stopped = journals_from([*_start(1, 0), _j(1, "log_dir_failed", 201, errno="EIO"), *_start(2, 0)])
    assert check_disk_errors(stopped, _history({"n1": [_err(200, "read")]}), NODE_IDS)["valid"] is True
    assert check_disk_errors(journals, _history({}), NODE_IDS)["checked"] == []


def test_without_a_shared_clock_nothing_is_claimed() -> None:
    entries = [*_start(1, 0), _j(1, "append", 5000, base=0)]
    entries[1]["boot_id"] = "other"
    journals = journals_from([*entries, *_start(2, 0)])
    res = check_disk_errors(journals, _history({"n1": [_err(200)]}), NODE_IDS)
    assert res["valid"] is True and "rmono" in res["not_checked"]["StopsOnWriteError"]


def test_lives_begin_at_recovery_or_an_unannounced_start() -> None:
    journals = journals_from([*_start(1, 0), _j(1, "append", 5), _j(1, "start", 10, boot_id="b"),
                              _j(1, "append", 11), *_start(1, 20)])
    assert [[e.ev for e in life] for life in lives(journals.by_node[1])] == [
        ["recovery", "start", "append"], ["start", "append"], ["recovery", "start"]]


def _launch(node: int, at_ms: int) -> list[dict[str, Any]]:
    return [_j(node, "launch", at_ms, pid=at_ms), *_start(node, at_ms + 50)]


def test_lives_begin_at_launch_so_an_error_while_opening_the_log_is_that_life_s() -> None:
    journals = journals_from([*_launch(1, 0), _j(1, "append", 5), *_launch(1, 20), _j(1, "append", 80)])
    assert [[e.ev for e in life] for life in lives(journals.by_node[1])] == [
        ["launch", "recovery", "start", "append"], ["launch", "recovery", "start", "append"]]
    # the first life stopped (its last line at 100 ms); the second launched at 3000 ms, met an EIO at 3010 ms
    # while recovering its log, and went on to serve: its own violation, not the first life's
    journals = journals_from([*_launch(1, 0), _j(1, "append", 100, base=0), *_launch(1, 3000),
                              _j(1, "append", 3100 + GRACE_MS, base=1), *_start(2, 0)])
    res = check_disk_errors(journals, _history({"n1": [_err(3010)]}), NODE_IDS)
    assert res["valid"] is False and [e["ev"] for e in res["anomalies"][0]["entries"]] == ["launch", "append"]
    # the same journal without `launch` lines attributes the error to the first life, which had stopped
    old = journals_from([*_start(1, 0), _j(1, "append", 100, base=0), *_start(1, 3050),
                         _j(1, "append", 3100 + GRACE_MS, base=1), *_start(2, 0)])
    assert check_disk_errors(old, _history({"n1": [_err(3010)]}), NODE_IDS)["valid"] is True
