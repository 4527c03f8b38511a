"""Anomaly graphs (networkx): ops as nodes; edges for real-time, process and version order and
for data dependencies; cycles found, named and explained in plain language; drawn.

Works on single-object histories where writes install distinct values (registers and
cas-registers with unique written values; per-partition ISR states, whose version is the
partition epoch). Edge kinds:

- `rt`: A completed before B was invoked;   `process`: A and B ran in that order on one process;
- `wr`: B read the value A installed;        `ww`: A's value is older than B's (version order:
  a cas from A's value, a numeric version, or A's write completing before B's began);
- `rw`: A read a value that B's write later replaced.

A cycle is a contradiction: no single order can respect all its edges. The classic single-
register failures get their own names: `stale-read` (a read returned a value older than one a
completed write had already replaced, and that newer value is seen again later), `lost-write`
(an acknowledged write replaced a value that reads kept returning, and no read ever saw it),
`duplicate-apply` (a value came back after being replaced, and stayed, though it was written
once). Other cycles get Elle-style names (G0, G1c, G-single, G2, with -realtime/-process when
those edges are needed).
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import networkx as nx

from kraftlab.checker.history import Op
from kraftlab.checker.pictures import save_picture

View = Callable[[Op], tuple[Any, Any]]
"""(value read, value installed) of an op; None for either when it has none."""

_NONE = object()


def register_view(op: Op) -> tuple[Any, Any]:
    if op.f == "read":
        return (_key(op.output) if op.status == "ok" else _NONE), _NONE
    if op.f == "write":
        return _NONE, _key(op.value)
    if op.f == "cas" and isinstance(op.value, list | tuple) and op.status == "ok":
        return _key(op.value[0]), _key(op.value[1])
    if op.f == "cas" and isinstance(op.value, list | tuple) and op.status == "info":
        return _NONE, _key(op.value[1])
    return _NONE, _NONE


def isr_view(op: Op) -> tuple[Any, Any]:
    if op.status != "ok" or not isinstance(op.output, dict) or "partition_epoch" not in op.output:
        return _NONE, _NONE
    pe = int(op.output["partition_epoch"])
    return (pe, _NONE) if op.f == "read" else (_NONE, pe)


VIEWS: dict[str, tuple[View, bool]] = {
    "register": (register_view, False),
    "cas-register": (register_view, False),
    "isr": (isr_view, True),
}
"""model name → (view, versions are numerically ordered)."""

VERSION_WORDS: dict[str, str] = {"isr": "the state at partition epoch {}"}
"""model name → how one of its versions reads in an explanation (default: the value itself)."""


def _key(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, list | dict) else v


def _realtime_predecessors(ops: list[Op]) -> list[tuple[Op, list[Op]]]:
    """For each op b, the ops that completed before b began and after every op that completed
    before b began had been invoked (a transitive reduction of real-time order)."""
    done = sorted((o for o in ops if o.ret is not None), key=lambda x: x.ret or 0)
    rets = [o.ret or 0 for o in done]
    prefix_max_call: list[int] = []
    m = -1
    for o in done:
        m = max(m, o.call)
        prefix_max_call.append(m)
    out = []
    for b in ops:
        k = bisect.bisect_left(rets, b.call)  # done[:k] completed before b began
        if k == 0:
            continue
        frontier = prefix_max_call[k - 1]
        lo = bisect.bisect_left(rets, frontier)
        out.append((b, [a for a in done[lo:k] if a.id != b.id]))
    return out


def build_graph(ops: list[Op], view: View, numeric: bool = False, initial: Any = None,
                label: Callable[[Op], str] = Op.label, version: str = "{}") -> nx.MultiDiGraph:
    """The dependency graph of these ops (see the module docstring). `label` says an op and
    `version` a value (a format string) in the model's words."""
    g: nx.MultiDiGraph[int] = nx.MultiDiGraph()  # nodes: op ids
    ops = [o for o in ops if o.status != "fail"]
    views = {o.id: view(o) for o in ops}
    labels = {o.id: label(o) for o in ops}
    for o in ops:
        g.add_node(o.id, op=o, label=labels[o.id])
    writer: dict[Any, Op] = {}
    for o in ops:
        w = views[o.id][1]
        if w is not _NONE:
            writer.setdefault(w, o)
    init = _key(initial)
    # version order between installed values
    older: dict[Any, set[Any]] = {}  # value → values known to be newer

    def newer(a: Any, b: Any, why: str, x: Op | None, y: Op | None) -> None:
        older.setdefault(a, set()).add(b)
        if x is not None and y is not None and x.id != y.id:
            g.add_edge(x.id, y.id, kind="ww", why=why)

    for v, w in writer.items():
        if v != init:
            older.setdefault(init, set()).add(v)
        r = views[w.id][0]
        if r is not _NONE:
            newer(r, v, f"%B replaced {version.format(r)}, which %A installed", writer.get(r), w)
    if numeric:
        nums = sorted(v for v in writer if isinstance(v, int))
        for lower, higher in itertools.pairwise(nums):
            why = (f"%A installed {version.format(lower)}, older than {version.format(higher)}, which %B installed "
                   "(versions only grow)")
            newer(lower, higher, why, writer[lower], writer[higher])
    else:
        writes = list(writer.values())
        for wb, was in _realtime_predecessors(writes):
            for wa in was:
                newer(views[wa.id][1], views[wb.id][1], "%A's write completed before %B's began", wa, wb)
    for o in ops:
        r = views[o.id][0]
        if r is _NONE:
            continue
        src = writer.get(r)
        if src is not None and src.id != o.id:
            g.add_edge(src.id, o.id, kind="wr", why=f"%B read {version.format(r)}, which %A installed")
        for b in older.get(r, ()):
            replacer = writer.get(b)
            if replacer is not None and replacer.id != o.id:
                g.add_edge(o.id, replacer.id, kind="rw",
                           why=f"%A read {version.format(r)}, which %B replaced with {version.format(b)}")
    by_proc: dict[Any, list[Op]] = {}
    for o in sorted(ops, key=lambda x: x.call):
        by_proc.setdefault(o.process, []).append(o)
    for seq in by_proc.values():
        for a, b in itertools.pairwise(seq):
            g.add_edge(a.id, b.id, kind="process", why=f"process {a.process} ran %A, then %B")
    for b, before in _realtime_predecessors(ops):
        for a in before:
            g.add_edge(a.id, b.id, kind="rt", why="%A completed before %B began (real time)")
    return g


