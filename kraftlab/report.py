"""`report.html`: a self-contained page (plots inlined) describing one run.

Sections: the verdict per checker with explanations, every anomaly explained (kraftlab.report_anomalies:
the failing key's interactive timeline, each broken rule), what the run covered, the fault windows, op counts,
the timeline and latency/throughput plots shaded by fault windows, node metrics over time, the
checker's anomaly pictures (any PNG under the run directory's `checker/`), and links to every
node's logs and journals.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from kraftlab import plots
from kraftlab.checker.history import HistoryError, Op, fault_windows, load_jsonl_tolerant, pair_ops
from kraftlab.nemesis.packages import WINDOWS
from kraftlab.report_anomalies import anomaly_sections
from kraftlab.report_coverage import coverage_section
from kraftlab.store import RunDir

METRIC_NAMES = ("kraft_raft_high_watermark", "kraft_raft_current_epoch", "kraft_raft_current_leader",
                "kraft_metadata_lag", "kraft_metadata_commit_latency_ms", "kraft_metadata_commit_rate_per_sec",
                "process_resident_memory_bytes")

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
h1{margin-bottom:.2em} .v-true{color:#2b8a3e} .v-false{color:#c92a2a} .v-unknown{color:#e67700}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;
vertical-align:top} pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;font-size:12px;max-height:30em;
overflow:auto} img{max-width:100%;border:1px solid #eee;margin:.3em 0} .small{color:#666;font-size:12px}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _verdict(v: Any) -> str:
    s = "true" if v is True else "false" if v is False else "unknown"
    return f'<b class="v-{s}">{"valid" if v is True else "INVALID" if v is False else "unknown"}</b>'


def _checker_rows(results: dict[str, Any]) -> str:
    rows = []
    for name, res in sorted((results.get("checkers") or {}).items()):
        res = res if isinstance(res, dict) else {"valid": res}
        expl = res.get("explanation") or res.get("error") or ""
        anomalies = res.get("anomalies") or []
        shown = (f"<div class='small'>{len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'}: "
                 f"<a href='#anomalies-{_esc(name)}'>explained below</a></div>" if anomalies else "")
        rows.append(f"<tr><td>{_esc(name)}</td><td>{_verdict(res.get('valid'))}</td>"
                    f"<td><pre>{_esc(expl)}</pre>{shown}</td></tr>")
    return "<table><tr><th>checker</th><th>verdict</th><th>explanation</th></tr>" + "".join(rows) + "</table>"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def run_title(test: dict[str, Any]) -> str:
    """What the run was: `mixed × all, seed 7` (or the name it was given)."""
    if test.get("name"):
        return str(test["name"])
    workload = test.get("workload") or "run"
    nemesis = test.get("nemesis") or "none"
    seed = test.get("seed")
    return f"{workload} × {nemesis}" + (f", seed {seed}" if seed is not None else "")


def run_shape(test: dict[str, Any]) -> str:
    """The cluster the run deployed, marking what its seed drew (`topology combined (drawn)`;
    `controller.quorum.election.timeout.ms=500 (drawn)`)."""
    drawn = test.get("drawn") or {}
    parts = []
    if test.get("topology"):
        parts.append(f"topology {test['topology']}" + (" (drawn)" if "topology" in drawn else ""))
    parts += [f"{k}={v} (drawn)" for k, v in sorted((drawn.get("config") or {}).items())]
    return ", ".join(parts)


RECOVERY_LOOKBACK_NS = 15_000_000_000
"""The recovery picture starts this long before the heal."""


def _recovery_section(run: RunDir, samples: list[dict[str, Any]], windows: list[Any]) -> list[str]:
    """What happened after the final heal (recovery.json): the verdict, the status over time, each
    node's state, and the node metrics from shortly before the heal to the end."""
    path = run.path / "recovery.json"
    if not path.is_file():
        return []
    rec = json.loads(path.read_text(encoding="utf-8"))
    verdict = "recovered" if rec.get("recovered") else "DID NOT RECOVER"
    css = "v-true" if rec.get("recovered") else "v-false"
    out = [f"<h2>Recovery after the final heal</h2><p><b class='{css}'>{verdict}</b> "
           f"(bound {_esc(rec.get('bound_s'))} s; healthy after {_esc(rec.get('seconds_to_healthy'))} s, "
           f"caught up to offset {_esc(rec.get('goal_offset'))} after {_esc(rec.get('seconds_to_caught_up'))} s; "
           f"restarted: {_esc(', '.join(rec.get('restarted') or []) or 'none')})</p>",
           "<table><tr><th>after the heal (s)</th><th>status</th></tr>"]
    out += [f"<tr><td>{_esc(t.get('t'))}</td><td>{_esc(t.get('status'))}</td></tr>" for t in rec.get("timeline", [])]
    out.append("</table><table><tr><th>node</th><th>running</th><th>applied offset</th><th>problem</th></tr>")
    for name, info in sorted((rec.get("nodes") or {}).items()):
        problem = info.get("fatal") or info.get("log_tail") or ""
        out.append(f"<tr><td>{_esc(name)}</td><td>{_esc(info.get('running'))}</td>"
                   f"<td>{_esc(info.get('applied_offset'))}</td><td><pre>{_esc(problem)}</pre></td></tr>")
    out.append("</table>")
    healed = rec.get("started_at_ns")
    if samples and isinstance(healed, int):
        near = [s for s in samples if int(s.get("time") or 0) >= healed - RECOVERY_LOOKBACK_NS]
        wanted = [n for n in ("kraft_raft_high_watermark", "kraft_raft_current_epoch", "kraft_metadata_lag")
                  if any(n in s.get("metrics", {}) for s in near)]
        if near and wanted:
            out.append("<p class='small'>node metrics from 15 s before the heal to the end of the run</p>")
            out += [_img(png, f"recovery {name}") for name, png in plots.node_metrics(near, windows, wanted)]
    return out


