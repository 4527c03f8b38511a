"""The queue checker on Spark: a queue run's partitions judged by Spark tasks give the single
process's verdict — valid on a healthy history, invalid with the same broken rules when records are
lost or skipped — and `analyze_run` reports it as the `queue` checker beside the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.queue import check_queue
from kraftlab.spark_analysis.job import analyze_run
from kraftlab.spark_analysis.queue_partitions import check_queue_on_spark

pytestmark = pytest.mark.spark


def history(keys: int = 6, per_key: int = 40, lose: tuple[str, int] | None = None,
            skip: tuple[str, int] | None = None) -> list[dict[str, Any]]:
    """Sends to `keys` partitions, a poll of all of them at once, a final read of all; `lose` drops
    a record from every read, `skip` from the first poll only."""
    lines: list[dict[str, Any]] = []

    def op(p: int, f: str, inv: Any, done: Any) -> None:
        for t, v in (("invoke", inv), ("ok", done)):
            lines.append({"index": len(lines), "time": len(lines) * 1000, "process": p, "type": t, "f": f,
                          "value": v, "workload": "queue"})

    names = [f"q-{k}" for k in range(keys)]
    for i in range(per_key):
        for k in names:
            op(1, "send", {"key": k, "value": f"{k}/{i}"}, {"key": k, "value": f"{k}/{i}", "offset": i})

    def read(k: str, first: bool) -> list[list[Any]]:
        return [[i, f"{k}/{i}"] for i in range(per_key) if (k, i) != lose and not (first and (k, i) == skip)]

    op(2, "poll", {"positions": {k: 0 for k in names}}, {"records": {k: read(k, True) for k in names}})
    op(3, "poll", {"positions": {k: 0 for k in names}, "final": True},
       {"records": {k: read(k, False) for k in names}, "high_water_marks": {k: per_key for k in names}})
    return lines


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def single(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return check_queue(History([parse_jsonl_line(json.dumps(x), "<t>", i + 1, i) for i, x in enumerate(lines)]))


@pytest.mark.parametrize(("plant", "rules"), [
    ({}, set()), ({"lose": ("q-3", 17)}, {"LostWrite"}), ({"skip": ("q-5", 2)}, {"PollSkip"})])
def test_spark_gives_the_single_process_verdict(spark: Any, tmp_path: Path, plant: dict[str, Any],
                                                rules: set[str]) -> None:
    lines = history(**plant)
    got = check_queue_on_spark(spark, write(tmp_path / "h.jsonl", lines))
    assert got is not None
    want = single(lines)
    assert got["valid"] == want["valid"] == (not rules)
    assert {a["type"] for a in got["anomalies"]} == {a["type"] for a in want["anomalies"]} >= rules
    assert got["stats"]["sends"] == want["stats"]["sends"] and got["stats"]["polls"] == want["stats"]["polls"]
    assert len(got["stats"]["partitions"]) == 6


def test_analyze_run_reports_the_queue_checker(spark: Any, tmp_path: Path) -> None:
    from kraftlab.store import RunDir

    run = tmp_path / "run"
    run.mkdir()
    write(run / "history.jsonl", history(lose=("q-1", 5)))
    (run / "test.json").write_text(json.dumps({"workload": "queue"}))
    got = analyze_run(RunDir(run), ["queue"], master="local[2]")
    assert got["checkers"]["queue"]["valid"] is False
    assert "LostWrite" in got["checkers"]["queue"]["explanation"]
    assert json.loads((run / "results.json").read_text())["checkers"]["queue"]["valid"] is False


def test_no_queue_ops_no_queue_checker(spark: Any, tmp_path: Path) -> None:
    lines = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "create", "value": {"topic": "t"},
              "workload": "topics"}]
    assert check_queue_on_spark(spark, write(tmp_path / "h.jsonl", lines)) is None


def test_the_data_plane_rules_where_brokers_journalled_partition_events(tmp_path: Path) -> None:
    from kraftlab.spark_analysis import checks

    role = {"ts": 1, "mono": 1, "node": 1, "ev": "partition_role", "topic": "queue", "partition": 0,
            "role": "follower", "leader": 2, "leader_epoch": 0, "isr": [1, 2], "topic_id": "x"}
    append = {"ts": 2, "mono": 2, "node": 1, "ev": "partition_append", "topic": "queue", "partition": 0,
              "first": 0, "last": 0, "leader_epoch": 0, "acks": -1}
    journal = tmp_path / "journal.jsonl"
    journal.write_text(json.dumps(role) + "\n" + json.dumps(append) + "\n")
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text(json.dumps({"ts": 1, "mono": 1, "node": 2, "ev": "start"}) + "\n")
    assert checks.journalled([quiet, journal], ("partition_role",))
    assert not checks.journalled([quiet], ("partition_role", "partition_append"))
    res = checks.dataplane([journal])
    assert res["valid"] is False and res["anomalies"][0]["type"] == "LeaderAppendsInItsEpoch"
