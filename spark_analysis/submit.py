"""The Spark analysis as a program: for `spark-submit` against a cluster, or `python -m`.

    python -m kraftlab.spark_analysis.submit HISTORY --model kv --master local[2] --out DIR
    spark-submit --master spark://HOST:7077 --py-files dist/kraftlab-spark.zip \\
        spark_analysis/submit.py HISTORY --model kv --out DIR [--ops-url hdfs://…/ops]

spark-submit runs a file, not a module: this one, whose `kraftlab` imports come from the
`--py-files` zip (`python -m kraftlab.spark_analysis.package`, put on the driver's and the executors'
path by spark-submit) or from an installed kraftlab.

HISTORY is a history file (JSON Lines, EDN or etcd log; converted to Parquet under
`DIR/parquet`) or a directory already converted (it holds meta.json). `--ops-url` says where
the executors read the ops from when that is not the local directory (HDFS, S3, a shared
mount). Writes `DIR/results.json` and `DIR/spark-stats.json|png`; exit code 0 valid, 1
invalid, 2 unknown, 254 bad arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kraftlab.checker.compose import compose
from kraftlab.checker.linear.budget import Budget
from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.spark_analysis.convert import DEFAULT_BUCKETS, ModelSpec, convert
from kraftlab.spark_analysis.job import LARGE_BUDGET, SMALL_BUDGET, plan_checks
from kraftlab.spark_analysis.session import spark_session
from kraftlab.spark_analysis.stats import write_stats


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kraftlab.spark_analysis.submit",
                                description="check a large history on Spark")
    p.add_argument("history", type=Path)
    p.add_argument("--model", action="append", required=True, help="a checker model (repeat for several)")
    p.add_argument("--format", default=None, help="jsonl | edn | etcd-log (default: detected)")
    p.add_argument("--initial", default=None, help="the model's initial state, as JSON")
    p.add_argument("--nil-read-any", action="store_true", help="Knossos semantics: a nil read says nothing")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: next to the history)")
    p.add_argument("--master", default=None, help="Spark master (default: what spark-submit set, else local[2])")
    p.add_argument("--ops-url", default=None, help="where executors read the Parquet ops (default: DIR/parquet/ops)")
    p.add_argument("--buckets", type=int, default=DEFAULT_BUCKETS, help="more for larger histories")
    p.add_argument("--waves", type=int, default=1, help="groups of files in the first wave (stop after an illegal key)")
    p.add_argument("--small-seconds", type=float, default=SMALL_BUDGET.seconds)
    p.add_argument("--large-seconds", type=float, default=LARGE_BUDGET.seconds)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else EXIT_BAD_ARGS
    out = args.out or (args.history if args.history.is_dir() else args.history.parent) / "spark-check"
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    if (args.history / "meta.json").is_file():
        dataset = args.history
    else:
        initial = json.loads(args.initial) if args.initial else None
        specs = [ModelSpec(m, initial, args.nil_read_any) for m in args.model]
        dataset = out / "parquet"
        convert(args.history, dataset, specs, args.format, args.buckets, notes)
    master = args.master or (None if _under_spark_submit() else "local[2]")
    spark = spark_session(master, out / "logs")
    small = Budget(seconds=args.small_seconds, max_configs=SMALL_BUDGET.max_configs)
    checkers = plan_checks(spark, dataset, small, Budget(seconds=args.large_seconds), args.waves, out / "checker",
                           ops_url=args.ops_url)
    results = compose(checkers, timeout=args.large_seconds + 600.0)
    if notes:
        results["notes"] = notes
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_stats(spark, dataset, [], out / "spark-stats.json", out / "spark-stats.png", ops_url=args.ops_url)
    print(f"{results['valid']}: {out / 'results.json'}")
    return 0 if results["valid"] is True else 1 if results["valid"] is False else 2


def _under_spark_submit() -> bool:
    import os

    return "SPARK_ENV_LOADED" in os.environ or "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


if __name__ == "__main__":
    raise SystemExit(main())
