"""The store, the fault-window analysis and the self-contained report of a run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kraftlab.checker.history import Op, fault_windows, load_jsonl_tolerant, pair_ops
from kraftlab.nemesis.packages import WINDOWS
from kraftlab.report import render
from kraftlab.store import list_runs, new_run, write_json
from kraftlab.workloads.history import HistoryWriter


def make_run(tmp_path: Path):
    run = new_run("demo", {"seed": 7, "workload": "topics"}, store=tmp_path)
    h = HistoryWriter(run.history, start_ns=0)
    t = iter(range(0, 10**12, 10**8))  # 0.1 s steps
    h.now = lambda: next(t)  # type: ignore[method-assign]
    h.record("nemesis", "info", "start-partition", {"grudge": {"n1": ["n2"]}})
    for i in range(20):
        h.record(i % 3, "invoke", "create", f"t{i}", node="n1")
        h.record(i % 3, "ok" if i % 5 else "fail", "create", f"t{i}", node="n1",
                 error=None if i % 5 else "TOPIC_ALREADY_EXISTS")
    h.record("nemesis", "info", "kill", ["n2"])
    h.record(3, "invoke", "delete", "t1", node="n2")
    h.record(3, "info", "delete", "t1", node="n2", error="timeout")
    h.record("nemesis", "info", "stop-partition", None)
    h.record("nemesis", "info", "restart", ["n2"])
    h.record(4, "invoke", "list", None, node="n3")  # never completed: the runner died
    h.close()
    write_json(run.results, {"valid": False, "checkers": {
        "linearizable": {"valid": False, "explanation": "create t3 cannot be linearized",
                         "anomalies": [{"op": 7}]},
        "raft": {"valid": True}}})
    with run.metrics.open("w") as f:
        for k in range(10):
            for node in ("n1", "n2"):
                metrics = {"kraft_raft_high_watermark": k * 3, "kraft_raft_current_epoch": 1}
                f.write(json.dumps({"time": k * 10**8, "node": node, "metrics": metrics}) + "\n")
    (run.node_dir("n1") / "journal.jsonl").write_text('{"ev":"start"}\n')
    (run.node_dir("n1") / "node.log").write_text("hello\n")
    return run


def test_pairs_and_windows(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    history, notes = load_jsonl_tolerant(run.history)
    pairs = pair_ops(history)
    assert len(pairs) == 22 and not notes
    assert sum(p.status == "info" for p in pairs) == 2  # the timeout and the op never completed
    assert next(p for p in pairs if p.end is None).f == "list"
    kinds = {(w.kind, round(w.start / 1e9, 1), round(w.end / 1e9, 1)) for w in fault_windows(history.events, WINDOWS)}
    assert kinds == {("partition", 0.0, 4.4), ("kill", 4.1, 4.5)}


def test_report_is_self_contained_and_complete(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    page = render(run).read_text()
    assert "INVALID" in page and "create t3 cannot be linearized" in page
    assert page.count("data:image/png;base64,") >= 4 + 2  # 4 op plots + 2 metric plots
    assert re.search(r"<td>partition</td><td>0\.00</td><td>4\.40</td>", page)
    assert 'href="nodes/n1/journal.jsonl"' in page and 'href="nodes/n1/node.log"' in page
    assert "<td>create</td><td>16</td><td>4</td><td>0</td>" in page
    assert (tmp_path / "latest").resolve() == run.path.resolve()
    assert list_runs(tmp_path)[0].path == run.path
    assert run.journals() == {"n1": run.path / "nodes" / "n1" / "journal.jsonl"}


def test_report_of_an_empty_run(tmp_path: Path) -> None:
    run = new_run("empty", {}, store=tmp_path)
    page = render(run).read_text()
    assert "unknown" in page


def test_failed_faults_open_no_window_and_shared_closers_close_all() -> None:
    ops = [
        {"process": "nemesis", "type": "fail", "f": "start-packet", "time": 0, "value": {"netem": True}},
        {"process": "nemesis", "type": "invoke", "f": "clock-bump", "time": 5, "value": {}},
        {"process": "nemesis", "type": "ok", "f": "clock-bump", "time": 10, "value": {}},
        {"process": "nemesis", "type": "ok", "f": "clock-rate", "time": 20, "value": {}},
        {"process": "nemesis", "type": "ok", "f": "clock-reset", "time": 30, "value": {}},
        {"process": "nemesis", "type": "info", "f": "graceful-stop", "time": 40, "value": {}},
    ]
    got = [(w.kind, w.start, w.end) for w in fault_windows(ops, WINDOWS)]
    # a window starts at the opener's invocation when there is one
    assert got == [("clock-bump", 5, 30), ("clock-rate", 20, 30), ("graceful-stop", 40, 40)]


def test_timeline_lanes_reuse_rows_of_retired_processes() -> None:
    from kraftlab.plots import lanes

    def op(p: int, a: int, b: int | None) -> Op:
        return Op(0, p, "create", None, None, "ok", 0, None, call_time=a, ret_time=b, node="n1")

    # process 0 retires at t=10 and thread 0 goes on as process 2; process 1 overlaps both
    got = lanes([op(0, 0, 5), op(1, 1, 30), op(0, 6, 10), op(2, 11, 20), op(3, 31, None)])
    assert got == {0: 0, 1: 1, 2: 0, 3: 0}
