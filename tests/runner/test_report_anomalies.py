"""The report's "Anomalies explained" section: a linearizability failure's stuck states, last
consistent prefix and interactive timeline; journal-rule violations grouped per rule — rendered
from results.json alone, self-contained (inline SVG + vanilla JavaScript, nothing fetched)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kraftlab.checker.history import FaultWindow
from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import journals_from
from kraftlab.checker.run import check_run
from kraftlab.report import render
from kraftlab.report_anomalies import anomaly_sections, rule_words
from kraftlab.report_timeline import SCRIPT, op_timeline
from kraftlab.store import new_run, write_json

PART = {"topic": "t0", "partition": 0, "leader": 4, "broker_epoch": 29}


def _history(path: Path) -> Path:
    """A stale AlterPartition (partition epoch 5 accepted while the partition was at 6), after a read
    on another process (one more read never completes: it observes nothing, the model drops it)."""
    rows: list[tuple[Any, str, str, Any]] = [
        (1, "invoke", "read", {"topic": "t0", "partition": 0}),
        (2, "invoke", "alter", {**PART, "leader_epoch": 1, "partition_epoch": 5, "isr": [4, 5]}),
        (1, "ok", "read", {"leader": 4, "leader_epoch": 1, "partition_epoch": 5, "isr": [4, 5, 6]}),
        (2, "ok", "alter", {"leader_epoch": 1, "partition_epoch": 6, "isr": [4, 5]}),
        (5, "invoke", "read", {"topic": "t0", "partition": 0}),
        (3, "invoke", "alter", {**PART, "leader_epoch": 1, "partition_epoch": 5, "isr": [4]}),
        (3, "ok", "alter", {"leader_epoch": 1, "partition_epoch": 7, "isr": [4]}),
    ]
    with open(path, "w") as fh:
        for i, (p, typ, f, v) in enumerate(rows):
            fh.write(json.dumps({"index": i, "time": (i + 1) * 10**8, "process": p, "type": typ, "f": f, "value": v,
                                 "workload": "isr"}) + "\n")
    return path


def _results(tmp_path: Path) -> dict[str, Any]:
    res = check_run(_history(tmp_path / "h.jsonl"))
    js = journals_from([{"ts": 1000.0, "mono": 1, "node": 1, "ev": "role", "role": "leader", "epoch": 7},
                        {"ts": 1500.0, "mono": 2, "node": 2, "ev": "role", "role": "leader", "epoch": 7},
                        {"ts": 1800.0, "mono": 3, "node": 3, "ev": "role", "role": "follower", "epoch": 7}],
                       "/store/run/nodes/n1/journal.jsonl")
    v = Violation("SingleLeader", "nodes [1, 2] were both leader in epoch 7", list(js.all()),
                  before="node 1 leader of epoch 7", after="node 2 also leader of epoch 7")
    res["checkers"]["raft"] = {"valid": False, "explanation": "violated: SingleLeader ×1",
                               "anomalies": [v.to_json(), {**v.to_json(), "entries": []}]}
    res["valid"] = False
    return res


def test_a_linearizability_failure_is_explained_with_its_timeline(tmp_path: Path) -> None:
    res = _results(tmp_path)
    windows = [FaultWindow("partition", 3 * 10**8, 6 * 10**8, {"grudge": {}}, "start-partition")]
    page = "".join(anomaly_sections(res, windows))
    text = html.unescape(page)
    # the failing op, every stuck state and why (the rule, the state before, what it was answered)
    assert "The op that cannot be linearized: <b>p3 AlterPartition t0-0 by broker 4 (broker epoch 29) at " \
           "partition epoch 5" in text
    assert "Kafka answers INVALID_UPDATE_VERSION" in text and "<th>model state</th>" in text
    assert "Last consistent prefix" in text and "from [not yet seen]" in text
    # the timeline: one lane per process, one bar per op, each with its hover text
    svg = re.search(r'<svg class="kl-pic".*?</svg>', page, re.S)
    assert svg is not None
    bars = re.findall(r'<rect x="[\d.]+" y="\d+" width="[\d.]+" height="\d+" rx="3" fill="(#[0-9a-f]+)"', svg.group(0))
    assert sorted(bars) == ["#2f9e44", "#2f9e44", "#e03131"]  # 2 linearized, the failing one
    assert all(f">process {p}<" in svg.group(0) for p in (1, 2, 3))
    tips = [html.unescape(t) for t in re.findall(r'data-tip="([^"]*)"', svg.group(0))]
    alter = next(t for t in tips if t.startswith("p2 AlterPartition"))
    assert "#2 in the longest partial linearization" in alter
    assert "state before: partition epoch 5, leader 4 at leader epoch 1, ISR [4, 5, 6]" in alter
    assert "state after:  partition epoch 6, leader 4 at leader epoch 1, ISR [4, 5]" in alter
    failing = next(t for t in tips if t.startswith("p3 AlterPartition"))
    assert "CANNOT BE LINEARIZED" in failing and "INVALID_UPDATE_VERSION" in failing
    assert any(t.startswith("fault: partition from 0.300 s to 0.600 s") for t in tips)
    assert "<polyline" in svg.group(0)  # the linearization points joined in order
    # the failing op's details are shown before any hover, and the page fetches nothing
    assert re.search(r'<pre class="kl-details" id="[^"]+">p3 AlterPartition', page)
    assert page.count(SCRIPT) == 1
    assert not re.search(r"(src|href)=\"(https?:)?//", page) and "http" not in page.replace(
        "http://www.w3.org/2000/svg", "")


def test_ops_outside_the_linearization_and_never_completed() -> None:
    ops = [{"process": 1, "start": 10**8, "end": 2 * 10**8, "label": "p1 w", "status": "ok", "order": 0,
            "state_before": "nil", "state": "1", "failing": False},
           {"process": 2, "start": 15 * 10**7, "end": None, "gave_up": 25 * 10**7, "label": "p2 w", "status": "info",
            "order": None,
            "state_before": None, "state": None, "failing": False},
           {"process": 3, "start": 3 * 10**8, "end": 4 * 10**8, "label": "p3 r", "status": "ok", "order": None,
            "state_before": None, "state": None, "failing": True}]
    svg = op_timeline({"key": "k", "timeline": ops, "candidates": [
        {"state": "1", "linearized": 1, "blocked": "p3 r", "reason": "it read 2", "fits": False}]}, [], "t")
    tips = [html.unescape(t) for t in re.findall(r'data-tip="([^"]*)"', svg)]
    assert ("never completed (info: it may take effect at any later time; the client gave up at 0.250 s)"
            in tips[1])
    assert "not in the longest partial linearization" in tips[1] and 'stroke-dasharray="4 2"' in svg
    assert "• in state [1] (after 1 ops): p3 r cannot come next: it read 2" in tips[2]
    assert op_timeline({"key": "k", "timeline": []}, [], "t") == ""


def test_a_history_without_times_is_drawn_by_event_position() -> None:
    ops = [{"process": 0, "start": None, "end": None, "call": 0, "ret": 1, "label": "p0 write(1)", "status": "ok",
            "order": 0, "state_before": "nil", "state": "1", "failing": False},
           {"process": 1, "start": None, "end": None, "call": 2, "ret": 3, "label": "p1 read() -> 2", "status": "ok",
            "order": None, "state_before": None, "state": None, "failing": True}]
    svg = op_timeline({"key": None, "timeline": ops}, [], "t")
    assert svg.count('rx="3"') == 2 and "event position in the history" in svg
    assert "invoked at event 2, completed at event 3 (ok)" in html.unescape(svg)


def test_rule_violations_are_grouped_per_rule(tmp_path: Path) -> None:
    page = html.unescape("".join(anomaly_sections(_results(tmp_path))))
    assert "<h4>SingleLeader — broken 2 times</h4>" in page
    assert "<i>What checker.raft judges: at most one node is leader in any epoch.</i>" in page
    assert "nodes [1, 2] were both leader in epoch 7" in page
    assert "<td>node 1 leader of epoch 7</td><td>node 2 also leader of epoch 7</td>" in page  # before / after
    assert '<a href="nodes/n1/journal.jsonl">nodes/n1/journal.jsonl:2</a>' in page  # linked into the run
    assert page.count('<svg class="kl-pic"') == 2  # the timeline and one entries picture (3 entries, 3 nodes)
    assert ">node 2<" in page and "role leader 7" in page


def test_a_rule_reads_in_one_sentence_from_the_checker_that_declares_it() -> None:
    assert rule_words("FencedLeavesIsr") == "The rule: a broker is out of every ISR before its FenceBrokerRecord"
    # or from the bullets of its docstring, first sentence only
    assert rule_words("SingleLeader") == "What checker.raft judges: at most one node is leader in any epoch"
    assert rule_words("MetadataGoesBack") == ("What checker.fencing judges: a node applies offsets out of order "
                                              "within one process life")
    assert str(rule_words("ForwardedOnce")).startswith("What checker.forwarding judges: within one broker process")
    assert rule_words("NoSuchRule") is None


def test_nothing_to_explain_gives_no_section() -> None:
    assert anomaly_sections({"valid": True, "checkers": {"raft": {"valid": True, "anomalies": []}}}) == []


def _report(tmp_path: Path) -> Path:
    run = new_run("explain", {"seed": 3, "workload": "isr"}, store=tmp_path / "store")
    shutil.copy(_history(tmp_path / "h.jsonl"), run.history)
    write_json(run.results, _results(tmp_path))
    return render(run)


def test_the_report_links_the_verdict_to_its_explanation(tmp_path: Path) -> None:
    page = _report(tmp_path).read_text()
    assert "<h2>Anomalies explained</h2>" in page and "href='#anomalies-linearizable-isr'" in page
    assert "id='anomalies-linearizable-isr'" in page and "id='anomalies-raft'" in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HOVER = """<script>window.addEventListener('load', function () {
  var bar = document.querySelector('svg.kl-pic rect[fill="#e03131"]');
  var r = bar.getBoundingClientRect();
  bar.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 2, clientY: r.top + 2, bubbles: true}));
  bar.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  document.body.setAttribute('data-tip-shown', document.getElementById('kl-tip').style.display);
});</script>"""


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=3000", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")
def test_a_browser_shows_the_failing_ops_details_on_hover(tmp_path: Path) -> None:
    report = _report(tmp_path)
    probe = report.with_name("probe.html")
    probe.write_text(report.read_text() + HOVER)
    dom = _chromium(tmp_path, "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-tip-shown="block"' in dom.stdout  # the hover opened the tooltip
    tip = re.search(r'<div id="kl-tip"[^>]*>(.*?)</div>', dom.stdout, re.S)
    assert tip is not None and "CANNOT BE LINEARIZED" in html.unescape(tip.group(1))
    shot = tmp_path / "report.png"
    done = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1300,2400", f"--screenshot={shot}", probe.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 20_000, done.stderr[-2000:]
