"""Anomaly graphs: edges of each kind, cycles named and explained, none in a legal history."""

from __future__ import annotations

from pathlib import Path

from kraftlab.checker.graph import build_graph, draw_anomaly, find_anomalies, register_view
from kraftlab.checker.history import Event, History, pair_ops


def _ops(rows: list[tuple[int, str, str, object]]) -> list:  # type: ignore[type-arg]
    return pair_ops(History([Event(i, p, t, f, v, line=i + 1) for i, (p, t, f, v) in enumerate(rows)]))


STALE = [(0, "invoke", "write", 1), (0, "ok", "write", 1), (0, "invoke", "write", 2), (0, "ok", "write", 2),
         (1, "invoke", "read", None), (1, "ok", "read", 1), (2, "invoke", "read", None), (2, "ok", "read", 2)]


def test_edges_of_each_kind() -> None:
    g = build_graph(_ops(STALE), register_view)
    kinds = {(g.nodes[a]["op"].label(), g.nodes[b]["op"].label(), d["kind"]) for a, b, d in g.edges(data=True)}
    assert ("p0 write(1)", "p0 write(2)", "ww") in kinds
    assert ("p0 write(1)", "p1 read() -> 1", "wr") in kinds
    assert ("p1 read() -> 1", "p0 write(2)", "rw") in kinds
    assert ("p0 write(2)", "p1 read() -> 1", "rt") in kinds
    assert ("p0 write(1)", "p0 write(2)", "process") in kinds


def test_stale_read_cycle_named_explained_and_drawn(tmp_path: Path) -> None:
    found = find_anomalies(_ops(STALE), "register")
    assert found[0]["type"] == "stale-read"
    text = found[0]["explanation"]
    # Elle's form: the ops named, each edge with why it holds, the last one closing the cycle
    assert text == ("Let: A = p0 write(2); B = p1 read() -> 1. Then: A < B, because A completed before B began "
                    "(real time) [rt]; however, B < A, because B read 1, which A replaced with 2 [rw]: "
                    "a contradiction!")
    assert found[0]["meaning"].startswith("a read returned a value older than")
    paths = draw_anomaly(found[0], tmp_path / "cycle")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 1000 for p in paths)


def test_legal_history_has_no_cycle() -> None:
    legal = [*STALE[:6], (2, "invoke", "read", None), (2, "ok", "read", 2)]
    legal[5] = (1, "ok", "read", 2)
    assert find_anomalies(_ops(legal), "register") == []


def test_lost_update_is_a_g2_cycle() -> None:
    # two concurrent cas ops both replace the value 0: each read what the other replaced
    rows = [(0, "invoke", "cas", [0, 1]), (1, "invoke", "cas", [0, 2]), (0, "ok", "cas", [0, 1]),
            (1, "ok", "cas", [0, 2]), (2, "invoke", "read", None), (2, "ok", "read", 2)]
    found = find_anomalies(_ops(rows), "cas-register", 0)
    assert [a["type"] for a in found] == ["G2"]
    assert [e["kind"] for e in found[0]["edges"]] == ["rw", "rw"]
    assert sorted(found[0]["cycle"]) == ["p0 cas([0, 1])", "p1 cas([0, 2])"]
