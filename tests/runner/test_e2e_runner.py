"""The main job end to end on a fresh five-namespace lab: `kraftlab test` ends in a verdict, a
report and an exit code, and leaves nothing behind; a runner killed with SIGKILL mid-run leaves a
history that `kraftlab clean` + `kraftlab analyze` still turn into a verdict; one stopped with SIGTERM
cleans up after itself and still ends in a verdict and a report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kraftlab.control.leftovers import find
from kraftlab.control.netns import lab_prefix

pytestmark = [pytest.mark.e2e, pytest.mark.netns]

KRAFTLAB = [sys.executable, "-m", "kraftlab.cli"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["KRAFTLAB_STATE_DIR"] = str(tmp_path / "labs")  # this test's labs only
    e["KRAFTLAB_STORE"] = str(tmp_path / "store")
    return e


def _lab_of(run_dir: Path) -> str:
    return json.loads((run_dir / "test.json").read_text())["lab"]


def _clean(lab: str, env: dict[str, str]) -> None:
    subprocess.run([*KRAFTLAB, "clean", "--lab", lab], env=env, capture_output=True, timeout=120)


def test_short_test_run_is_valid_with_a_report_and_leaves_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    store = tmp_path / "store"
    proc = subprocess.run([*KRAFTLAB, "test", "--workload", "topics", "--nemesis", "partition", "--time-limit", "12",
                           "--nemesis-interval", "4", "--seed", "3", "--store", str(store)],
                          env=env, capture_output=True, text=True, timeout=600)
    latest = (store / "latest").resolve()
    lab = _lab_of(latest)
    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results = json.loads((latest / "results.json").read_text())
        assert results["valid"] is True
        assert set(results["checkers"]) >= {"linearizable-topics", "raft", "fencing"}
        ops = [json.loads(x) for x in (latest / "history.jsonl").read_text().splitlines()]
        assert sum(o["type"] == "ok" for o in ops) > 20
        assert any(o["process"] == "nemesis" and o["f"] == "start-partition" for o in ops)
        assert any(o.get("value", {}) and isinstance(o["value"], dict) and o["value"].get("final") for o in ops)
        page = (latest / "report.html").read_text()
        assert "valid" in page and page.count("data:image/png;base64,") >= 4
        assert sorted(p.name for p in (latest / "nodes").iterdir()) == ["n1", "n2", "n3", "n4", "n5"]
        assert all((latest / "nodes" / n / "journal.jsonl").is_file() for n in ("n1", "n4"))
        assert (latest / "nemesis-schedule.json").is_file() and (latest / "metrics.jsonl").stat().st_size > 0
        assert not find(re.escape(lab_prefix(lab))), "the run left kernel objects behind"
    finally:
        _clean(lab, env)


def _start_run(store: Path, env: dict[str, str], *, stderr: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    return subprocess.Popen([*KRAFTLAB, "test", "--workload", "topics", "--nemesis", "partition,kill",
                             "--time-limit", "120", "--nemesis-interval", "3", "--seed", "5", "--store", str(store)],
                            env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True, start_new_session=True)


def _wait_for_faults_and_ops(store: Path, proc: subprocess.Popen[str]) -> Path:
    """The run's history once it holds two nemesis ops and some ok ones (mid-run, faults active)."""
    deadline = time.monotonic() + 240
    history = None
    while time.monotonic() < deadline:
        runs = list(store.glob("*/*/history.jsonl"))
        if runs and runs[0].stat().st_size > 0:
            history = runs[0]
            text = history.read_text()
            if text.count('"nemesis"') >= 2 and text.count('"ok"') > 20:
                return history
        assert proc.poll() is None, "the runner ended before it could be stopped"
        time.sleep(0.5)
    raise AssertionError(f"no mid-run history appeared (last seen: {history})")


