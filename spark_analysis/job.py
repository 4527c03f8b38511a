"""The linearizability check of a Parquet history on Spark, and `analyze_run` (the
`kraftlab analyze RUN_DIR --spark MASTER` entry point).

Why `mapInPandas` over whole files: P-compositionality makes each key's sub-history an
independent check, and the conversion already wrote every key's rows whole and contiguous in
one file (spark_analysis.layout: one file per key bucket, sorted by model, key and invocation).
So the job reads each file as one partition (`spark.sql.files.maxPartitionBytes` and
`openCostInBytes` set so that no file is split, nor two files packed together) and the Python
side consumes the partition's Arrow batches in order, checking each key's contiguous run of rows
as soon as it ends (`checker.linear.keyed.check_key`): no shuffle (grouping with
`applyInPandas` made Spark sort and move every row through the JVM once more: most of the
executors' CPU), and a Python worker holds one Arrow batch and one key at a time. An RDD would
pay pickling for every row; `mapInArrow` measured the same as `mapInPandas` here (the pandas
conversion is not where PySpark's time goes), and pandas frames are what the decoding takes.

Waves: one wave over every file with the small budget per key (a partition stops at its first
illegal key and reports it; the driver then cancels the wave: spark_analysis.early), then,
unless a key was illegal, one wave re-checking only the keys left `unknown` (the files that
hold them, filtered to those keys) with the large budget. `waves` > 1 splits the
first wave into groups of files and stops after a group with an illegal key (the rest is not
searched). Verdicts merge with `checker.linear.keyed.merge_keys` (false > unknown > true; the
wording is the single process's, `checker.linear.race.explain_keys`). An illegal key's ops are
read back, given the single process's positions and ids (`spark_analysis.convert.to_positions`)
and explained as the single process does (`spark_analysis.checks.explain_failure`); `plan_checks`
returns every model's check as a picklable callable, so callers hand them to `checker.compose`,
whose processes can be killed.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kraftlab.checker.compose import CheckerFn, compose
from kraftlab.checker.dataplane import EVENTS as DATAPLANE_EVENTS
from kraftlab.checker.history import Op
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.keyed import check_key, merge_keys
from kraftlab.spark_analysis import checks
from kraftlab.spark_analysis.convert import ModelSpec, convert, read_meta, to_positions, workload_specs
from kraftlab.spark_analysis.early import collect_until, found_accumulator
from kraftlab.spark_analysis.history_io import read_events
from kraftlab.spark_analysis.keys import bucket_of, decode_key
from kraftlab.spark_analysis.layout import bucket_name, whole_name
from kraftlab.spark_analysis.queue_partitions import check_queue_on_spark
from kraftlab.spark_analysis.session import spark_session
from kraftlab.spark_analysis.stats import write_stats
from kraftlab.spark_analysis.table import CHECK_COLUMNS, COLUMNS, DEFAULT_BUCKETS, frame_ops, frame_runs

SMALL_BUDGET = Budget(seconds=5.0, max_configs=200_000)
LARGE_BUDGET = Budget(seconds=120.0)
RESULT_COLUMNS = ("model", "key", "valid", "reason", "ops", "configurations", "seconds")
RESULT_SCHEMA = "model string, key string, valid string, reason string, ops long, configurations long, seconds double"
WHOLE_FILES = {"spark.sql.files.maxPartitionBytes": str(2**40), "spark.sql.files.openCostInBytes": str(2**40)}
"""A file is never split (it is smaller than a split) nor packed with another (each costs a split)."""
_VALID = {"true": True, "false": False}
SPARK_TYPES = {"int32": "int", "int64": "long", "string": "string"}
Pair = tuple[str, str | None]


def _verdict(v: Any) -> str:
    return "true" if v is True else "false" if v is False else "unknown"


def key_runs(batches: Iterator[Any]) -> Iterator[tuple[str, str | None, list[dict[str, Any]]]]:
    """(model, key, ops) of each contiguous run of rows of a partition's pandas batches, yielded
    once the run is known to be whole (the next run began, or the batches ended): a key may
    straddle batches, never files."""
    carry: tuple[str, str | None, list[dict[str, Any]]] | None = None
    for pdf in batches:
        for run in frame_runs(pdf):
            if carry is not None and run[:2] == carry[:2]:
                carry[2].extend(run[2])
                continue
            if carry is not None:
                yield carry
            carry = run
    if carry is not None:
        yield carry


def check_partition(batches: Iterator[Any], models: dict[str, dict[str, Any]], budget: dict[str, Any],
                    stop_early: bool, wanted: frozenset[Pair] | None, found: Any = None) -> Iterator[Any]:
    """The function mapInPandas runs on a partition: every key (of `wanted`, when given) checked
    on its own; with `stop_early`, the first illegal key ends the partition and, with `found`
    (spark_analysis.early), is reported to the driver, which stops the other partitions."""
    import pandas as pd

    out = []
    for model, key, ops in key_runs(batches):
        if wanted is not None and (model, key) not in wanted:
            continue
        res = check_key(key, ops, models[model], budget)
        out.append((model, key, _verdict(res["valid"]), res["reason"], res["ops"], res["configurations"],
                    res["seconds"]))
        if stop_early and res["valid"] is False:
            if found is not None:
                found.add([out[-1]])
            break
    yield pd.DataFrame(out, columns=list(RESULT_COLUMNS))


def _run(df: Any, budget: Budget, models: dict[str, dict[str, Any]], stop_early: bool,
         wanted: frozenset[Pair] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Each key's result row; and whether the job was stopped at an illegal key (then the rows
    are the illegal keys' only)."""
    spark = df.sparkSession
    found = found_accumulator(spark) if stop_early else None
    fn = functools.partial(check_partition, models=models, budget=budget.to_json(), stop_early=stop_early,
                           wanted=wanted, found=found)
    checked = df.select(*CHECK_COLUMNS).mapInPandas(fn, RESULT_SCHEMA)
    rows, cancelled = collect_until(spark, checked, found) if found is not None else (checked.collect(), False)
    return [dict(zip(RESULT_COLUMNS, tuple(r), strict=True)) for r in rows], cancelled


