"""The chunked conversion against the single-process pairing: whatever the chunk size, the ops
table holds exactly the ops `checker.history.pair_ops` gives after `checker.judged.client_events`
(positions and ids recovered from ordinals), including ops, unjudged broker reads and retired processes
that cross chunk boundaries, blank lines, nemesis ops without an index, ops never completed; a
malformed sequence across a boundary is refused with the line the single process names."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import History, HistoryError, Op, pair_ops
from kraftlab.checker.judged import client_events
from kraftlab.spark_analysis.convert import ModelSpec, convert, to_positions
from kraftlab.spark_analysis.table import frame_ops

pytestmark = pytest.mark.spark  # pyarrow: the spark extra


def _history(path: Path, seed: int, n: int = 600) -> Path:
    """Random kv traffic: long ops, broker reads (unjudged), crashes, nemesis ops without an
    index, blank lines, and ops still open at the end."""
    rng = random.Random(seed)
    lines: list[str] = []
    open_: dict[int, bool] = {}
    procs = list(range(6))
    nxt = 6
    for _ in range(n):
        if rng.random() < 0.03:
            lines.append(json.dumps({"process": "nemesis", "type": "info", "f": "kill", "value": None, "time": 1}))
        if rng.random() < 0.02:
            lines.append("")
        p = rng.choice(procs)
        if p in open_:
            typ = rng.choices(["ok", "fail", "info"], [8, 1, 1])[0]
            lines.append(json.dumps({"process": p, "type": typ, "f": "get", "value": {"key": f"k{p % 3}",
                                                                                    "value": None}}))
            del open_[p]
            if typ == "info":
                procs[procs.index(p)] = nxt
                nxt += 1
        else:
            broker = rng.random() < 0.2
            value: dict[str, Any] = {"key": f"k{p % 3}", "value": None}
            if broker:
                value["broker_read"] = True
            lines.append(json.dumps({"process": p, "type": "invoke", "f": "get", "value": value}))
            open_[p] = broker
    path.write_text("\n".join(lines) + "\n")
    return path


def _table_ops(ds: Path) -> list[Op]:
    import pyarrow.dataset as pads

    ops = [Op(**d) for key_ops in frame_ops(pads.dataset(ds / "ops").to_table().to_pandas()).values()
           for d in key_ops]
    return to_positions(sorted(ops, key=lambda o: o.call), ds, "kv")


def _same_as_pair_ops(history: Path, ds: Path) -> None:
    want = pair_ops(History(list(client_events(read_history(history).events))))
    got = _table_ops(ds)
    assert len(got) == len(want)
    assert got == sorted(want, key=lambda o: o.call)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [97, 400, 1 << 30])
def test_any_chunking_gives_the_ops_of_pair_ops(tmp_path: Path, seed: int, chunk: int) -> None:
    h = _history(tmp_path / "h.jsonl", seed)
    meta = convert(h, tmp_path / "ds", [ModelSpec("kv")], buckets=4, chunk_bytes=chunk, workers=2)
    _same_as_pair_ops(h, tmp_path / "ds")
    events = read_history(h).events
    nemesis: list[Any] = []
    assert meta["client_events"] == len(list(client_events(events, nemesis)))
    assert meta["events"] == len(events)
    assert meta["nemesis"] == [e.to_json() for e in nemesis]
    assert (meta["chunks"] > 20) == (chunk < 1000)


def _lines(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def _ev(p: Any, typ: str, key: str = "a", **extra: Any) -> dict[str, Any]:
    return {"process": p, "type": typ, "f": "get", "value": {"key": key, "value": None, **extra}}


@pytest.mark.parametrize("events, line", [
    ([_ev(1, "invoke"), _ev(2, "invoke"), _ev(2, "ok"), _ev(1, "invoke")], 4),
    ([_ev(1, "invoke"), _ev(1, "ok"), _ev(2, "invoke"), _ev(2, "ok"), _ev(1, "ok")], 5),
    ([_ev(1, "invoke", broker_read=True), _ev(1, "ok"), _ev(2, "invoke"), _ev(1, "ok")], 4),
])
def test_a_malformed_sequence_across_chunks_is_refused_where_the_single_process_refuses_it(
        tmp_path: Path, events: list[dict[str, Any]], line: int) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text(_lines(*events))
    with pytest.raises(HistoryError) as single:
        pair_ops(History(list(client_events(read_history(h).events))))
    for chunk in (30, 1 << 20):
        with pytest.raises(HistoryError) as chunked:
            convert(h, tmp_path / "ds", [ModelSpec("kv")], chunk_bytes=chunk, workers=2)
        assert chunked.value.line == single.value.line == line
        assert chunked.value.reason == single.value.reason


def test_a_torn_last_line_is_dropped_with_a_note(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text(_lines(_ev(1, "invoke"), _ev(1, "ok"), _ev(2, "invoke")) + '{"process": 2, "ty')
    notes: list[str] = []
    meta = convert(h, tmp_path / "ds", [ModelSpec("kv")], chunk_bytes=40, workers=2, notes=notes)
    assert meta["ops"] == 2 and meta["events"] == 3 and len(notes) == 1 and ":4: torn" in notes[0]
    h.write_text(_lines(_ev(1, "invoke")) + '{"process": 2, "ty\n' + _lines(_ev(1, "ok")))
    with pytest.raises(HistoryError):
        convert(h, tmp_path / "ds", [ModelSpec("kv")], chunk_bytes=40, workers=2)
