"""The queue checker on Spark: a queue history's partitions judged on the executors.

The queue rules judge one Kafka partition at a time (`checker.queue.partitioned`: a history split
by key, polls cut per partition), so each partition's part of the history is one Spark task
(`check_part` over an RDD of (key, ops)) and the driver merges the verdicts. The driver streams
the history and keeps only the queue workload's events; a partition's part travels pickled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.queue.observe import WORKLOAD
from kraftlab.checker.queue.partitioned import check_partitioned
from kraftlab.spark_analysis.history_io import read_events


def queue_ops(history: str | Path) -> list[Op]:
    """The queue workload's ops of a run's history (streamed; other workloads' events dropped)."""
    events = [e for e in read_events(history) if e.process != "nemesis" and e.extra.get("workload") == WORKLOAD]
    return pair_ops(History(events, str(history))) if events else []


def check_queue_on_spark(spark: Any, history: str | Path) -> dict[str, Any] | None:
    """The queue verdict of a run's history with each partition checked by a Spark task; None
    when the history has no queue ops."""
    ops = queue_ops(history)
    if not ops:
        return None
    sc = spark.sparkContext

    def on_spark(fn: Callable[[Any], Any], items: list[Any]) -> Iterable[Any]:
        slices = max(1, min(len(items), 4 * sc.defaultParallelism))
        return sc.parallelize(items, slices).map(fn).collect()

    res = check_partitioned(ops, on_spark)
    res["engine"] = "spark: one task per partition"
    return res