def render(run: RunDir) -> Path:
    """Write `report.html` for a run directory and return its path."""
    test = run.read_test()
    results = run.read_results() or {"valid": "unknown", "checkers": {}}
    pairs: list[Op] = []
    try:
        history, notes = load_jsonl_tolerant(run.history)
        windows = fault_windows(history.events, WINDOWS)
        pairs = pair_ops(history)
    except HistoryError as exc:  # the checkers report a malformed history; the page still shows the rest
        notes, windows = [f"the history cannot be read: {exc}"], []
    title = run_title(test)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_esc(title)}"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>{_esc(title)}: {_verdict(results.get('valid'))}</h1>",
             f"<div class='small'>{_esc(run.path)} · seed {_esc(test.get('seed'))} · "
             f"{len(pairs)} client ops · {len(windows)} fault windows</div>",
             f"<div class='small'>{_esc(run_shape(test))}</div>",
             *(f"<div class='small'>{_esc(n)}</div>" for n in notes),
             f"<details><summary>test arguments</summary><pre>{_esc(json.dumps(test, indent=2, default=str))}"
             f"</pre></details>",
             "<h2>Verdict per checker</h2>", _checker_rows(results), *anomaly_sections(results, windows),
             *coverage_section(results.get("coverage"))]

    counts = Counter((p.f, p.status) for p in pairs)
    fs = sorted({p.f for p in pairs})
    parts.append("<h2>Operations</h2><table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th></tr>")
    parts += [f"<tr><td>{_esc(f)}</td>" + "".join(f"<td>{counts[(f, t)]}</td>" for t in ("ok", "fail", "info"))
              + "</tr>" for f in fs]
    parts.append("</table>")

    parts.append("<h2>Faults</h2><table><tr><th>fault</th><th>from (s)</th><th>to (s)</th><th>what</th></tr>")
    parts += [f"<tr><td>{_esc(w.kind)}</td><td>{w.start / 1e9:.2f}</td><td>{w.end / 1e9:.2f}</td>"
              f"<td><code>{_esc(json.dumps(w.detail, default=str)[:400])}</code></td></tr>" for w in windows]
    parts.append("</table>")

    if pairs:
        parts.append("<h2>Timeline</h2>" + _img(plots.timeline(pairs, windows), "timeline"))
        parts.append("<h2>Latency</h2>" + _img(plots.latency_raw(pairs, windows), "latency"))
        parts.append(_img(plots.latency_quantiles(pairs, windows), "latency quantiles"))
        parts.append("<h2>Throughput</h2>" + _img(plots.throughput(pairs, windows), "throughput"))

    samples = _read_jsonl(run.metrics)
    if samples:
        parts.append("<h2>Node metrics</h2>")
        names = sorted({k for s in samples for k in s.get("metrics", {})})
        wanted = [n for n in METRIC_NAMES if n in names] or names[:6]
        parts += [_img(png, name) for name, png in plots.node_metrics(samples, windows, wanted)]
    parts += _recovery_section(run, samples, windows)

    pictures = sorted((run.path / "checker").rglob("*.png")) if (run.path / "checker").is_dir() else []
    if pictures:
        parts.append("<h2>Anomaly pictures</h2><div class='small'>As drawn by the checkers (PNG and SVG under "
                     "checker/): the failure's last operations and the anomaly cycles.</div>")
        for pic in pictures[:20]:
            svg = pic.with_suffix(".svg")
            link = f' (<a href="{_esc(svg.relative_to(run.path))}">svg</a>)' if svg.is_file() else ""
            parts.append(f"<h3>{_esc(pic.stem)}{link}</h3>" + _img(pic.read_bytes(), pic.stem))

    parts.append("<h2>Nodes</h2><ul>")
    if run.nodes.is_dir():
        for node in sorted(p for p in run.nodes.iterdir() if p.is_dir()):
            links = ", ".join(f'<a href="{_esc(f.relative_to(run.path))}">{_esc(f.name)}</a>'
                              for f in sorted(node.rglob("*")) if f.is_file())
            parts.append(f"<li>{_esc(node.name)}: {links}</li>")
    parts.append("</ul><p class='small'><a href='history.jsonl'>history.jsonl</a> · "
                 "<a href='results.json'>results.json</a> · <a href='test.json'>test.json</a></p></body></html>")
    run.report.write_text("\n".join(parts))
    return run.report
