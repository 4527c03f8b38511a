"""The checks the Spark path hands to `checker.compose`, as picklable module-level functions
(bound with functools.partial, never lambdas), so `checker.isolate` runs each in a killable
process group under the compose's limits, as the single-process path runs its checks.

Their inputs are small or paths: the failing key's ops only (the executors checked the rest),
and the journals' and history's paths (a child loads them itself: a large history is never
pickled, nor held by the Spark driver).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kraftlab.checker.broker_reads import check_broker_reads
from kraftlab.checker.dataplane import check_dataplane
from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.forwarding import check_forwarding
from kraftlab.checker.history import Op
from kraftlab.checker.journal import load_journals
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.metadata.check import check_metadata
from kraftlab.checker.quorum import check_quorum
from kraftlab.checker.raft import check_raft
from kraftlab.checker.run import linearizable_with_anomalies
from kraftlab.spark_analysis.history_io import load_history_tolerant


def given(result: dict[str, Any]) -> dict[str, Any]:
    """A result the executors already settled (valid or unknown)."""
    return result


def explain_failure(failing: list[Op], spec: dict[str, Any], budget: Budget, out_dir: Path | None, checker: str,
                    extra: dict[str, Any]) -> dict[str, Any]:
    """An illegal key's entry, explained exactly as the single process explains it (shortest
    failing prefix, partial linearizations, anomaly cycles, pictures); `extra` is merged in
    (the whole history's stats, the job's `spark` section)."""
    res = linearizable_with_anomalies(failing, spec["name"], spec.get("initial"), bool(spec.get("nil_read_any")),
                                      budget, out_dir, checker)
    res.update(extra)
    return res


def raft(journal_paths: list[Path]) -> dict[str, Any]:
    return check_raft(load_journals(journal_paths))


def forwarding(journal_paths: list[Path]) -> dict[str, Any]:
    return check_forwarding(load_journals(journal_paths))


def quorum(journal_paths: list[Path]) -> dict[str, Any]:
    return check_quorum(load_journals(journal_paths))


def dataplane(journal_paths: list[Path]) -> dict[str, Any]:
    return check_dataplane(load_journals(journal_paths))


def journalled(journal_paths: list[Path], events: tuple[str, ...]) -> bool:
    """Whether any journal names one of `events` (a scan of the lines, nothing parsed or kept)."""
    quoted = tuple(f'"{e}"' for e in events)
    for path in journal_paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            if any(q in line for line in f for q in quoted):
                return True
    return False


def metadata(journal_paths: list[Path]) -> dict[str, Any]:
    return check_metadata(load_journals(journal_paths))


def broker_reads(journal_paths: list[Path], history: Path) -> dict[str, Any]:
    return check_broker_reads(load_history_tolerant(history), load_journals(journal_paths))


def fencing(journal_paths: list[Path], history: Path, session_timeout_ms: float) -> dict[str, Any]:
    return check_fencing(load_journals(journal_paths), load_history_tolerant(history),
                         session_timeout_ms=session_timeout_ms)
