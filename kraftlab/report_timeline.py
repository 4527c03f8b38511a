"""The report's interactive timeline of a failing key (in the spirit of Porcupine's visualization):
one lane per client process, each op a bar from its invocation to its completion (open-ended when
it never completed), coloured by its place in the longest partial linearization — green when
linearized (numbered in that order), grey when not, red for the op that cannot be linearized.
Hovering a bar shows the op in Kafka's words and the model state after it. Inline SVG with native
tooltips and a little vanilla JavaScript (a click pins the details below): no network, no library.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

LANE_H, PAD, WIDTH, LEFT = 22, 6, 1100, 70

SCRIPT = """<script>
document.querySelectorAll('svg.kl-timeline rect[data-op]').forEach(function (r) {
  r.addEventListener('click', function () {
    var box = document.getElementById(r.closest('svg').dataset.details);
    var d = JSON.parse(r.dataset.op);
    box.textContent = d.label + (d.state ? '\\nmodel state after it: ' + d.state
                                         : '\\n(not in the partial linearization)');
  });
});
</script>"""


def _color(op: dict[str, Any]) -> str:
    if op.get("failing"):
        return "#e03131"
    return "#2f9e44" if op.get("order") is not None else "#adb5bd"


def timeline_svg(ops: Sequence[dict[str, Any]], title: str, ident: str) -> str:
    """One anomaly's timeline as an SVG plus a details box (empty string without ops)."""
    ops = [o for o in ops if o.get("start") is not None]
    if not ops:
        return ""
    procs = sorted({str(o["process"]) for o in ops}, key=lambda p: (len(p), p))
    lane = {p: i for i, p in enumerate(procs)}
    t0 = min(int(o["start"]) for o in ops)
    t1 = max(int(o["end"] if o.get("end") is not None else o["start"]) for o in ops)
    span = max(t1 - t0, 1)
    scale = (WIDTH - LEFT - 20) / span
    height = PAD * 2 + LANE_H * len(procs) + 20
    parts = [f'<svg class="kl-timeline" data-details="{ident}" width="{WIDTH}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg" font-family="system-ui,sans-serif" font-size="11">']
    for p, i in lane.items():
        y = PAD + i * LANE_H
        parts.append(f'<text x="4" y="{y + 15}">process {html.escape(p)}</text>'
                     f'<line x1="{LEFT}" y1="{y + LANE_H - 2}" x2="{WIDTH - 10}" y2="{y + LANE_H - 2}" stroke="#eee"/>')
    for o in sorted(ops, key=lambda o: int(o["start"])):
        x = LEFT + (int(o["start"]) - t0) * scale
        end = o.get("end")
        w = max(3.0, ((int(end) if end is not None else t1) - int(o["start"])) * scale)
        y = PAD + lane[str(o["process"])] * LANE_H + 3
        tip = o["label"] + (f"\nmodel state after it: {o['state']}" if o.get("state") else "")
        data = html.escape(json.dumps({"label": o["label"], "state": o.get("state")}), quote=True)
        dash = ' stroke-dasharray="4 2"' if end is None else ""
        parts.append(f'<rect data-op="{data}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{LANE_H - 8}" rx="3" '
                     f'fill="{_color(o)}" fill-opacity="0.8" stroke="#333" stroke-width="0.5"{dash}>'
                     f'<title>{html.escape(tip)}</title></rect>')
        if o.get("order") is not None or o.get("failing"):
            mark = "✗" if o.get("failing") else str(int(o["order"]) + 1)
            parts.append(f'<text x="{x + 3:.1f}" y="{y + 11}" fill="#fff" pointer-events="none">{mark}</text>')
    parts.append(f'<text x="{LEFT}" y="{height - 4}" fill="#666">0 s = {t0 / 1e9:.3f} s into the test; '
                 f'{span / 1e9:.3f} s shown. Green: linearized (in that order), red: cannot be linearized, '
                 "grey: not in the partial linearization, dashed: never completed.</text></svg>")
    return (f"<h3>{html.escape(title)}</h3>" + "".join(parts)
            + f'<pre id="{ident}" class="small">click an operation for its details</pre>')


def timelines(results: dict[str, Any]) -> list[str]:
    """The report's timeline section: one per linearizability anomaly that carries a timeline."""
    out: list[str] = []
    for name, res in sorted((results.get("checkers") or {}).items()):
        for i, a in enumerate((res or {}).get("anomalies") or [] if isinstance(res, dict) else []):
            if isinstance(a, dict) and a.get("timeline"):
                out.append(timeline_svg(a["timeline"], f"{name}: key {a.get('key')}", f"kl-tl-{len(out)}-{i}"))
    out = [x for x in out if x]
    return ["<h2>Timeline of the failing key</h2>", *out, SCRIPT] if out else []
