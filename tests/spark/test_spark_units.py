"""The Spark path's pure parts, without a JVM: key encoding, Parquet rows, fault windows,
staleness, the quiet settings, and the synthetic histories' known verdicts (checked by the single-process checker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import Event, History, pair_ops
from kraftlab.checker.judged import client_events
from kraftlab.checker.linear.race import race
from kraftlab.checker.models import build_model
from kraftlab.checker.reference import DEFAULT_DIR, load_manifest
from kraftlab.spark_analysis.keys import bucket_of, decode_key, encode_key
from kraftlab.spark_analysis.session import quiet_conf
from kraftlab.spark_analysis.stats import fault_windows, staleness
from kraftlab.spark_analysis.synth import generate

REFS = load_manifest() if (DEFAULT_DIR / "manifest.json").exists() else []


@pytest.mark.parametrize("key", [None, "k1", 7, ("t", 0), ("a", ("b", 1)), frozenset({"x", "y"})])
def test_keys_round_trip(key: object) -> None:
    text = encode_key(key)  # type: ignore[arg-type]
    back = decode_key(text)
    if isinstance(key, frozenset):
        assert back == tuple(sorted(key, key=repr))
    else:
        assert back == key
    assert bucket_of(text, 16) == bucket_of(encode_key(back), 16)


def test_broker_reads_are_left_out_with_their_completions() -> None:
    topics = {"workload": "topics"}
    events = [Event(0, 1, "invoke", "list", {"broker_read": True}, extra=topics), Event(1, 1, "ok", "list"),
              Event(2, 1, "invoke", "list", {"broker_read": True, "final": True}, extra=topics),
              Event(3, 1, "ok", "list", {"topics": []}), Event(4, "nemesis", "info", "kill", None),
              Event(5, 2, "invoke", "read", {"broker_read": True, "final": True}, extra={"workload": "isr"}),
              Event(6, 2, "ok", "read"), Event(7, 2, "invoke", "alter", {}, extra={"workload": "isr"})]
    nemesis: list[Event] = []
    kept = list(client_events(events, nemesis))
    assert [e.index for e in kept] == [2, 3, 7]
    assert [e.index for e in nemesis] == [4]


def test_fault_windows_pair_openers_and_closers() -> None:
    ops = [{"process": "nemesis", "type": "invoke", "f": "kill", "time": 5},
           {"process": "nemesis", "type": "info", "f": "kill", "time": 10},
           {"process": "nemesis", "type": "info", "f": "start-partition", "time": 12},
           {"process": "nemesis", "type": "fail", "f": "pause", "time": 13},
           {"process": "nemesis", "type": "info", "f": "restart", "time": 20},
           {"process": "nemesis", "type": "info", "f": "clock-bump", "time": 30},
           {"process": "nemesis", "type": "info", "f": "clock-reset", "time": 35}]
    w = fault_windows(ops, end=100)
    # the history contract's windows: a window opens at its opener's invocation (a kill is in
    # effect from its start), a failed opener opens none, one never closed ends at `end`
    assert [(x["kind"], x["start"], x["end"]) for x in w] == [
        ("kill", 5, 20), ("start-partition", 12, 100), ("clock-bump", 30, 35)]


def test_staleness_is_commit_to_apply_delay_per_node(tmp_path: Path) -> None:
    a, b = tmp_path / "n1.jsonl", tmp_path / "n2.jsonl"
    a.write_text("\n".join(json.dumps(e) for e in [
        {"ev": "hw", "hw": 5, "ts": 1000, "node": 1}, {"ev": "apply", "offset": 4, "ts": 1002, "node": 1},
        {"ev": "hw", "hw": 9, "ts": 2000, "node": 1}]) + "\n")
    b.write_text("\n".join(json.dumps(e) for e in [
        {"ev": "apply", "offset": 4, "ts": 1500, "node": 2}, {"ev": "apply", "offset": 8, "ts": 2600, "node": 2},
        {"ev": "apply", "offset": 20, "ts": 2700, "node": 2}]) + "\n")
    st = staleness([a, b])
    assert st["1"]["applied"] == 1 and st["1"]["max_ms"] == 2
    assert st["2"]["applied"] == 2 and st["2"]["max_ms"] == 600 and st["2"]["p50_ms"] == 600


def test_quiet_conf_binds_loopback_and_silences_the_ui(tmp_path: Path) -> None:
    conf = quiet_conf("local[2]", tmp_path)
    assert conf["spark.ui.enabled"] == "false" and conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert str(tmp_path) in conf["spark.driver.extraJavaOptions"]
    assert "-XX:TieredStopAtLevel=1" in conf["spark.driver.extraJavaOptions"]
    cluster = quiet_conf("spark://h:7077", None)
    assert "spark.driver.bindAddress" not in cluster and "spark.driver.extraJavaOptions" not in cluster


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_verdicts_are_known(tmp_path: Path, seed: int) -> None:
    good = generate(tmp_path / "good.jsonl", 4000, keys=40, seed=seed, info_rate=0.05)
    bad = generate(tmp_path / "bad.jsonl", 4000, keys=40, seed=seed, info_rate=0.05, plant=[2000])
    assert good.valid and not bad.valid and len(bad.anomalies) == 1
    model = build_model("kv")
    assert race(pair_ops(read_history(good.path)), model, workers=1).valid is True
    r = race(pair_ops(read_history(bad.path)), model, workers=1)
    assert r.valid is False and r.failing_key == bad.anomalies[0]["key"]
    line = bad.path.read_text().splitlines()[bad.anomalies[0]["line"] - 1]
    assert json.loads(line)["value"]["key"] == bad.anomalies[0]["key"]


@pytest.mark.spark  # pyarrow: the spark extra
def test_parquet_rows_give_back_the_ops_each_key_whole_in_one_file(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kraftlab.checker.history import Op
    from kraftlab.spark_analysis.convert import ModelSpec, convert, to_positions
    from kraftlab.spark_analysis.layout import bucket_name
    from kraftlab.spark_analysis.table import frame_ops

    s = generate(tmp_path / "h.jsonl", 3000, keys=30, info_rate=0.1, seed=9)
    meta = convert(s.path, tmp_path / "ds", [ModelSpec("kv")], buckets=4, chunk_bytes=20_000)
    want = sorted(pair_ops(History(list(client_events(read_history(s.path).events)))), key=lambda o: o.call)
    assert meta["ops"] == meta["rows"] == len(want) and len(meta["nemesis"]) == 4 and meta["chunks"] > 10
    file_of_key: dict[str, str] = {}
    got: list[Op] = []
    assert not (tmp_path / "ds" / "chunks").exists()
    for f in sorted((tmp_path / "ds" / "ops").glob("*.parquet")):
        table = pq.read_table(f)
        rows = table.to_pylist()
        assert rows == sorted(rows, key=lambda r: (r["model"], r["key"], r["call"]))
        for r in rows:
            assert file_of_key.setdefault(r["key"], f.name) == f.name == bucket_name(bucket_of(r["key"], 4))
        for key, ops in frame_ops(table.to_pandas()).items():
            assert all(key == encode_key(d["value"]["key"]) for d in ops)
            got += [Op(**d) for d in ops]
    assert [f["name"] for f in meta["files"]] == sorted(set(file_of_key.values()))
    got = to_positions(sorted(got, key=lambda o: o.call), tmp_path / "ds", "kv")
    assert got == want


@pytest.mark.spark  # pyarrow: the spark extra
@pytest.mark.parametrize("batch", [1, 7, 100, 10_000])
def test_key_runs_give_each_key_once_whole_however_the_batches_cut(tmp_path: Path, batch: int) -> None:
    import pyarrow.parquet as pq

    from kraftlab.spark_analysis.convert import DatasetWriter, ModelSpec
    from kraftlab.spark_analysis.job import key_runs
    from kraftlab.spark_analysis.table import frame_ops

    w = DatasetWriter(tmp_path / "ds", buckets=2, chunk_bytes=5_000)
    for tag, seed in (("a", 1), ("b", 2)):  # two models whose keys have the same names
        w.add(generate(tmp_path / f"{tag}.jsonl", 600, keys=12, seed=seed).path, [ModelSpec("kv", tag=tag)])
    w.close()
    seen = []
    for f in sorted((tmp_path / "ds" / "ops").glob("*.parquet")):
        pdf = pq.read_table(f).to_pandas()
        want = [(m, k, ops) for m, rows in pdf.groupby("model", sort=True) for k, ops in frame_ops(rows).items()]
        got = list(key_runs(iter(pdf.iloc[i:i + batch] for i in range(0, len(pdf), batch))))
        assert got == want
        seen += [(m, k) for m, k, _ in got]
    assert len(set(seen)) == len(seen) == 24


@pytest.mark.spark  # pyarrow: the spark extra
def test_a_model_that_cannot_be_split_is_one_file_of_null_keys_in_call_order(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kraftlab.spark_analysis.convert import DatasetWriter, ModelSpec

    w = DatasetWriter(tmp_path / "ds", buckets=4, chunk_bytes=3_000)
    w.add(generate(tmp_path / "kv.jsonl", 400, keys=8, seed=3).path, [ModelSpec("kv", tag="kv")])
    w.add(generate(tmp_path / "reg.jsonl", 300, keys=8, seed=4).path, [ModelSpec("cas-register", tag="reg")])
    meta = w.close()
    assert meta["whole_models"] == ["reg"]
    files = {f["name"]: f["models"] for f in meta["files"]}
    assert files.pop("whole-000.parquet") == ["reg"] and set(files) and all(m == ["kv"] for m in files.values())
    rows = pq.read_table(tmp_path / "ds" / "ops" / "whole-000.parquet").to_pylist()
    reg = pair_ops(History(list(client_events(read_history(tmp_path / "reg.jsonl").events))))
    assert len(rows) == len(reg) > 250 and all(r["key"] is None and r["model"] == "reg" for r in rows)
    assert [r["call"] for r in rows] == sorted(r["call"] for r in rows)