def _cycle_edges(g: nx.MultiDiGraph, cycle: list[Hashable]) -> list[dict[str, Any]]:
    out = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=False):
        datas = list(g.get_edge_data(a, b).values())
        pref = {"wr": 0, "ww": 1, "rw": 2, "process": 3, "rt": 4}
        d = min(datas, key=lambda x: pref[x["kind"]])
        out.append({"from": a, "to": b, **d})
    return out


def _elle_name(kinds: list[str]) -> str:
    data = [k for k in kinds if k in ("ww", "wr", "rw")]
    rw = data.count("rw")
    base = "G0" if set(data) <= {"ww"} else "G1c" if rw == 0 else "G-single" if rw == 1 else "G2"
    if "rt" in kinds:
        return base + "-realtime"
    if "process" in kinds:
        return base + "-process"
    return base


def _classify(g: nx.MultiDiGraph, edges: list[dict[str, Any]], view: View) -> str:
    kinds = [e["kind"] for e in edges]
    if kinds.count("rw") == 1 and "ww" not in kinds:
        rw = next(e for e in edges if e["kind"] == "rw")
        reader: Op = g.nodes[rw["from"]]["op"]
        writer: Op = g.nodes[rw["to"]]["op"]
        old = view(reader)[0]
        new = view(writer)[1]
        reads = [g.nodes[n]["op"] for n in g.nodes if view(g.nodes[n]["op"])[0] is not _NONE]
        seen_new = [r for r in reads if view(r)[0] == new]
        if not seen_new:
            return "lost-write"
        if any(r.call > (reader.ret or reader.call) for r in seen_new):
            return "stale-read"
        later = [r for r in reads if r.call > (reader.ret or reader.call)]
        if later and all(view(r)[0] == old for r in later[:3]):
            return "duplicate-apply"
        return "stale-read"
    return _elle_name(kinds)


MEANINGS = {
    "stale-read": "a read returned a value older than one a completed write had already replaced",
    "lost-write": "an acknowledged write replaced a value that reads kept returning, and no read ever saw it",
    "duplicate-apply": "a value came back after being replaced, and stayed, though it was written once",
    "G0": "write cycle: the writes' version order contradicts itself",
    "G1c": "circular information flow: each op saw what the next one installed",
    "G-single": "read skew: one read missed a write that is ordered before it",
    "G2": "anti-dependency cycle: each op read a version another op's write replaced",
}
"""What each anomaly name means (Adya's and Elle's G0/G1c/G-single/G2; the register classics)."""


def meaning(name: str) -> str:
    base = name.removesuffix("-realtime").removesuffix("-process")
    how = " (real-time order needed)" if name.endswith("-realtime") else (
        " (process order needed)" if name.endswith("-process") else "")
    return MEANINGS.get(base, name) + how


WINDOW_BEFORE, WINDOW_AFTER = 80, 20


def window(ops: list[Op], around: int | None) -> list[Op]:
    """The ops invoked in the 80 ops before event position `around` and the 20 after (the later
    ones tell a stale read from a duplicate apply: does the newer value come back?). Without
    `around`, the last 100 ops."""
    ops = sorted(ops, key=lambda o: o.call)
    if around is None:
        return ops[-(WINDOW_BEFORE + WINDOW_AFTER):]
    k = bisect.bisect_left([o.call for o in ops], around)
    return ops[max(0, k - WINDOW_BEFORE): k + WINDOW_AFTER]


