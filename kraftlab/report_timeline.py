"""The report's interactive pictures, in the spirit of Porcupine's visualization: inline SVG and a
few lines of vanilla JavaScript (no network, no library).

- `op_timeline`: the failing key of a linearizability anomaly — one lane per client process, each
  op a bar from its invocation to its completion (dashed to the end when it never completed),
  green and numbered when it is in the longest partial linearization (a line joins them in that
  order), grey when not, red for the op that cannot be linearized; the run's fault windows shaded
  behind; a time axis in seconds since the test started.
- `event_timeline`: the journal entries a rule violation names — one lane per node, a mark per
  entry at its node's clock.

Hovering any mark shows its details (the op in the model's words, its interval, the model state
before and after it in the partial linearization, or for the failing op every state the search got
stuck in and why); a click pins them in the box under the picture. `SCRIPT` is included once per page.
"""

from __future__ import annotations

import bisect
import html
import math
from collections.abc import Sequence
from typing import Any

LANE_H, TOP, BOTTOM, WIDTH, LEFT, RIGHT = 24, 18, 34, 1150, 86, 14

GREEN, GREY, RED, FAULT = "#2f9e44", "#adb5bd", "#e03131", "#fff3bf"

SCRIPT = """<style>
#kl-tip{position:fixed;display:none;max-width:640px;background:#212529;color:#fff;padding:6px 9px;font-size:12px;
white-space:pre-wrap;border-radius:4px;pointer-events:none;z-index:10;line-height:1.35}
svg.kl-pic [data-tip]{cursor:pointer} svg.kl-pic [data-tip]:hover{stroke:#000;stroke-width:2}
pre.kl-details{min-height:3em}
</style>
<div id="kl-tip"></div>
<script>
(function () {
  var tip = document.getElementById('kl-tip');
  document.querySelectorAll('svg.kl-pic [data-tip]').forEach(function (el) {
    el.addEventListener('mousemove', function (ev) {
      tip.textContent = el.getAttribute('data-tip');
      tip.style.display = 'block';
      var x = ev.clientX + 14, y = ev.clientY + 14;
      if (x + tip.offsetWidth > window.innerWidth) { x = Math.max(0, ev.clientX - tip.offsetWidth - 14); }
      if (y + tip.offsetHeight > window.innerHeight) { y = Math.max(0, ev.clientY - tip.offsetHeight - 14); }
      tip.style.left = x + 'px';
      tip.style.top = y + 'px';
    });
    el.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    el.addEventListener('click', function () {
      var box = document.getElementById(el.closest('svg').dataset.details);
      if (box) { box.textContent = el.getAttribute('data-tip'); }
    });
  });
})();
</script>"""


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _ticks(t0: float, t1: float, want: int = 8) -> list[float]:
    """Round tick positions (seconds) between t0 and t1."""
    span = max(t1 - t0, 1e-6)
    raw = span / want
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(t0 / step) * step
    return [first + k * step for k in range(int((t1 - first) / step) + 1)]