def _waves(files: list[str], waves: int) -> list[list[str]]:
    n = max(1, min(waves, len(files)))
    cuts = [len(files) * i // n for i in range(n + 1)]
    return [files[cuts[i]:cuts[i + 1]] for i in range(n) if cuts[i + 1] > cuts[i]]


def _base(dataset: str | Path, ops_url: str | None) -> str:
    return (ops_url or str(Path(dataset) / "ops")).rstrip("/")


def read_ops(spark: Any, dataset: str | Path, ops_url: str | None = None) -> Any:
    """The whole ops table: `DATASET/ops`, or `ops_url` where executors read it on a cluster."""
    return _read(spark, _base(dataset, ops_url), [], everything=True)


def _read(spark: Any, base: str, names: Sequence[str], everything: bool = False) -> Any:
    """These files of the dataset (or its whole directory), each one partition; the schema is
    given, so no footer is read to infer it."""
    for k, v in WHOLE_FILES.items():
        spark.conf.set(k, v)
    reader = spark.read.schema(", ".join(f"{name} {SPARK_TYPES[kind]}" for name, kind in COLUMNS))
    return reader.parquet(base) if everything else reader.parquet(*(f"{base}/{n}" for n in names))


def _file_of(meta: dict[str, Any], model: str, key: str | None) -> str:
    """The file that holds a key's rows (a model checked whole: its own file)."""
    if key is None:
        return whole_name(meta["whole_models"].index(model))
    return bucket_name(bucket_of(key, meta["buckets"]))


def _only(spark: Any, base: str, meta: dict[str, Any], pairs: Sequence[Pair]) -> Any:
    """The rows of these keys: their files, filtered (the filter keeps each file's order)."""
    from pyspark.sql import functions as F

    df = _read(spark, base, sorted({_file_of(meta, m, k) for m, k in pairs}))
    keys = sorted({k for _, k in pairs if k is not None})
    whole = sorted({m for m, k in pairs if k is None})
    cond = F.col("key").isin(keys) if keys else F.lit(False)
    if whole:
        cond = cond | (F.col("key").isNull() & F.col("model").isin(whole))
    return df.filter(cond)


def plan_checks(spark: Any, dataset: str | Path, small: Budget = SMALL_BUDGET, large: Budget = LARGE_BUDGET,
                waves: int = 1, out_dir: Path | None = None, stop_early: bool = True,
                ops_url: str | None = None) -> dict[str, CheckerFn]:
    """Run the job over every model of a converted history; returns `linearizable-<label>` →
    a picklable callable giving its results.json entry (a failing key's explanation is left to
    the callable: hand them to `checker.compose`)."""
    meta = read_meta(dataset)
    models = {m["label"]: m for m in meta["models"]}
    base = _base(dataset, ops_url)
    files = [f["name"] for f in meta["files"]]
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    plan = _waves(files, waves)
    checked: set[str] = set()
    ran = 0
    for names in plan:
        ran += 1
        rows, cancelled = _run(_read(spark, base, names, everything=len(plan) == 1), small, models, stop_early)
        results += rows
        if not cancelled:
            checked.update(names)
        if stop_early and any(r["valid"] == "false" for r in results):
            break
    unknown = [r for r in results if r["valid"] == "unknown"]
    if unknown and not (stop_early and any(r["valid"] == "false" for r in results)):
        pairs = [(r["model"], r["key"]) for r in unknown]
        rows, _cancelled = _run(_only(spark, base, meta, pairs), large, models, stop_early, frozenset(pairs))
        fresh = {(r["model"], r["key"]): r for r in rows}
        results = [fresh.get((r["model"], r["key"]), r) for r in results]
    elapsed = time.perf_counter() - t0
    first_bad: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=_order):
        if r["valid"] == "false":
            first_bad.setdefault(r["model"], r)
    failing = _failing_ops(spark, base, meta, dataset, [(r["model"], r["key"]) for r in first_bad.values()])
    info = {"waves": len(plan), "waves_run": ran,
            "stopped_early": not set(files) <= checked, "rechecked_keys": len(unknown),
            "small_budget": small.to_json(), "large_budget": large.to_json()}
    out: dict[str, CheckerFn] = {}
    for label, spec in models.items():
        complete = {f["name"] for f in meta["files"] if label in f["models"]} <= checked
        mine = [r for r in results if r["model"] == label]
        out[_checker(label)] = _entry(spec, mine, failing.get(label, []), large, out_dir, elapsed,
                                      {**info, "complete": complete})
    return out


