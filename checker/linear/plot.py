"""A picture of a linearizability failure: the last operations of the shortest failing prefix
as bars per process (invocation to completion; crashed ops hatched to the end), the op that
cannot be linearized in red, and the longest partial linearization as numbered points.
Written as PNG and SVG with matplotlib (Agg backend, no display).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from kraftlab.checker.history import Op
from kraftlab.checker.linear.explain import Explanation
from kraftlab.checker.pictures import save_picture

WINDOW = 40


def draw_failure(expl: Explanation, out_base: str | Path, title: str = "not linearizable",
                 label: Callable[[Op], str] = Op.label) -> list[Path]:
    """Write `<out_base>.png` and `<out_base>.svg`; returns the paths. `label` says each op (the
    model's `op_label`)."""
    ops = sorted(expl.ops, key=lambda o: o.call)[-WINDOW:]
    if expl.op is not None and expl.op not in ops:
        ops.append(expl.op)
    end = expl.prefix_events
    start = min((o.call for o in ops), default=0)
    procs = sorted({str(o.process) for o in ops}, key=lambda p: (len(p), p))
    row = {p: i for i, p in enumerate(procs)}
    fig_h = 1.2 + 0.45 * max(1, len(procs))
    fig, ax = plt.subplots(figsize=(12, fig_h))
    for o in ops:
        y = row[str(o.process)]
        stop = o.ret if o.ret is not None else end
        bad = expl.op is not None and o.id == expl.op.id
        ax.barh(y, max(0.6, stop - o.call), left=o.call, height=0.6,
                color="#e45756" if bad else "#9ecae9", edgecolor="#333333",
                hatch="//" if o.ret is None else None, linewidth=0.6)
        ax.text(o.call + 0.2, y, label(o), va="center", fontsize=6.5, clip_on=True)
    if expl.partials:
        visible = {o.id for o in ops}
        xs, ys = [], []
        last: float = start
        for n, (o, _) in enumerate(expl.partials[0], 1):
            if o.id not in visible:
                continue
            stop = o.ret if o.ret is not None else end
            x = min(max(last + 0.3, o.call + 0.3), stop - 0.1)
            last = x
            xs.append(x)
            ys.append(row[str(o.process)] + 0.32)
            ax.annotate(str(n), (x, ys[-1]), fontsize=6, color="#2a7a2a", ha="center")
        ax.plot(xs, ys, color="#2a7a2a", linewidth=0.8, marker=".", markersize=4, label="partial linearization")
        ax.legend(loc="upper left", fontsize=7)
    ax.set_yticks(range(len(procs)), [f"p{p}" for p in procs])
    ax.set_xlabel("event position in the history")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(start - 1, end + 2)
    fig.tight_layout()
    return save_picture(fig, out_base)