class _Frame:
    """Lanes over a time span: maps (lane, t) to pixels and draws the axis and the fault windows.

    With `marks` (the times of every invocation and completion shown) the axis is ordinal, as in
    Porcupine's and Knossos's pictures: each mark gets the same width, so ops microseconds apart stay
    apart and a long quiet stretch takes no room; times between marks are interpolated. Without, it
    is linear in time."""

    def __init__(self, lanes: list[str], t0: float, t1: float, unit: str, marks: Sequence[float] = (),
                 ns: float = 1e9) -> None:
        self.lanes = {name: i for i, name in enumerate(lanes)}
        self.t0, self.t1 = t0, max(t1, t0 + 1e-6)
        self.marks = sorted({self.t0, self.t1, *marks})
        self.ordinal = bool(marks)
        span = (len(self.marks) - 1) if self.ordinal else (self.t1 - self.t0)
        self.scale = (WIDTH - LEFT - RIGHT) / max(span, 1e-9)
        self.height = TOP + LANE_H * len(lanes) + BOTTOM
        self.unit = unit
        self.ns = ns

    def x(self, t: float) -> float:
        if not self.ordinal:
            return LEFT + (t - self.t0) * self.scale
        k = bisect.bisect_left(self.marks, t)
        if k <= 0:
            return float(LEFT)
        if k >= len(self.marks):
            return float(WIDTH - RIGHT)
        a, b = self.marks[k - 1], self.marks[k]
        frac = 0.0 if b == a else (t - a) / (b - a)
        return LEFT + (k - 1 + frac) * self.scale

    def ticks(self) -> list[float]:
        if not self.ordinal:
            return _ticks(self.t0, self.t1)
        step = max(1, (len(self.marks) - 1) // 8)
        return self.marks[1:-1:step]

    def y(self, lane: str) -> int:
        return TOP + self.lanes[lane] * LANE_H

    def open(self, ident: str, label: str) -> list[str]:
        out = [f'<svg class="kl-pic" data-details="{_esc(ident)}" width="{WIDTH}" height="{self.height}" '
               f'viewBox="0 0 {WIDTH} {self.height}" xmlns="http://www.w3.org/2000/svg" '
               f'font-family="system-ui,sans-serif" font-size="11" role="img" aria-label="{_esc(label)}">',
               f'<rect x="0" y="0" width="{WIDTH}" height="{self.height}" fill="#fff"/>']
        for name, i in self.lanes.items():
            y = TOP + i * LANE_H
            out.append(f'<text x="4" y="{y + 15}">{_esc(name)}</text>'
                       f'<line x1="{LEFT}" y1="{y + LANE_H - 1}" x2="{WIDTH - RIGHT}" y2="{y + LANE_H - 1}" '
                       'stroke="#eee"/>')
        base = TOP + LANE_H * len(self.lanes)
        out.append(f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#888"/>')
        for t in self.ticks():
            x = self.x(t)
            said = f"{t:g}" if not self.ordinal or self.ns == 1.0 else f"{t:.3f}"
            out.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#888"/>'
                       f'<text x="{x:.1f}" y="{base + 15}" text-anchor="middle" fill="#555">{said}</text>')
        out.append(f'<text x="{WIDTH - RIGHT}" y="{base + 28}" text-anchor="end" fill="#555">{_esc(self.unit)}</text>')
        return out

    def faults(self, windows: Sequence[Any]) -> list[str]:
        """Fault windows (objects with kind, start, end in ns) shaded behind the lanes."""
        out = []
        base = TOP + LANE_H * len(self.lanes)
        for w in windows:
            a, b = max(w.start / 1e9, self.t0), min(w.end / 1e9, self.t1)
            if b <= a:
                continue
            x0, x1 = self.x(a), self.x(b)
            tip = f"fault: {w.kind} from {w.start / 1e9:.3f} s to {w.end / 1e9:.3f} s"
            out.append(f'<rect x="{x0:.1f}" y="{TOP - 14}" width="{max(x1 - x0, 1):.1f}" height="{base - TOP + 14}" '
                       f'fill="{FAULT}" fill-opacity="0.7" data-tip="{_esc(tip)}"/>'
                       f'<text x="{x0 + 2:.1f}" y="{TOP - 4}" fill="#8a6d00">{_esc(w.kind)}</text>')
        return out


def _op_tip(o: dict[str, Any], candidates: Sequence[dict[str, Any]], ns: float = 1e9) -> str:
    def at(t: Any) -> str:
        return f"{int(t) / ns:.3f} s" if ns != 1.0 else f"event {int(t)}"

    start = f"invoked at {at(o['start'])}"
    end = (f", completed at {at(o['end'])} ({o.get('status')})" if o.get("end") is not None
           else f", never completed ({o.get('status')}: it may take effect at any later time"
                + (f"; the client gave up at {at(o['gave_up'])})" if o.get("gave_up") is not None else ")"))
    lines = [str(o.get("label")), start + end]
    if o.get("order") is not None:
        lines += [f"#{int(o['order']) + 1} in the longest partial linearization",
                  f"state before: {o.get('state_before') or '?'}", f"state after:  {o.get('state')}"]
    elif o.get("failing"):
        lines.append("CANNOT BE LINEARIZED: the shortest failing prefix ends with its completion.")
        for c in candidates:
            lines.append(f"• in state [{c.get('state')}] (after {c.get('linearized')} ops): "
                         f"{c.get('blocked') or 'the next op'} cannot come next: {c.get('reason')}")
    else:
        lines.append("not in the longest partial linearization")
    return "\n".join(lines)


def op_timeline(anomaly: dict[str, Any], windows: Sequence[Any], ident: str) -> str:
    """The interactive timeline of one linearizability anomaly's failing key ('' without one)."""
    ops = [o for o in anomaly.get("timeline") or [] if isinstance(o, dict)]
    if ops and any(o.get("start") is None for o in ops):
        # a history without times (a Knossos EDN test history): event positions instead
        ops = [{**o, "start": o["call"], "end": o.get("ret")} for o in ops if o.get("call") is not None]
        windows, unit, ns = (), "event position in the history", 1.0
    else:
        unit, ns = "seconds since the test started", 1e9
    if not ops:
        return ""
    candidates = [c for c in anomaly.get("candidates") or [] if isinstance(c, dict)]
    procs = sorted({str(o["process"]) for o in ops}, key=lambda p: (len(p), p))
    t0 = min(int(o["start"]) for o in ops) / ns
    t1 = max(int(o["end"] if o.get("end") is not None else o["start"]) for o in ops) / ns
    marks = [int(o[k]) / ns for o in ops for k in ("start", "end") if o.get(k) is not None]
    fr = _Frame([f"process {p}" for p in procs], t0 - 1e-3, t1 + 1e-3,
                f"{unit} (ordinal scale: every invocation and completion gets the same width)", marks, ns)
    parts = fr.open(ident, f"timeline of key {anomaly.get('key')}") + fr.faults(windows)
    path: list[tuple[int, float, float]] = []
    failing_tip = ""
    for o in sorted(ops, key=lambda o: int(o["start"])):
        lane = f"process {o['process']}"
        x0 = fr.x(int(o["start"]) / ns)
        x1 = fr.x(int(o["end"]) / ns) if o.get("end") is not None else fr.x(fr.t1)
        y = fr.y(lane) + 4
        color = RED if o.get("failing") else GREEN if o.get("order") is not None else GREY
        dash = ' stroke-dasharray="4 2"' if o.get("end") is None else ""
        tip = _op_tip(o, candidates, ns)
        if o.get("failing"):
            failing_tip = tip
        parts.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 3):.1f}" height="{LANE_H - 9}" rx="3" '
                     f'fill="{color}" fill-opacity="0.85" stroke="#333" stroke-width="0.5"{dash} '
                     f'data-tip="{_esc(tip)}"/>')
        if o.get("order") is not None:
            path.append((int(o["order"]), x0, x1 if o.get("end") is not None else fr.x(fr.t1)))
            parts.append(f'<text x="{x0 + 2:.1f}" y="{y + 11}" fill="#fff" font-size="10" '
                         f'pointer-events="none">{int(o["order"]) + 1}</text>')
        elif o.get("failing"):
            parts.append(f'<text x="{x0 + 2:.1f}" y="{y + 11}" fill="#fff" font-weight="bold" '
                         'pointer-events="none">✗</text>')
    points = _linearization_points(path, {o["order"]: fr.y(f"process {o['process']}") + LANE_H // 2 - 1
                                          for o in ops if o.get("order") is not None})
    if len(points) > 1:
        pts = " ".join(f"{x:.1f},{y}" for x, y in points)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#1b5e20" stroke-width="1.2" '
                     'stroke-opacity="0.8" pointer-events="none"/>')
    parts += [f'<circle cx="{x:.1f}" cy="{y}" r="2.2" fill="#1b5e20" pointer-events="none"/>' for x, y in points]
    parts.append("</svg>")
    legend = ("<div class='small'>Green bars: the longest partial linearization, numbered in its order (the dark "
              "line joins its linearization points); red ✗: the op that cannot be linearized; grey: not in it; "
              "dashed: never completed; yellow: a fault in force. Hover an op for its details, click to pin "
              f"them below. {len(ops)} ops of this key shown.</div>")
    shown = failing_tip or "click an operation for its details"
    box = f'<pre class="kl-details" id="{_esc(ident)}">{_esc(shown)}</pre>'
    return "".join(parts) + legend + box