def find_anomalies(ops: list[Op], model_name: str, initial: Any = None, limit: int = 5, key: Any = None,
                   around: int | None = None) -> list[dict[str, Any]]:
    """Cycles of the dependency graph near a failure, shortest first, each named and explained.

    `key` selects one partition's ops (for per-key models: pass the linearizable result's
    anomaly `key`); `around` the failure's position (its `prefix_events`).
    """
    if model_name not in VIEWS:
        return []
    from kraftlab.checker.models import build_model, op_label

    view, numeric = VIEWS[model_name]
    model = build_model(model_name, initial)
    if key is not None:
        ops = [o for o in ops if _same_key(model.partition_key(o), key)]
    g = build_graph(window(ops, around), view, numeric, initial, lambda o: op_label(model, o),
                    VERSION_WORDS.get(model_name, "{}"))
    simple: nx.DiGraph[int] = nx.DiGraph()
    for a, b, d in g.edges(data=True):
        if d["kind"] in ("wr", "ww", "rw") or not simple.has_edge(a, b):
            simple.add_edge(a, b)
    out: list[dict[str, Any]] = []
    seen: set[frozenset[Hashable]] = set()
    for cycle in nx.simple_cycles(simple, length_bound=4):
        key = frozenset(cycle)
        if key in seen or len(cycle) < 2:
            continue
        edges = _cycle_edges(g, list(cycle))
        if not any(e["kind"] in ("wr", "ww", "rw") for e in edges):
            continue
        seen.add(key)
        name = _classify(g, edges, view)
        out.append({"type": name, "meaning": meaning(name), "cycle": [g.nodes[n]["label"] for n in cycle],
                    "explanation": explain_cycle(g, edges), "edges": [
                        {"from": g.nodes[e["from"]]["label"], "to": g.nodes[e["to"]]["label"], "kind": e["kind"]}
                        for e in edges], "_graph": g, "_nodes": list(cycle)})
        if len(out) >= limit * 4:
            break
    order = {"lost-write": 0, "duplicate-apply": 1, "stale-read": 2}
    out.sort(key=lambda a: (order.get(a["type"], 3), len(a["cycle"])))
    return out[:limit]


def _same_key(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, tuple) and isinstance(b, list) and list(a) == b)


def explain_cycle(g: nx.MultiDiGraph, edges: list[dict[str, Any]]) -> str:
    """Elle's form: name the ops (A, B, …), then each edge of the cycle with why it holds, the last
    one closing the contradiction — "Let: A = …; B = …. Then: A < B, because A completed before B
    began (real time); however, B < A, because B read …, which A's … replaced: a contradiction!" """
    names = {n: chr(ord("A") + i) for i, n in enumerate(dict.fromkeys(e["from"] for e in edges))}
    let = "; ".join(f"{names[n]} = {g.nodes[n]['label']}" for n in names)
    steps = []
    for i, e in enumerate(edges):
        a, b = names[e["from"]], names.get(e["to"], "?")
        why = str(e["why"]).replace("%A", a).replace("%B", b)
        steps.append(f"{'however, ' if i == len(edges) - 1 and i else ''}{a} < {b}, because {why} [{e['kind']}]")
    return f"Let: {let}. Then: " + "; ".join(steps) + ": a contradiction!"


COLORS = {"rt": "#888888", "process": "#4c78a8", "wr": "#54a24b", "ww": "#f58518", "rw": "#e45756"}


def draw_anomaly(anomaly: dict[str, Any], out_base: str | Path) -> list[Path]:
    """PNG and SVG of one cycle with its ops labelled and edges coloured by kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g: nx.MultiDiGraph = anomaly["_graph"]
    nodes = anomaly["_nodes"]
    sub: nx.DiGraph[int] = nx.DiGraph()
    for e in _cycle_edges(g, nodes):
        sub.add_edge(e["from"], e["to"], kind=e["kind"])
    pos = nx.circular_layout(sub)
    fig, ax = plt.subplots(figsize=(7, 5))
    nx.draw_networkx_nodes(sub, pos, ax=ax, node_color="#dddddd", node_size=600)
    nx.draw_networkx_labels(sub, pos, ax=ax, labels={n: g.nodes[n]["label"] for n in sub.nodes}, font_size=7)
    from matplotlib.lines import Line2D

    handles = []
    for kind, color in COLORS.items():
        es = [(a, b) for a, b, d in sub.edges(data=True) if d["kind"] == kind]
        if es:
            nx.draw_networkx_edges(sub, pos, edgelist=es, ax=ax, edge_color=color, arrows=True, width=1.8,
                                   connectionstyle="arc3,rad=0.15", node_size=600)
            handles.append(Line2D([0], [0], color=color, lw=2, label=kind))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(anomaly["type"], fontsize=10)
    ax.axis("off")
    fig.tight_layout()
    return save_picture(fig, out_base)


def public(anomaly: dict[str, Any]) -> dict[str, Any]:
    """The anomaly without its graph (for results.json)."""
    return {k: v for k, v in anomaly.items() if not k.startswith("_")}
