"""Check one run: a history and node journals in, results.json (docs/contracts.md) out.

The history is split by each op's `workload` field (docs/workload-ops.md) and each part is
checked for linearizability against its model (`model` overrides, for a history without that
field); an illegal part also gets its anomaly graph (named cycles, drawn). Journals get the
Raft and fencing invariants. Everything runs under checker.compose, each checker in its own
process: a hard time limit (by default the search budget plus `GRACE` seconds, for the
explanation, the pictures and the journal checkers) and an optional memory limit stop it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kraftlab.checker.authorization import check_authorization
from kraftlab.checker.broker_reads import check_broker_reads
from kraftlab.checker.compose import CheckerFn, compose
from kraftlab.checker.dataplane import EVENTS as DATAPLANE_EVENTS
from kraftlab.checker.dataplane import check_dataplane
from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.formats import read_history
from kraftlab.checker.forwarding import check_forwarding
from kraftlab.checker.graph import draw_anomaly, find_anomalies, public
from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.journal import Journals, load_journals
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linearizable import _safe, check_linearizable
from kraftlab.checker.metadata.check import check_metadata
from kraftlab.checker.models import build_model
from kraftlab.checker.queue import check_queue
from kraftlab.checker.quorum import check_quorum
from kraftlab.checker.raft import check_raft
from kraftlab.checker.raft.stored import STORED_LOG_FILE, check_stored_logs
from kraftlab.checker.scram import check_scram

GRACE = 120.0
"""Seconds a checker process gets beyond the linearizability budget before it is killed."""

WORKLOAD_MODELS = {"topics": "topics", "registry": "registry", "isr": "isr", "acl": "acl", "register": "cas-register"}
OWN_CHECKERS = frozenset({"queue", "scram"})
"""Workloads judged by a checker of their own (checker.queue; checker.scram, with the journals' bound),
not by a linearizability model; `queue` is also a `model` name that sends a whole external history
(Jepsen's Kafka workload) to its checker."""


def split_by_workload(history: History, model: str | None = None) -> dict[str, tuple[str, History]]:
    """Client ops by their `workload` field → (model name, sub-history); `model` overrides."""
    parts: dict[str, list[Any]] = {}
    for e in history.events:
        if e.process == "nemesis":
            continue
        w = e.extra.get("workload")
        if model is None and w in OWN_CHECKERS:
            continue
        parts.setdefault(str(w) if w is not None else "", []).append(e)
    out: dict[str, tuple[str, History]] = {}
    for w, events in parts.items():
        name = model or WORKLOAD_MODELS.get(w)
        if name is None:
            raise ValueError(f"no model for workload {w!r}: pass one (e.g. --model cas-register)")
        out[w] = (name, History(events, history.source, history.format))
    return out


def workload_checks(history: History, out_dir: Path | None = None, model: str | None = None) -> dict[str, CheckerFn]:
    """The checkers of the workloads judged by their own checker (OWN_CHECKERS), by result name: the
    queue's ops (or, with `model="queue"`, every client op: an external Jepsen Kafka history)."""
    if model not in (None, "queue"):
        return {}
    events = [e for e in history.events if e.process != "nemesis"
              and (model is not None or e.extra.get("workload") == "queue")]
    if not events:
        return {}
    part = History(events, history.source, history.format)
    return {"queue": functools.partial(check_queue, part, None if out_dir is None else out_dir / "queue")}


def linearizable_with_anomalies(history: History | list[Op], model_name: str, initial: Any = None,
                                nil_read_any: bool = False, budget: Budget | None = None, out_dir: Path | None = None,
                                tag: str = "linearizable") -> dict[str, Any]:
    """Linearizability of one workload's history (or its paired ops); when illegal, the named
    anomaly cycles near the failure are added (and drawn under `out_dir/tag` with the failure picture)."""
    model = build_model(model_name, initial, nil_read_any)
    pictures = None if out_dir is None else out_dir / tag
    res = check_linearizable(history, model, budget, out_dir=pictures)
    if res["valid"] is False:
        first = res["anomalies"][0] if res["anomalies"] else {}
        ops = history if isinstance(history, list) else pair_ops(history)
        found = find_anomalies(ops, model_name, initial, key=first.get("key"),
                               around=first.get("prefix_events"))
        for i, a in enumerate(found):
            if pictures is not None:
                name = f"cycle-{_safe(first.get('key'))}-{i}"
                a["pictures"] = [str(p) for p in draw_anomaly(a, pictures / name)]
            res["anomalies"].append(public(a))
        if found:
            res["explanation"] += "\nAnomaly: " + found[0]["type"] + ": " + found[0]["explanation"]
    return res


def journal_checks(journals: Journals, history: History | None, session_timeout_ms: float = 9000.0,
                   slack_ms: float = 3000.0) -> dict[str, CheckerFn]:
    """The checks of node journals, by result name: Raft, fencing, metadata, forwarding, quorum, the
    brokers' answers against the committed log (with the history),
    authorization when brokers journalled authorization decisions (an authorizer was configured), and
    the scram workload's logins (bounded by the brokers' journalled self-fencing timeout)."""
    checks: dict[str, CheckerFn] = {
        "raft": functools.partial(check_raft, journals),
        "fencing": functools.partial(check_fencing, journals, history, session_timeout_ms, slack_ms),
        "metadata": functools.partial(check_metadata, journals),
        "forwarding": functools.partial(check_forwarding, journals),
        "quorum": functools.partial(check_quorum, journals)}
    if any(e.ev == "authz" for e in journals.all()):
        checks["authorization"] = functools.partial(check_authorization, journals)
    if any(e.ev in DATAPLANE_EVENTS for e in journals.all()):
        checks["dataplane"] = functools.partial(check_dataplane, journals)
    if history is not None:
        checks["broker_reads"] = functools.partial(check_broker_reads, history, journals)
    if history is not None and any(e.extra.get("workload") == "scram" for e in history.events):
        checks["scram"] = functools.partial(check_scram, history, journals, session_timeout_ms)
    return checks


def stored_log_checks(journal_paths: Iterable[str | Path]) -> dict[str, CheckerFn]:
    """The `stored_log` check when the run collected the nodes' stored metadata logs beside their
    journals (`nodes/<n>/metadata-log.txt`)."""
    stored = [d / STORED_LOG_FILE for d in dict.fromkeys(Path(p).parent for p in journal_paths)
              if (d / STORED_LOG_FILE).is_file()]
    return {"stored_log": functools.partial(check_stored_logs, stored)} if stored else {}


def check_run(history_path: str | Path | None = None, journal_paths: list[str | Path] | None = None,
              model: str | None = None, out_dir: str | Path | None = None, budget: Budget | None = None,
              initial: Any = None, fmt: str | None = None, nil_read_any: bool = False,
              session_timeout_ms: float = 9000.0, slack_ms: float = 3000.0,
              timeout: float | None = None, memory_bytes: int | None = None) -> dict[str, Any]:
    """Check whatever is given; writes `results.json` under `out_dir` when given."""
    budget = budget or Budget()
    out = Path(out_dir) if out_dir is not None else None
    checkers: dict[str, CheckerFn] = {}
    history = read_history(history_path, fmt) if history_path is not None else None
    if history is not None:
        checkers |= workload_checks(history, out, model)
        for w, (name, part) in ({} if model in OWN_CHECKERS else split_by_workload(history, model)).items():
            tag = "linearizable" + (f"-{w}" if w else "")
            checkers[tag] = functools.partial(linearizable_with_anomalies, part, name, initial, nil_read_any, budget,
                                              out, tag)
    if journal_paths:
        checkers |= journal_checks(load_journals(journal_paths), history, session_timeout_ms, slack_ms)
        checkers |= stored_log_checks(journal_paths)
    results = compose(checkers, timeout if timeout is not None else budget.seconds + GRACE, memory_bytes=memory_bytes)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    return results
