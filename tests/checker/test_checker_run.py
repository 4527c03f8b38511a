"""check_run over a mixed project history: split by workload, each part against its model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kraftlab.checker.run import check_run


def _write(path: Path, rows: list[tuple[Any, str, str, Any, str | None]]) -> Path:
    with open(path, "w") as fh:
        for i, (p, typ, f, v, w) in enumerate(rows):
            line: dict[str, Any] = {"index": i, "time": i * 1000, "process": p, "type": typ, "f": f, "value": v,
                                    "node": "n1", "error": None}
            if w:
                line["workload"] = w
            fh.write(json.dumps(line) + "\n")
    return path


def _mixed(final_topics: list[str]) -> list[tuple[Any, str, str, Any, str | None]]:
    t, r, i = "topics", "registry", "isr"
    part = {"topic": "t0", "partition": 0}
    return [
        ("nemesis", "info", "start-partition", {"grudge": {"n1": ["n2"]}}, None),
        (0, "invoke", "create", {"topic": "t1"}, t), (0, "ok", "create", {"topic": "t1"}, t),
        (1, "invoke", "register", {"broker": 4, "incarnation": "a"}, r),
        (1, "ok", "register", {"broker": 4, "epoch": 12}, r),
        (2, "invoke", "alter", {**part, "leader": 4, "leader_epoch": 1, "partition_epoch": 3, "isr": [4]}, i),
        (2, "ok", "alter", {"leader_epoch": 1, "partition_epoch": 4, "isr": [4]}, i),
        (1, "invoke", "heartbeat", {"broker": 4, "epoch": 12}, r), (1, "ok", "heartbeat", None, r),
        ("nemesis", "info", "stop-partition", None, None),
        (0, "invoke", "list", None, t), (0, "ok", "list", {"topics": final_topics}, t),
        (2, "invoke", "read", part, i),
        (2, "ok", "read", {"leader": 4, "leader_epoch": 1, "partition_epoch": 4, "isr": [4]}, i),
    ]


def test_mixed_history_valid(tmp_path: Path) -> None:
    res = check_run(_write(tmp_path / "h.jsonl", _mixed(["t1"])), out_dir=tmp_path / "out")
    assert set(res["checkers"]) == {"linearizable-topics", "linearizable-registry", "linearizable-isr"}
    assert res["valid"] is True, res
    assert json.loads((tmp_path / "out" / "results.json").read_text())["valid"] is True


def test_lost_topic_is_found_in_its_workload(tmp_path: Path) -> None:
    res = check_run(_write(tmp_path / "h.jsonl", _mixed([])))
    assert res["valid"] is False
    assert res["checkers"]["linearizable-topics"]["valid"] is False
    assert res["checkers"]["linearizable-registry"]["valid"] is True
    # the list was checked per topic: its projection onto t1 is the read that cannot be linearized
    expl = res["checkers"]["linearizable-topics"]["explanation"]
    assert "key 't1'" in expl and "p0 describe t1 (one topic of a list) ⇒ absent" in expl, expl
    assert "in state [topics: t1] (after 1 op)" in expl and "the read saw t1 absent, but it was present" in expl


def test_malformed_op_is_unknown_not_valid(tmp_path: Path) -> None:
    rows = _mixed(["t1"])
    rows[3] = (1, "invoke", "register", {"incarnation": "a"}, "registry")  # no broker
    res = check_run(_write(tmp_path / "h.jsonl", rows))
    reg = res["checkers"]["linearizable-registry"]
    assert reg["valid"] == "unknown" and "needs 'broker'" in reg["explanation"] and "line 4" in reg["explanation"]
    assert res["valid"] == "unknown"


def _stale_alter() -> list[tuple[Any, str, str, Any, str | None]]:
    """Two AlterPartitions at partition epoch 5: the second is accepted though the first moved it to 6."""
    i = "isr"
    part = {"topic": "t0", "partition": 0, "leader": 4, "broker_epoch": 29}
    return [
        (2, "invoke", "alter", {**part, "leader_epoch": 1, "partition_epoch": 5, "isr": [4, 5]}, i),
        (2, "ok", "alter", {"leader_epoch": 1, "partition_epoch": 6, "isr": [4, 5]}, i),
        (3, "invoke", "alter", {**part, "leader_epoch": 1, "partition_epoch": 5, "isr": [4]}, i),
        (3, "ok", "alter", {"leader_epoch": 1, "partition_epoch": 7, "isr": [4]}, i),
    ]


def test_a_stale_alter_partition_is_explained_in_kafkas_words(tmp_path: Path) -> None:
    res = check_run(_write(tmp_path / "h.jsonl", _stale_alter()))
    expl = res["checkers"]["linearizable-isr"]["explanation"]
    # the label keeps the field that matters (the partition epoch), in Kafka's words
    assert "p3 AlterPartition t0-0 by broker 4 (broker epoch 29) at partition epoch 5, leader epoch 1: ISR → [4]" \
        in expl, expl
    # and the explanation names the rule broken, the state before and the state answered after
    assert ("accepted at partition epoch 5 while the partition was at partition epoch 6, leader 4 at leader epoch 1, "
            "ISR [4, 5] — Kafka answers INVALID_UPDATE_VERSION; it was answered partition epoch 7, leader 4 at "
            "leader epoch 1, ISR [4]") in expl, expl


def test_the_failing_key_has_a_timeline(tmp_path: Path) -> None:
    res = check_run(_write(tmp_path / "h.jsonl", _stale_alter()))
    tl = res["checkers"]["linearizable-isr"]["anomalies"][0]["timeline"]
    assert [(o["process"], o["order"], o["failing"]) for o in tl] == [(2, 0, False), (3, None, True)]
    assert tl[0]["state"] == "partition epoch 6, leader 4 at leader epoch 1, ISR [4, 5]"
    assert tl[0]["state_before"] == "not yet seen" and tl[1]["state_before"] is None
    assert (tl[0]["start"], tl[0]["end"], tl[1]["end"]) == (0, 1000, 3000)  # ns since the test started
    assert tl[0]["gave_up"] is None
