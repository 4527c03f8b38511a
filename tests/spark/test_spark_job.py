"""The Spark path against the single-process checker: same verdicts, same anomalies and
explanations, on every external history of the manifest and on generated ones; budget
escalation; the early stop; analyze_run's results.json; spark-submit's program."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import History, pair_ops
from kraftlab.checker.judged import client_events
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.checker.reference import DEFAULT_DIR, Reference, load_manifest
from kraftlab.checker.run import linearizable_with_anomalies
from kraftlab.spark_analysis.convert import DatasetWriter, ModelSpec, convert
from kraftlab.spark_analysis.job import analyze_run, check_dataset
from kraftlab.spark_analysis.synth import generate

pytestmark = pytest.mark.spark
REFS = load_manifest() if (DEFAULT_DIR / "manifest.json").exists() else []
ROOT = Path(__file__).resolve().parents[2]


def _spec(ref: Reference, tag: str) -> ModelSpec:
    model = ref.build(partitioned=True)
    return ModelSpec(model.name, ref.initial, getattr(model, "nil_read_any", False), tag)


def _single(history: History, spec: ModelSpec) -> dict[str, Any]:
    """The single-process checker on what the Spark path checks (client ops, broker reads out)."""
    client = History(list(client_events(history.events)), history.source, history.format)
    return linearizable_with_anomalies(client, spec.name, spec.initial, spec.nil_read_any, Budget(seconds=60))


def _same(spark_res: dict[str, Any], history: History, spec: ModelSpec, what: str) -> None:
    single = _single(history, spec)
    assert spark_res["valid"] == single["valid"], f"{what}: spark {spark_res['valid']} vs {single['valid']}"
    if single["valid"] is not False:
        return
    key = spark_res["anomalies"][0]["key"]
    if key == single["anomalies"][0]["key"]:
        assert spark_res["anomalies"] == single["anomalies"], what
        assert spark_res["explanation"] == single["explanation"], what
        return
    # several illegal keys: each path stops at the first it finds; the one Spark explains is illegal
    model = build_model(spec.name, spec.initial, spec.nil_read_any)
    ops = pair_ops(History(list(client_events(history.events))))
    assert check_linearizable([op for op in ops if model.partition_key(op) == key], model)["valid"] is False, what


@pytest.mark.skipif(not REFS, reason="no external histories here")
def test_same_verdicts_and_anomalies_on_every_manifest_file(spark: Any, tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path / "ds", buckets=8)
    specs = []
    for i, ref in enumerate(REFS):
        spec = _spec(ref, f"f{i}")
        w.add(ref.path, [spec], ref.reader_format)
        specs.append(spec)
    w.close()
    got = check_dataset(spark, tmp_path / "ds", waves=1, stop_early=False, small=Budget(seconds=2, max_configs=50_000),
                        large=Budget(seconds=60))
    for ref, spec in zip(REFS, specs, strict=True):
        res = got[f"linearizable-{spec.label}"]
        assert res["valid"] is ref.expected, f"{ref.path}: {res['explanation']}"
        _same(res, read_history(ref.path, ref.reader_format), spec, str(ref.path))


@pytest.mark.parametrize("plant", [(), (9_000,), (3_000, 17_000)])
def test_same_as_single_process_on_generated(spark: Any, tmp_path: Path, plant: tuple[int, ...]) -> None:
    s = generate(tmp_path / "h.jsonl", 20_000, keys=200, plant=plant, seed=len(plant), info_rate=0.03)
    convert(s.path, tmp_path / "ds", [ModelSpec("kv")], buckets=8)
    res = check_dataset(spark, tmp_path / "ds", waves=2)["linearizable-kv"]
    _same(res, read_history(s.path), ModelSpec("kv"), str(plant))
    assert res["valid"] is s.valid
    if plant:
        assert res["anomalies"][0]["key"] in {a["key"] for a in s.anomalies}


def test_planted_anomaly_in_100k_ops_is_found_and_explained(spark: Any, tmp_path: Path) -> None:
    s = generate(tmp_path / "h.jsonl", 100_000, keys=1_000, plant=[61_000], seed=7)
    convert(s.path, tmp_path / "ds", [ModelSpec("kv")])
    res = check_dataset(spark, tmp_path / "ds", out_dir=tmp_path / "pics")["linearizable-kv"]
    planted = s.anomalies[0]
    assert res["valid"] is False
    first = res["anomalies"][0]
    assert first["key"] == planted["key"] and first["op"]["complete_line"] == planted["line"]
    assert f"on key '{planted['key']}'" in res["explanation"]
    assert f"history line {planted['line']}" in res["explanation"]
    assert all(Path(p).is_file() for p in first["pictures"])


def test_unknown_keys_are_rechecked_with_the_large_budget(spark: Any, tmp_path: Path) -> None:
    s = generate(tmp_path / "h.jsonl", 4_000, keys=20, concurrency=12, seed=5)
    convert(s.path, tmp_path / "ds", [ModelSpec("kv")], buckets=4)
    tiny = Budget(seconds=5, max_configs=1)
    res = check_dataset(spark, tmp_path / "ds", small=tiny, large=Budget(seconds=60))["linearizable-kv"]
    assert res["valid"] is True and res["spark"]["rechecked_keys"] > 0
    still = check_dataset(spark, tmp_path / "ds", small=tiny, large=tiny)["linearizable-kv"]
    assert still["valid"] == "unknown" and "budget" in still["explanation"]


def test_an_illegal_key_stops_the_job_and_other_models_are_not_called_valid(spark: Any, tmp_path: Path) -> None:
    s = generate(tmp_path / "h.jsonl", 8_000, keys=400, plant=[100], seed=11)
    w = DatasetWriter(tmp_path / "ds", buckets=16)
    w.add(s.path, [ModelSpec("kv", tag="bad")])
    w.add(generate(tmp_path / "g.jsonl", 8_000, keys=400, seed=12).path, [ModelSpec("kv", tag="good")])
    w.close()
    got = check_dataset(spark, tmp_path / "ds", waves=16)
    bad, good = got["linearizable-bad"], got["linearizable-good"]
    assert bad["valid"] is False and bad["spark"]["stopped_early"]
    assert bad["spark"]["waves_run"] < 16
    assert good["valid"] in (True, "unknown") and (good["valid"] == "unknown") == (not good["spark"]["complete"])


def _run_dir(tmp_path: Path) -> Path:
    """A run directory: an etcd history (illegal) as the `register` workload, a node journal."""
    run = tmp_path / "run"
    (run / "nodes" / "n1").mkdir(parents=True)
    events = read_history(DEFAULT_DIR / "anishathalye__porcupine/test_data/jepsen/etcd_000.log", "etcd-log").events
    for i, e in enumerate(events):
        e.time = 1_000_000 * i
        if e.process != "nemesis":
            e.extra["workload"] = "register"
    (run / "history.jsonl").write_text("".join(json.dumps(e.to_json()) + "\n" for e in events))
    journal = [{"ts": 1000 + i, "mono": i, "node": 1, "ev": "hw", "hw": i + 1, "epoch": 1} for i in range(50)]
    journal += [{"ts": 1003 + i, "mono": i, "node": 1, "ev": "apply", "offset": i, "type": "TopicRecord", "crc": 0}
                for i in range(50)]
    (run / "nodes" / "n1" / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in journal))
    return run


@pytest.mark.skipif(not REFS, reason="no external histories here")
def test_analyze_run_writes_results_like_the_single_process_path(spark: Any, tmp_path: Path) -> None:
    from kraftlab.checking import check_run
    from kraftlab.store import RunDir

    run = _run_dir(tmp_path)
    got = analyze_run(RunDir(run), ["cas-register"], master="local[2]")
    assert json.loads((run / "results.json").read_text())["valid"] is False
    stats = json.loads((run / "spark-stats.json").read_text())
    assert stats["staleness"]["1"]["applied"] == 50 and stats["staleness"]["1"]["max_ms"] == 3
    assert sum(c["count"] for c in stats["ops_by_outcome"]) == got["checkers"]["linearizable-register"]["stats"]["ops"]
    assert (run / "spark-stats.png").stat().st_size > 0
    single = check_run(RunDir(run))
    assert set(got["checkers"]) == set(single["checkers"])
    for name, res in single["checkers"].items():
        assert got["checkers"][name]["valid"] == res["valid"], name
    lin = "linearizable-register"
    assert got["checkers"][lin]["anomalies"] == json.loads(json.dumps(single["checkers"][lin]["anomalies"]))
    assert got["checkers"][lin]["explanation"] == single["checkers"][lin]["explanation"]
    assert got["history"] == single["history"]


def test_spark_submit_program_and_py_files_zip(tmp_path: Path) -> None:
    s = generate(tmp_path / "h.jsonl", 5_000, keys=100, plant=[2_500], seed=4)
    zipped = subprocess.run([sys.executable, "-m", "kraftlab.spark_analysis.package", str(tmp_path / "k.zip")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert zipped.returncode == 0 and (tmp_path / "k.zip").stat().st_size > 0
    # run as spark-submit runs it: the file, its `kraftlab` imports served first by the zip on the path
    proc = subprocess.run([sys.executable, str(ROOT / "spark_analysis" / "submit.py"), str(s.path), "--model", "kv",
                           "--master", "local[1]", "--out", str(tmp_path / "out")], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "k.zip")},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["checkers"]["linearizable-kv"]["anomalies"][0]["key"] == s.anomalies[0]["key"]
    assert (tmp_path / "out" / "logs" / "spark.log").is_file()
    assert "INFO" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_planted_anomaly_in_a_million_ops_is_found_and_explained(spark: Any, tmp_path: Path) -> None:
    s = generate(tmp_path / "h.jsonl", 1_000_000, keys=10_000, plant=[700_000], seed=1)
    convert(s.path, tmp_path / "ds", [ModelSpec("kv")])
    res = check_dataset(spark, tmp_path / "ds")["linearizable-kv"]
    assert res["valid"] is False and res["anomalies"][0]["key"] == s.anomalies[0]["key"]
    assert f"history line {s.anomalies[0]['line']}" in res["explanation"]


def test_each_file_is_one_partition_and_the_check_moves_no_row(spark: Any, tmp_path: Path) -> None:
    from kraftlab.spark_analysis.job import _read, check_partition
    from kraftlab.spark_analysis.table import CHECK_COLUMNS

    s = generate(tmp_path / "h.jsonl", 6_000, keys=60, seed=2)
    meta = convert(s.path, tmp_path / "ds", [ModelSpec("kv")], buckets=8, chunk_bytes=50_000)
    files = [f["name"] for f in meta["files"]]
    assert len(files) == 8 and meta["chunks"] > 5
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1k")  # would cut every file in many splits
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    df = _read(spark, str(tmp_path / "ds" / "ops"), files)
    assert df.rdd.getNumPartitions() == len(files)
    checked = df.select(*CHECK_COLUMNS).mapInPandas(check_partition, "n long")  # the job's plan, unexecuted
    plan = checked._jdf.queryExecution().executedPlan().toString()
    assert "MapInPandas" in plan and "Exchange" not in plan and "Sort" not in plan


def test_a_partition_that_finds_an_illegal_key_cancels_the_rest_of_the_job(spark: Any) -> None:
    from kraftlab.spark_analysis.early import collect_until, found_accumulator

    def slow_unless_first(batches: Any, found: Any, finished: Any) -> Any:  # nested: pickled by value
        """Partition 0 reports an illegal key at once; the others take a second each, then count."""
        import pandas as pd
        from pyspark import TaskContext

        n = sum(len(b) for b in batches)
        if TaskContext.get().partitionId() == 0:
            found.add([("m", "k", "false", "planted", n, 0, 0.0)])
        else:
            time.sleep(1.0)
            finished.add(1)  # a killed task's updates are dropped: only partitions that ran to the end count
        yield pd.DataFrame({"n": [n]})

    found = found_accumulator(spark)
    finished = spark.sparkContext.accumulator(0)
    fn = functools.partial(slow_unless_first, found=found, finished=finished)
    rows, cancelled = collect_until(spark, spark.range(0, 32, numPartitions=32).mapInPandas(fn, "n long"), found)
    assert cancelled and rows == [("m", "k", "false", "planted", 1, 0, 0.0)]
    assert finished.value < 31, finished.value  # not cancelled, all 31 slow partitions would finish
    quiet = found_accumulator(spark)
    rows, cancelled = collect_until(spark, spark.range(0, 4, numPartitions=4).groupBy().count(), quiet)
    assert not cancelled and [tuple(r) for r in rows] == [(4,)]


def test_an_illegal_key_in_one_wave_stops_the_job_and_other_models_are_not_called_valid(
        spark: Any, tmp_path: Path) -> None:
    bad = generate(tmp_path / "bad.jsonl", 4_000, keys=40, plant=[300], seed=13)
    good = generate(tmp_path / "good.jsonl", 60_000, keys=1_000, seed=14)
    w = DatasetWriter(tmp_path / "ds", buckets=32)
    w.add(bad.path, [ModelSpec("kv", tag="bad")])
    w.add(good.path, [ModelSpec("kv", tag="good")])
    w.close()
    got = check_dataset(spark, tmp_path / "ds")
    assert got["linearizable-bad"]["valid"] is False
    assert got["linearizable-bad"]["anomalies"][0]["key"] == bad.anomalies[0]["key"]
    good_res = got["linearizable-good"]
    assert good_res["valid"] in (True, "unknown")
    assert (good_res["valid"] == "unknown") == (not good_res["spark"]["complete"]) == good_res["spark"]["stopped_early"]
    assert check_dataset(spark, tmp_path / "ds", stop_early=False)["linearizable-good"]["valid"] is True
