"""The linearizability check of a Parquet history on Spark, and `analyze_run` (the
`kraftlab analyze RUN_DIR --spark MASTER` entry point).

Why `groupBy(model, bucket).applyInPandas`: P-compositionality makes each key's sub-history an
independent check, which is a grouped map. Spark does the shuffle that brings a group's ops
together (in the JVM, on Arrow batches: no Python pickling of rows as with RDDs), and each
Python call gets whole keys as a pandas frame, decodes its columns whole
(`spark_analysis.table.frame_ops`) and runs the project's own per-key check
(`checker.linear.keyed.check_key`) on each key, returning one row per key. The group is the
key's bucket rather than the key itself: grouping per key cost a pandas frame in and out per key
(10,000 keys: minutes of overhead on two cores), while a bucket's frame stays bounded (the bucket
count scales it). mapInPandas would need the input splits to hold whole keys: the Parquet files
partition the history by time (one per conversion chunk), so a key spans files; RDDs pay
pickling for every row.

The job runs in waves (contiguous bucket ranges: Parquet row groups of other buckets are skipped)
with a small budget per key; inside a group the first illegal key ends the group, and after a
wave with an illegal key the job stops (early stop: the rest is not searched). Keys left
`unknown` are re-checked with the large budget. Verdicts merge with `checker.linear.keyed.
merge_keys` (false > unknown > true), and the failing key's ops are read back, given the
single process's positions and ids (`spark_analysis.convert.to_positions`) and explained by
`checker.run.linearizable_with_anomalies` (shortest failing prefix, partial linearizations,
named anomaly cycles, pictures): the same results.json entry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checker.compose import compose
from checker.fencing import check_fencing
from checker.history import Op
from checker.journal import load_journals
from checker.linear.budget import Budget
from checker.linear.keyed import check_key, merge_keys
from checker.raft import check_raft
from checker.run import linearizable_with_anomalies
from spark_analysis.convert import ModelSpec, convert, read_meta, to_positions, workload_specs
from spark_analysis.history_io import load_history_tolerant, read_events
from spark_analysis.keys import decode_key
from spark_analysis.session import spark_session
from spark_analysis.stats import write_stats
from spark_analysis.table import frame_ops

SMALL_BUDGET = Budget(seconds=5.0, max_configs=200_000)
LARGE_BUDGET = Budget(seconds=120.0)
RESULT_SCHEMA = "model string, key string, valid string, reason string, ops long, configurations long, seconds double"
_VALID = {"true": True, "false": False}


def _verdict(v: Any) -> str:
    return "true" if v is True else "false" if v is False else "unknown"


def _check_group(budget: dict[str, Any], models: dict[str, dict[str, Any]], stop_early: bool) -> Any:
    """The pandas function run on executors for one (model, bucket) group: every key in it is
    checked on its own (`check_key`), smallest first; with `stop_early`, the first illegal key
    ends the group."""

    def run(pdf: Any) -> Any:
        import pandas as pd

        model = pdf["model"].iat[0]
        out = []
        for key, ops in sorted(frame_ops(pdf, "gkey").items(), key=lambda kv: len(kv[1])):
            res = check_key(key, ops, models[model], budget)
            out.append({"model": model, "key": key, "valid": _verdict(res["valid"]), "reason": res["reason"],
                        "ops": res["ops"], "configurations": res["configurations"], "seconds": res["seconds"]})
            if stop_early and res["valid"] is False:
                break
        return pd.DataFrame(out, columns=["model", "key", "valid", "reason", "ops", "configurations", "seconds"])

    return run


def _run(df: Any, budget: Budget, models: dict[str, dict[str, Any]], stop_early: bool) -> list[dict[str, Any]]:
    """Check the keys of `df`, grouped by bucket (each key lives in one): one Python call per
    bucket rather than per key keeps the per-call overhead of pandas off small keys."""
    fn = _check_group(budget.to_json(), models, stop_early)
    return [r.asDict() for r in df.groupBy("model", "gbucket").applyInPandas(fn, RESULT_SCHEMA).collect()]


def _waves(bucket_ids: list[int], waves: int) -> list[tuple[int, int]]:
    """Contiguous bucket ranges [lo, hi] (a range filter skips Parquet row groups by their statistics)."""
    ids = sorted(bucket_ids)
    n = max(1, min(waves, len(ids)))
    cuts = [len(ids) * i // n for i in range(n + 1)]
    return [(ids[cuts[i]], ids[cuts[i + 1] - 1]) for i in range(n) if cuts[i + 1] > cuts[i]] or [(0, -1)]


def read_ops(spark: Any, dataset: str | Path, ops_url: str | None = None) -> Any:
    """The ops table: `DATASET/ops`, or `ops_url` where executors read it on a cluster."""
    return spark.read.parquet(ops_url or str(Path(dataset) / "ops"))


def load_ops(spark: Any, dataset: str | Path, ops_url: str | None = None) -> tuple[Any, list[str]]:
    """The ops DataFrame with `gkey`: the key, or null for every op of a model whose history
    cannot be split (some op has no key), as checker.linear.race.split does; and those models."""
    from pyspark.sql import functions as F

    df = read_ops(spark, dataset, ops_url)
    whole = [r["model"] for r in df.filter(F.col("key").isNull()).select("model").distinct().collect()]
    gkey = F.when(F.col("model").isin(whole), F.lit(None).cast("string")).otherwise(F.col("key")) if whole \
        else F.col("key")
    gbucket = F.when(F.col("model").isin(whole), F.lit(-1)).otherwise(F.col("bucket")) if whole else F.col("bucket")
    return df.withColumn("gkey", gkey).withColumn("gbucket", gbucket), whole


def _select(df: Any, pairs: list[tuple[str, str | None]]) -> Any:
    """The rows of these (model, key) groups (null keys match null)."""
    spark = df.sparkSession
    want = spark.createDataFrame(pairs, "rmodel string, rkey string")
    return df.join(want, (df["model"] == want["rmodel"]) & df["gkey"].eqNullSafe(want["rkey"]), "left_semi")


def check_dataset(spark: Any, dataset: str | Path, small: Budget = SMALL_BUDGET, large: Budget = LARGE_BUDGET,
                  waves: int = 4, out_dir: Path | None = None, stop_early: bool = True,
                  ops_url: str | None = None) -> dict[str, dict[str, Any]]:
    """Check every model of a converted history; returns `linearizable-<label>` → result entry."""
    from pyspark.sql import functions as F

    meta = read_meta(dataset)
    models = {m["label"]: m for m in meta["models"]}
    df, whole = load_ops(spark, dataset, ops_url)
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    plan = _waves(list(meta["bucket_ids"]), waves)
    checked: set[int] = set()
    ran = 0
    for i, (lo, hi) in enumerate(plan):
        part = F.col("bucket").between(lo, hi) & ~F.col("model").isin(whole)
        results += _run(df.filter(part | F.col("model").isin(whole) if i == 0 else part), small, models, stop_early)
        checked.update(b for b in meta["bucket_ids"] if lo <= b <= hi)
        ran = i + 1
        if stop_early and any(r["valid"] == "false" for r in results):
            break
    unknown = [r for r in results if r["valid"] == "unknown"]
    if unknown and not (stop_early and any(r["valid"] == "false" for r in results)):
        redo = _select(df, [(r["model"], r["key"]) for r in unknown])
        fresh = {(r["model"], r["key"]): r for r in _run(redo, large, models, stop_early)}
        results = [fresh.get((r["model"], r["key"]), r) for r in results]
    elapsed = time.perf_counter() - t0
    bad = [r for r in sorted(results, key=_order) if r["valid"] == "false"]
    first_bad: dict[str, dict[str, Any]] = {}
    for r in bad:
        first_bad.setdefault(r["model"], r)
    failing = _failing_ops(df, dataset, [(r["model"], r["key"]) for r in first_bad.values()])
    info = {"waves": len(plan), "waves_run": ran,
            "stopped_early": not set(meta["bucket_ids"]) <= checked, "rechecked_keys": len(unknown),
            "small_budget": small.to_json(), "large_budget": large.to_json()}
    out: dict[str, dict[str, Any]] = {}
    for label, spec in models.items():
        complete = label in whole or set(meta.get("model_buckets", {}).get(label, [])) <= checked
        mine = [r for r in results if r["model"] == label]
        out[_checker(label)] = _merge(spec, mine, failing.get(label, []), large, out_dir, elapsed,
                                              {**info, "complete": complete})
    return out


def _checker(label: str) -> str:
    return ModelSpec("", tag=label).checker


def _order(r: dict[str, Any]) -> tuple[bool, int, str]:
    """Which illegal key is explained: the smallest (fastest to explain), then by key."""
    return (r["valid"] != "false", int(r["ops"]), r["key"] or "")


def _failing_ops(df: Any, dataset: str | Path, pairs: list[tuple[str, str | None]]) -> dict[str, list[Op]]:
    """Each model's failing key's ops, read back in one query, in invocation order, with the
    positions the single-process checker gives them (its explanations name them)."""
    if not pairs:
        return {}
    out: dict[str, list[Op]] = {}
    for model, rows in _select(df, pairs).toPandas().groupby("model"):
        ops = [Op(**d) for key_ops in frame_ops(rows, "gkey").values() for d in key_ops]
        out[str(model)] = to_positions(sorted(ops, key=lambda o: o.call), dataset, str(model))
    return out


def _merge(spec: dict[str, Any], rows: list[dict[str, Any]], failing: list[Op], budget: Budget,
           out_dir: Path | None, elapsed: float, info: dict[str, Any]) -> dict[str, Any]:
    """One model's results.json entry, as checker.linearizable.check_linearizable gives it."""
    rows = sorted(rows, key=_order)
    merged = merge_keys([{**r, "key": decode_key(r["key"]), "valid": _VALID.get(r["valid"], "unknown"),
                          "ops": int(r["ops"])} for r in rows])
    valid, reason = merged["valid"], merged["explanation"]
    if valid is True and not info["complete"]:
        valid, reason = "unknown", "not every key was checked: the job stopped at an illegal key of another model"
    stats = {"ops": sum(int(r["ops"]) for r in rows), "partitions": len(rows), "check_seconds": round(elapsed, 6),
             "configurations": sum(int(r["configurations"]) for r in rows)}
    spark_stats = {**info, "failing_keys": [decode_key(r["key"]) for r in rows if r["valid"] == "false"][:20],
                   "unknown_keys": [decode_key(r["key"]) for r in rows if r["valid"] == "unknown"][:20]}
    if valid is not False:
        return {"valid": valid, "model": spec["name"], "explanation": reason, "anomalies": [],
                "stats": stats, "spark": spark_stats}
    res = linearizable_with_anomalies(failing, spec["name"], spec.get("initial"), bool(spec.get("nil_read_any")),
                                      budget, out_dir, _checker(spec["label"]))
    res["stats"] = stats
    res["spark"] = spark_stats
    return res


