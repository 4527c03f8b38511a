"""A picture per partition where a queue rule broke: offsets across, values up (in the order they
were sent), so a healthy log is a rising staircase. Acknowledged offsets are rings, polled records
dots; a lost record is a red cross at the offset it was acknowledged at, a duplicated value orange
at each of its places, a reused offset a purple line, a skipped range a grey band. Around the
anomalies only, when the partition is long."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from kraftlab.checker.pictures import save_picture
from kraftlab.checker.queue.logs import QueueReplay

MAX_OFFSETS = 400
"""Known offsets drawn per partition at most (a window around its anomalies beyond that)."""
MARK = {"LostWrite": ("x", "#c92a2a"), "Unseen": ("x", "#e8590c"), "Duplicate": ("o", "#f08c00"),
        "AbortedRead": ("s", "#862e9c"), "UnexpectedValue": ("s", "#862e9c"),
        "NonmonotonicPoll": ("v", "#1864ab"), "NonmonotonicSend": ("^", "#1864ab"),
        "ReorderedSend": ("^", "#1864ab")}


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


def draw_partitions(rp: QueueReplay, anomalies: Sequence[dict[str, Any]], keys: Sequence[str],
                    out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for key in keys[:8]:
        pl = rp.logs.get(key)
        if pl is None or not pl.known:
            continue
        mine = [a for a in anomalies if a.get("key") == key]
        hot = sorted({int(o) for a in mine for o in a.get("offsets") or []})
        lo, hi = pl.known[0], pl.known[-1]
        if len(pl.known) > MAX_OFFSETS and hot:
            lo, hi = max(lo, hot[0] - MAX_OFFSETS // 4), min(hi, hot[-1] + MAX_OFFSETS // 4)
        rank: dict[Hashable, int] = {}
        for s in rp.obs.sends:
            if s.key == key:
                rank.setdefault(s.value, len(rank))
        for o in pl.known:
            for v in pl.at[o]:
                rank.setdefault(v, len(rank))
        fig, ax = plt.subplots(figsize=(10, 4.2))
        shown = [s for o in pl.known if lo <= o <= hi for s in pl.at[o].values()]
        acked = [(s.offset, rank[s.value]) for s in shown if s.how == "acknowledged"]
        polled = [(o, rank[v]) for o in pl.known if lo <= o <= hi for v in pl.at[o] if (o, v) in pl.polled_at]
        if acked:
            ax.scatter([x for x, _ in acked], [y for _, y in acked], s=28, facecolors="none", edgecolors="#364fc7",
                       lw=0.8, label="acknowledged to a send")
        if polled:
            ax.scatter([x for x, _ in polled], [y for _, y in polled], s=7, c="#2b8a3e", label="returned by a poll")
        labelled: set[str] = set()
        for a in mine:
            t = str(a.get("type"))
            offs = [int(o) for o in a.get("offsets") or [] if lo <= int(o) <= hi]
            if t == "InconsistentOffset":
                for o in offs:
                    ax.axvline(o, color="#862e9c", lw=1, alpha=0.6, label=None if t in labelled else "offset reused")
                    labelled.add(t)
            elif t == "PollSkip" and len(offs) >= 2:
                ax.axvspan(offs[0] - 0.5, offs[-1] - 0.5, color="#adb5bd", alpha=0.35,
                           label=None if t in labelled else "skipped by a consumer")
                labelled.add(t)
            elif t in MARK:
                marker, color = MARK[t]
                vals = [rank[v] for v in a.get("values") or [] if v in rank]
                pts = [(o, y) for o in offs for y in vals]
                if pts:
                    ax.scatter([x for x, _ in pts], [y for _, y in pts], marker=marker, s=60, c=color,
                               label=None if t in labelled else t)
                    labelled.add(t)
        ax.set_xlabel(f"offset in {key}")
        ax.set_ylabel("value (in send order)")
        ax.set_title(f"partition {key}: {len(mine)} anomal{'y' if len(mine) == 1 else 'ies'}")
        ax.legend(fontsize=7, loc="upper left")
        written.append(save_picture(fig, out_dir / f"queue-{_safe(key)}", dpi=90, tight=True)[0])
    return written
