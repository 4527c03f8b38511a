"""Matplotlib plots of a run, each shaded by the fault windows: latency (raw and quantiles),
throughput, a per-process timeline, and node metrics over time. Each returns PNG bytes."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from kraftlab.checker.history import FaultWindow, Op

COLORS = {"ok": "#2b8a3e", "fail": "#e67700", "info": "#c92a2a"}
FAULT_COLORS = ["#748ffc", "#f783ac", "#63e6be", "#ffd43b", "#a9e34b", "#ff8787", "#b197fc"]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _shade(ax: Any, windows: Sequence[FaultWindow]) -> None:
    kinds = sorted({w.kind for w in windows})
    for w in windows:
        color = FAULT_COLORS[kinds.index(w.kind) % len(FAULT_COLORS)]
        ax.axvspan(w.start / 1e9, w.end / 1e9, color=color, alpha=0.18, lw=0,
                   label=w.kind if w is next(x for x in windows if x.kind == w.kind) else None)


def _legend(ax: Any) -> None:
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, loc="upper right", ncol=2)


def latency_raw(pairs: Sequence[Op], windows: Sequence[FaultWindow]) -> bytes:
    fig, ax = plt.subplots(figsize=(10, 3.6))
    _shade(ax, windows)
    fs = sorted({p.f for p in pairs})
    markers = "o^sDv<>phx*"
    groups: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for p in pairs:
        if p.end is not None:
            groups[(p.status, p.f)].append(p)
    for t in ("ok", "fail", "info"):
        for i, f in enumerate(fs):
            sel = groups.get((t, f), [])
            if sel:
                ax.scatter([p.start / 1e9 for p in sel], [max(p.latency_ms or 0, 0.01) for p in sel], s=6,
                           c=COLORS[t], marker=markers[i % len(markers)], label=f"{f} {t}", alpha=0.7)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency of every operation")
    _legend(ax)
    return _png(fig)


def _buckets(pairs: Sequence[Op], width_s: float) -> dict[int, list[Op]]:
    out: dict[int, list[Op]] = defaultdict(list)
    for p in pairs:
        out[int(p.start / 1e9 // width_s)].append(p)
    return out


def latency_quantiles(pairs: Sequence[Op], windows: Sequence[FaultWindow], width_s: float = 1.0) -> bytes:
    fig, ax = plt.subplots(figsize=(10, 3.2))
    _shade(ax, windows)
    buckets = _buckets([p for p in pairs if p.end is not None], width_s)
    xs = sorted(buckets)
    for q, style in ((0.5, "-"), (0.95, "--"), (0.99, ":"), (1.0, "-.")):
        ys = []
        for b in xs:
            lat = sorted(p.latency_ms or 0.0 for p in buckets[b])
            ys.append(lat[min(len(lat) - 1, int(q * len(lat)))])
        ax.plot([b * width_s for b in xs], ys, style, label=f"p{int(q * 100)}" if q < 1 else "max", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Latency quantiles per {width_s:g} s")
    _legend(ax)
    return _png(fig)


def throughput(pairs: Sequence[Op], windows: Sequence[FaultWindow], width_s: float = 1.0) -> bytes:
    fig, ax = plt.subplots(figsize=(10, 3.0))
    _shade(ax, windows)
    buckets = _buckets(pairs, width_s)
    xs = sorted(buckets)
    for t in ("ok", "fail", "info"):
        ax.plot([b * width_s for b in xs], [sum(1 for p in buckets[b] if p.status == t) / width_s for b in xs],
                color=COLORS[t], label=t, lw=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("ops/s")
    ax.set_title("Throughput by outcome")
    _legend(ax)
    return _png(fig)


def lanes(pairs: Sequence[Op]) -> dict[int, int]:
    """A row for each process: a process retired after an `info` hands its row to the next one,
    so rows are the client threads (as in Jepsen's timelines), not the ever-growing processes."""
    spans: dict[int, list[float]] = {}
    for p in pairs:
        end = p.end if p.end is not None else float("inf")
        s = spans.setdefault(p.process, [p.start, end])
        s[0], s[1] = min(s[0], p.start), max(s[1], end)
    free_at: list[float] = []
    out: dict[int, int] = {}
    for proc, (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        row = next((i for i, t in enumerate(free_at) if t <= start), None)
        if row is None:
            row = len(free_at)
            free_at.append(end)
        free_at[row] = end
        out[proc] = row
    return out


def timeline(pairs: Sequence[Op], windows: Sequence[FaultWindow]) -> bytes:
    row = lanes(pairs)
    n = max(row.values(), default=-1) + 1
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.22 * n + 1)))
    _shade(ax, windows)
    end_all = max((p.end or p.start for p in pairs), default=0)
    bars: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for p in pairs:  # one artist per (row, outcome): one per op takes hours on a 10-minute run's 150k ops
        end = p.end if p.end is not None else end_all
        bars[(row[p.process], p.status)].append((p.start / 1e9, max((end - p.start) / 1e9, 0.002)))
    for (y, outcome), spans in bars.items():
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=COLORS[outcome])
    ax.set_yticks(range(n), [str(i) for i in range(n)], fontsize=6)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("client thread")
    ax.set_title("Timeline (green ok, orange fail, red info; a thread continues as a new process after info)")
    _legend(ax)
    return _png(fig)


def node_metrics(samples: Sequence[dict[str, Any]], windows: Sequence[FaultWindow],
                 names: Sequence[str]) -> list[tuple[str, bytes]]:
    """One plot per metric name: each node's value over time. Samples are
    {"time": ns, "node": name, "metrics": {name: value}}."""
    out = []
    for name in names:
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for s in samples:
            v = s.get("metrics", {}).get(name)
            if isinstance(v, int | float):
                series[s["node"]].append((s["time"] / 1e9, float(v)))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(10, 2.6))
        _shade(ax, windows)
        for node in sorted(series):
            xs, ys = zip(*series[node], strict=True)
            ax.plot(xs, ys, label=node, lw=1, drawstyle="steps-post")
        ax.set_xlabel("time (s)")
        ax.set_title(name)
        _legend(ax)
        out.append((name, _png(fig)))
    return out