def check_dataset(spark: Any, dataset: str | Path, small: Budget = SMALL_BUDGET, large: Budget = LARGE_BUDGET,
                  waves: int = 1, out_dir: Path | None = None, stop_early: bool = True,
                  ops_url: str | None = None) -> dict[str, dict[str, Any]]:
    """`plan_checks`, its callables called here: `linearizable-<label>` → result entry."""
    return {name: fn() for name, fn in plan_checks(spark, dataset, small, large, waves, out_dir, stop_early,
                                                   ops_url).items()}


def _checker(label: str) -> str:
    return ModelSpec("", tag=label).checker


def _order(r: dict[str, Any]) -> tuple[bool, int, str]:
    """Which illegal key is explained: the smallest (fastest to explain), then by key."""
    return (r["valid"] != "false", int(r["ops"]), r["key"] or "")


def _failing_ops(spark: Any, base: str, meta: dict[str, Any], dataset: str | Path,
                 pairs: list[Pair]) -> dict[str, list[Op]]:
    """Each model's failing key's ops, read back in one query, in invocation order, with the
    positions the single-process checker gives them (its explanations name them)."""
    if not pairs:
        return {}
    out: dict[str, list[Op]] = {}
    wanted = set(pairs)
    for model, rows in _only(spark, base, meta, pairs).toPandas().groupby("model"):
        ops = [Op(**d) for key, key_ops in frame_ops(rows).items() if (model, key) in wanted for d in key_ops]
        out[str(model)] = to_positions(sorted(ops, key=lambda o: o.call), dataset, str(model))
    return out


def _entry(spec: dict[str, Any], rows: list[dict[str, Any]], failing: list[Op], budget: Budget,
           out_dir: Path | None, elapsed: float, info: dict[str, Any]) -> CheckerFn:
    """One model's check: its results.json entry, as checker.linearizable.check_linearizable gives it."""
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
        return functools.partial(checks.given, {"valid": valid, "model": spec["name"], "explanation": reason,
                                                "anomalies": [], "stats": stats, "spark": spark_stats})
    return functools.partial(checks.explain_failure, failing, spec, budget, out_dir, _checker(spec["label"]),
                             {"stats": stats, "spark": spark_stats})


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
                session_timeout_ms: float = 9000.0, waves: int = 1, buckets: int | None = None) -> dict[str, Any]:
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
    meta = convert(history, dataset, specs, notes=notes, buckets=buckets or DEFAULT_BUCKETS)
    spark = spark_session(master, work / "logs")
    out_dir = path / "checker"
    checkers = plan_checks(spark, dataset, waves=waves, out_dir=out_dir)
    queue = check_queue_on_spark(spark, history)
    if queue is not None:
        checkers["queue"] = functools.partial(checks.given, queue)
    write_stats(spark, dataset, journal_paths, path / "spark-stats.json", path / "spark-stats.png")
    if journal_paths:
        checkers["raft"] = functools.partial(checks.raft, journal_paths)
        checkers["fencing"] = functools.partial(checks.fencing, journal_paths, history, session_timeout_ms)
        checkers["metadata"] = functools.partial(checks.metadata, journal_paths)
        checkers["forwarding"] = functools.partial(checks.forwarding, journal_paths)
        checkers["quorum"] = functools.partial(checks.quorum, journal_paths)
        checkers["broker_reads"] = functools.partial(checks.broker_reads, journal_paths, history)
        if checks.journalled(journal_paths, DATAPLANE_EVENTS):  # as the single process: only where brokers logged them
            checkers["dataplane"] = functools.partial(checks.dataplane, journal_paths)
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

