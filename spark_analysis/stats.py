"""Statistics at scale, written next to the verdict (`spark-stats.json`) and plotted (PNG):

- ops per model, type (`f`) and outcome (`ok|fail|info`);
- latency quantiles (ms) per model and op type, for ops invoked inside a fault window and outside;
  windows are the history contract's (`checker.history.fault_windows`, paired by the nemesis
  packages' declarations; a window still open at the end closes at the last op);
- per-node metadata staleness: for each record a node applied (journal `apply`), the delay from
  the first moment any node's high-water mark covered it (journal `hw`) to the apply, in node
  wall-clock ms (clock-skew faults distort it by the skew: read it with the fault windows).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kraftlab.checker.history import fault_windows as history_fault_windows
from kraftlab.nemesis.packages import WINDOWS
from kraftlab.spark_analysis.convert import read_meta

QUANTILES = (0.5, 0.9, 0.99, 0.999)


def fault_windows(nemesis: Iterable[dict[str, Any]], end: int | None = None) -> list[dict[str, Any]]:
    """[{"kind": opener f, "start": ns, "end": ns}]: the history contract's fault windows
    (`checker.history.fault_windows`, paired by the nemesis packages' declarations), as JSON."""
    return [{"kind": w.opener or w.kind, "start": w.start, "end": w.end}
            for w in history_fault_windows(nemesis, WINDOWS, end)]


def _merged(windows: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for w in sorted(windows, key=lambda w: w["start"]):
        if spans and w["start"] <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], w["end"]))
        else:
            spans.append((w["start"], w["end"]))
    return spans


def staleness(journal_paths: Iterable[str | Path]) -> dict[str, dict[str, Any]]:
    """Per node: count and quantiles (ms) of commit-to-apply delay; see the module docstring."""
    hw: list[tuple[int, float]] = []
    applies: dict[str, list[tuple[int, float]]] = {}
    for p in journal_paths:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("ev") == "hw" and "hw" in e:
                    hw.append((int(e["hw"]), float(e.get("ts", 0))))
                elif e.get("ev") == "apply" and "offset" in e:
                    applies.setdefault(str(e.get("node", Path(p).parent.name)), []).append(
                        (int(e["offset"]), float(e.get("ts", 0))))
    if not hw:
        return {}
    hw.sort()
    offsets = [h for h, _ in hw]
    first_seen = [0.0] * len(hw)  # the earliest time any hw ≥ offsets[i] was seen
    best = float("inf")
    for i in range(len(hw) - 1, -1, -1):
        best = min(best, hw[i][1])
        first_seen[i] = best
    out: dict[str, dict[str, Any]] = {}
    for node, events in sorted(applies.items()):
        delays = sorted(max(0.0, ts - first_seen[i]) for off, ts in events
                        if (i := bisect.bisect_right(offsets, off)) < len(hw))
        if delays:
            out[node] = {"applied": len(delays), "max_ms": delays[-1],
                         **{f"p{q * 100:g}_ms": delays[min(len(delays) - 1, int(q * len(delays)))] for q in QUANTILES}}
    return out


def compute(spark: Any, dataset: str | Path, journal_paths: Sequence[str | Path] = (),
            ops_url: str | None = None) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from kraftlab.spark_analysis.job import read_ops

    meta = read_meta(dataset)
    df = read_ops(spark, dataset, ops_url)
    last = df.agg(F.max("call_time")).collect()[0][0]
    windows = fault_windows(meta.get("nemesis", []), last)
    spans = _merged(windows)
    inside = F.lit(False)
    for a, b in spans:
        inside = inside | F.col("call_time").between(a, b)
    counts = [r.asDict() for r in df.groupBy("model", "f", "status").count().orderBy("model", "f", "status").collect()]
    done = df.filter(F.col("ret_time").isNotNull() & F.col("call_time").isNotNull() & (F.col("status") != "info"))
    lat = done.withColumn("latency_ms", (F.col("ret_time") - F.col("call_time")) / 1e6).withColumn("in_fault", inside)
    agg = lat.groupBy("model", "f", "in_fault").agg(
        F.count("*").alias("n"), F.percentile_approx("latency_ms", list(QUANTILES), 1000).alias("q"),
        F.max("latency_ms").alias("max_ms"))
    latency = []
    for r in agg.orderBy("model", "f", "in_fault").collect():
        qs = {f"p{q * 100:g}_ms": v for q, v in zip(QUANTILES, r["q"], strict=True)}
        latency.append({"model": r["model"], "f": r["f"], "in_fault": bool(r["in_fault"]), "n": r["n"],
                        "max_ms": r["max_ms"], **qs})
    return {"ops": meta["ops"], "ops_by_outcome": counts, "fault_windows": windows, "latency": latency,
            "staleness": staleness(journal_paths)}


def plot(stats: dict[str, Any], png: str | Path) -> Path:
    """Latency quantiles inside/outside faults per op type, and staleness per node."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = stats["latency"]
    labels = [f"{r['model']}:{r['f']}\n{'fault' if r['in_fault'] else 'calm'}" for r in rows]
    for j, q in enumerate(("p50_ms", "p99_ms", "max_ms")):
        ax1.bar([i + j * 0.27 for i in range(len(rows))], [r[q] or 0 for r in rows], width=0.27, label=q)
    ax1.set_xticks([i + 0.27 for i in range(len(rows))], labels, fontsize=7)
    ax1.set_ylabel("latency (ms)")
    ax1.set_title("op latency inside / outside fault windows")
    ax1.legend(fontsize=7)
    st = stats["staleness"]
    if st:
        nodes = list(st)
        ax2.bar(nodes, [st[n]["p50_ms"] for n in nodes], label="p50")
        ax2.bar(nodes, [st[n]["max_ms"] - st[n]["p50_ms"] for n in nodes], bottom=[st[n]["p50_ms"] for n in nodes],
                label="to max", alpha=0.5)
        ax2.legend(fontsize=7)
    else:
        ax2.text(0.5, 0.5, "no journals with hw/apply events", ha="center", va="center")
    ax2.set_title("metadata staleness per node (commit → apply, ms)")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return Path(png)


def write_stats(spark: Any, dataset: str | Path, journal_paths: Sequence[str | Path], out_json: str | Path,
                out_png: str | Path | None = None, ops_url: str | None = None) -> dict[str, Any]:
    stats = compute(spark, dataset, journal_paths, ops_url)
    Path(out_json).write_text(json.dumps(stats, indent=2, default=str))
    if out_png is not None:
        plot(stats, out_png)
    return stats