def _has_workloads(history: Path, look: int = 1000) -> bool:
    """Whether the history's client ops carry `workload` fields (checked on its first lines)."""
    for i, e in enumerate(read_events(history)):
        if e.process != "nemesis" and "workload" in e.extra:
            return True
        if i >= look:
            break
    return False


def _paths(run_dir: Any) -> tuple[Path, Path, list[Path]]:
    path = Path(getattr(run_dir, "path", run_dir))
    history = Path(getattr(run_dir, "history", path / "history.jsonl"))
    if hasattr(run_dir, "journals"):
        journals = list(run_dir.journals().values())
    else:
        journals = sorted(p for p in (path / "nodes").glob("*/journal.jsonl") if p.is_file())
    return path, history, journals


def analyze_run(run_dir: Any, models: Sequence[str] | None = None, master: str | None = "local[2]",
                session_timeout_ms: float = 9000.0, waves: int = 4, buckets: int | None = None) -> dict[str, Any]:
    """Check a run directory on Spark; writes results.json (as the single-process path does),
    spark-stats.json and spark-stats.png next to it, Spark's logs under `spark/logs/`."""
    path, history, journal_paths = _paths(run_dir)
    test = path / "test.json"
    config = (json.loads(test.read_text()).get("config") or {}) if test.is_file() else {}
    session_timeout_ms = float(config.get("broker.session.timeout.ms", session_timeout_ms))
    models = list(models) if models else ["topics", "registry", "isr"]
    specs = workload_specs(models) if _has_workloads(history) else \
        [ModelSpec(m, tag="" if len(models) == 1 else None) for m in models]
    work = path / "spark"
    dataset = work / "parquet"
    notes: list[str] = []
    meta = convert(history, dataset, specs, notes=notes,
                   **({"buckets": buckets} if buckets else {}))
    spark = spark_session(master, work / "logs")
    out_dir = path / "checker"
    lin = check_dataset(spark, dataset, waves=waves, out_dir=out_dir)
    write_stats(spark, dataset, journal_paths, path / "spark-stats.json", path / "spark-stats.png")
    checkers: dict[str, Any] = {name: (lambda r=r: r) for name, r in lin.items()}
    if journal_paths:
        journals = load_journals(journal_paths)
        hist = load_history_tolerant(history)
        checkers["raft"] = lambda: check_raft(journals)
        checkers["fencing"] = lambda: check_fencing(journals, hist, session_timeout_ms=session_timeout_ms)
    results = compose(checkers, timeout=600.0)
    if not journal_paths:
        results.setdefault("notes", []).append("no node journals in the run directory: Raft and fencing "
                                               "invariants were not checked")
        if results.get("valid") is True:
            results["valid"] = "unknown"
    if notes:
        results.setdefault("notes", []).extend(notes)
    results["history"] = {"events": meta["events"], "linearizable_events": meta["client_events"]}
    results["engine"] = {"spark": spark.sparkContext.master, "parquet": str(dataset)}
    (path / "results.json").write_text(json.dumps(json.loads(json.dumps(results, default=str)), indent=2))
    return results