def _linearization_points(path: list[tuple[int, float, float]], ys: dict[Any, int]) -> list[tuple[float, int]]:
    """One point per linearized op inside its bar, never going back in time (its order)."""
    out: list[tuple[float, int]] = []
    last = -math.inf
    for order, x0, x1 in sorted(path):
        x = min(max(last + 1.5, x0 + 2), max(x1 - 1, x0))
        last = x
        out.append((x, ys[order]))
    return out


def event_timeline(entries: Sequence[dict[str, Any]], ident: str, label: str) -> str:
    """The journal entries of one rule violation: a lane per node, a mark per entry at its node's
    clock (`ts`, ms); hover for the entry ('' with fewer than one timed entry)."""
    timed = [e for e in entries if isinstance(e, dict) and isinstance(e.get("ts"), int | float)]
    if not timed:
        return ""
    ms = [float(e["ts"]) for e in timed]
    origin = min(ms)
    nodes = sorted({str(e.get("node")) for e in timed}, key=lambda n: (len(n), n))
    span = max(max(ms) - origin, 1.0)
    fr = _Frame([f"node {n}" for n in nodes], -span * 0.05 / 1000, span * 1.05 / 1000,
                f"seconds after the first entry shown (each node's own clock; 0 = {origin / 1000:.3f})")
    parts = fr.open(ident, label)
    for k, e in enumerate(timed):
        x = fr.x((float(e["ts"]) - origin) / 1000)
        y = fr.y(f"node {e.get('node')}") + LANE_H // 2 - 1
        what = " ".join(f"{key}={val}" for key, val in e.items() if key not in ("where", "node", "ev", "ts", "value"))
        tip = f"#{k + 1} node {e.get('node')}: {e.get('ev')} {what}\n{e.get('where', '')}"
        name = " ".join(str(e[key]) for key in ("ev", "type", "role", "epoch", "offset") if e.get(key) is not None)
        parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="6" fill="{RED if k == 0 else "#1c7ed6"}" fill-opacity="0.85" '
                     f'stroke="#333" stroke-width="0.5" data-tip="{_esc(tip)}"/>'
                     f'<text x="{x + 8:.1f}" y="{y - 3}" fill="#333" font-size="10" pointer-events="none">{k + 1} '
                     f'{_esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts) + f'<pre class="kl-details" id="{_esc(ident)}">hover or click an entry</pre>'