def test_sigkilled_runner_then_clean_and_analyze(tmp_path: Path, env: dict[str, str]) -> None:
    store = tmp_path / "store"
    proc = _start_run(store, env)
    lab = None
    try:
        history = _wait_for_faults_and_ops(store, proc)
        lab = _lab_of(history.parent)
        os.kill(proc.pid, signal.SIGKILL)  # the runner only: its nodes and faults stay behind
        proc.wait(timeout=30)
        assert find(re.escape(lab_prefix(lab))), "expected leftovers of the killed run"
        done = subprocess.run([*KRAFTLAB, "clean", "--lab", lab], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert not find(re.escape(lab_prefix(lab))), "clean left kernel objects behind"
        assert "kept 5 node journal(s)" in done.stdout, done.stdout
        out = subprocess.run([*KRAFTLAB, "analyze", str(history.parent)], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode in (0, 1, 2), out.stderr[-3000:]
        results = json.loads((history.parent / "results.json").read_text())
        assert results["valid"] in (True, False, "unknown")
        assert results["checkers"]["linearizable-topics"]["valid"] is True
        # the journals clean kept: Raft, fencing and metadata are judged, not "unknown"
        assert {k: results["checkers"][k]["valid"] for k in ("raft", "fencing", "metadata")} == \
            {"raft": True, "fencing": True, "metadata": True}, \
            [results["checkers"][k]["explanation"][:600] for k in ("raft", "fencing", "metadata")]
        assert (history.parent / "report.html").is_file()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if lab is not None:
            _clean(lab, env)


def test_sigterm_ends_the_run_with_a_verdict_and_cleans_up(tmp_path: Path, env: dict[str, str]) -> None:
    """SIGTERM (a CI timeout, `kill`) is an interrupt: the runner heals, stops its nodes, removes its
    lab, checks the partial history, writes the report, says where, and exits 255."""
    store = tmp_path / "store"
    err_file = (tmp_path / "stderr.txt").open("w")  # not a pipe: the progress display would fill it
    proc = _start_run(store, env, stderr=err_file)
    lab = None
    try:
        history = _wait_for_faults_and_ops(store, proc)
        lab = _lab_of(history.parent)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=180)
        err = (tmp_path / "stderr.txt").read_text()
        assert proc.returncode == 255, err[-3000:]
        assert f"the partial run's verdict and report are in {history.parent}" in err, err[-3000:]
        results = json.loads((history.parent / "results.json").read_text())
        assert results["checkers"]["linearizable-topics"]["valid"] is True
        assert any("stopped by signal SIGTERM" in n for n in results.get("notes", [])), results.get("notes")
        assert (history.parent / "report.html").is_file()
        assert not find(re.escape(lab_prefix(lab))), "the interrupted run left kernel objects behind"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        err_file.close()
        if lab is not None:
            _clean(lab, env)


def test_a_cluster_that_does_not_recover_is_a_finding_exit_1_naming_the_node(tmp_path: Path,
                                                                            env: dict[str, str]) -> None:
    """A node bug that leaves a restarted broker in RECOVERY for good (the zoo's test-only switch):
    the run ends in a verdict, not a crash — exit 1, the `recovery` checker invalid with an
    Unrecovered anomaly naming the stuck nodes, and the other checkers still judged."""
    store = tmp_path / "store"
    proc = subprocess.run([*KRAFTLAB, "test", "--workload", "topics", "--nemesis", "kill", "--no-swarm",
                           "--time-limit", "20", "--seed", "4", "--store", str(store),
                           "--config", "kraftlab.unsafe.test.mode=true",
                           "--config", "kraftlab.unsafe.bug=stuck-in-recovery"],
                          env=env, capture_output=True, text=True, timeout=900)
    latest = (store / "latest").resolve()
    try:
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        results = json.loads((latest / "results.json").read_text())
        recovery = results["checkers"]["recovery"]
        assert recovery["valid"] is False and recovery["anomalies"][0]["type"] == "Unrecovered"
        assert re.search(r"\bn[1-5]\b", recovery["anomalies"][0]["explanation"]), recovery["anomalies"][0]
        assert "RECOVERY" in recovery["anomalies"][0]["explanation"]
        assert results["checkers"]["raft"]["valid"] is True  # judged, not skipped
        assert (latest / "recovery.json").is_file() and (latest / "report.html").is_file()
    finally:
        _clean(_lab_of(latest), env)
