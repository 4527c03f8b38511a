"""Stopping a Spark job at its first illegal key, across partitions.

A partition stops by itself at its first illegal key; the others would run on. So a partition
that finds one also adds its row to an accumulator (`Found`: a list; Spark merges a task's
updates into the driver's value when the task ends), and the driver, which collects the job
in a thread of its own job group, cancels that group as soon as the accumulator holds a row.
The caller then has the illegal keys' rows only, and knows the other keys were not all checked.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

POLL_SECONDS = 0.25


class Found:
    """An accumulator parameter for a list of rows (duck-typed as pyspark's AccumulatorParam)."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:
        a.extend(b)
        return a


def found_accumulator(spark: Any) -> Any:
    return spark.sparkContext.accumulator([], Found())


def collect_until(spark: Any, df: Any, found: Any) -> tuple[list[Any], bool]:
    """`df.collect()`, or, once `found` holds a row, the job cancelled: (rows, cancelled). Rows
    are `found`'s when cancelled."""
    sc = spark.sparkContext
    group = f"kraftlab-check-{uuid.uuid4().hex}"
    box: dict[str, Any] = {}

    def run() -> None:
        sc.setJobGroup(group, "kraftlab check", interruptOnCancel=True)
        try:
            box["rows"] = df.collect()
        except Exception as exc:  # a cancelled job raises here; anything else is re-raised below
            box["error"] = exc

    th = threading.Thread(target=run, name="kraftlab-check", daemon=True)
    th.start()
    cancelled = False
    while th.is_alive():
        th.join(POLL_SECONDS)
        if th.is_alive() and not cancelled and found.value:
            sc.cancelJobGroup(group)
            cancelled = True
    if "rows" in box:
        return list(box["rows"]), False
    if cancelled:
        return list(found.value), True
    raise box["error"]
