"""Checking a run directory: the history and the node journals → `results.json`.

The checkers, composed (false > unknown > true; a crash is unknown):
- `linearizable-<workload>`: each workload's ops (split by their `workload` field) against its
  model — the part `checker.judged` picks: the writes and the final reads taken after heal and
  recovery, not the eventually consistent reads brokers served during the run (those go to
  `broker_reads`).
- `queue`: the queue workload's sends and polls (lost, duplicated, reordered, skipped records:
  checker.queue), the whole history's.
- `raft`: the Raft invariants over every node's journal.
- `fencing`: the fencing invariants over the journals and the whole history.
- `availability` (when the test states it, `--availability S`): a majority-side client succeeds
  within S seconds of each fault that leaves a majority.
- `metadata`: the committed metadata log decoded with Kafka's schemas and replayed with KIP-631's
  rules, and every node's image compared with that replay (checker.metadata).
- `broker_reads`: what brokers answered during the run (topic describes and lists, partition reads)
  shows a committed prefix of the metadata log, never goes back within a broker's life, and shows a
  write the broker acknowledged (checker.broker_reads).
- `forwarding`: a broker never re-sends a forwarded write that reached the controller (KIP-590).
- `quorum`: the replica progress a leader reports (DescribeQuorum) was made by those replicas.
- `authorization` (when brokers journal authorization decisions: an authorizer is configured): each
  allowed decision rests on a committed ACL, never one removed past the broker's self-fencing bound.
- `recovery`: whether the cluster came back after the final heal (`recovery.json`, written by the
  runner's recovery watch), naming each node that did not and its last journalled state.
The `coverage` section (checker.coverage) says what the run exercised: elections, failovers,
fences, ISR changes, truncations, snapshots, and client outcomes per fault kind.
Anomaly pictures land under `<run>/checker/`, where the report picks them up.

Each checker runs in its own process (checker.isolate) under a hard wall-clock limit and an
address-space limit: past either it is killed (with any workers it forked) and reported
`unknown`, naming the checker and the limit. The linearizability search's own budget ends it
cleanly well before that; the process limit is the backstop for every checker.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from kraftlab.checker.availability import check_availability
from kraftlab.checker.compose import CheckerFn, compose
from kraftlab.checker.coverage import coverage
from kraftlab.checker.diskerrors import check_disk_errors
from kraftlab.checker.history import load_jsonl_tolerant
from kraftlab.checker.journal import load_journals
from kraftlab.checker.judged import linearizable_part
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.recovery import check_recovery
from kraftlab.checker.run import (
    journal_checks,
    linearizable_with_anomalies,
    split_by_workload,
    stored_log_checks,
    workload_checks,
)
from kraftlab.nemesis.packages import WINDOWS
from kraftlab.recovery import RECOVERY_FILE
from kraftlab.store import RunDir, write_json

CHECK_SECONDS = 900.0
"""Hard wall-clock limit of each checker process."""
CHECK_MEMORY_BYTES = 4_000_000_000
"""Address-space limit of each checker process (RLIMIT_AS)."""


def check_run(run: RunDir, *, session_timeout_ms: float = 9000.0, budget: Budget | None = None,
              timeout: float | None = CHECK_SECONDS, memory_bytes: int | None = CHECK_MEMORY_BYTES) -> dict[str, Any]:
    """Check a run directory, write `results.json`, and return it."""
    history, notes = load_jsonl_tolerant(run.history)
    journal_paths = list(run.journals().values())
    out_dir = run.path / "checker"
    out_dir.mkdir(exist_ok=True)
    budget = budget or Budget(seconds=300.0)
    lin = linearizable_part(history)
    checkers: dict[str, CheckerFn] = workload_checks(history, out_dir)
    for w, (model, part) in split_by_workload(lin).items():
        tag = "linearizable" + (f"-{w}" if w else "")
        checkers[tag] = functools.partial(linearizable_with_anomalies, part, model, budget=budget,
                                          out_dir=out_dir, tag=tag)
    journals = load_journals(journal_paths) if journal_paths else None
    if journals is not None:
        checkers |= journal_checks(journals, history, session_timeout_ms) | stored_log_checks(journal_paths)
    if journals is not None and any(e.f == "stop-disk-errors" for e in history.events if e.process == "nemesis"):
        checkers["disk-errors"] = functools.partial(check_disk_errors, journals, history, _node_ids(run))
    recovery_path = run.path / RECOVERY_FILE
    if recovery_path.is_file():
        recovery = json.loads(recovery_path.read_text(encoding="utf-8"))
        checkers["recovery"] = functools.partial(check_recovery, recovery, journals, _node_ids(run))
    test = run.read_test()
    if test.get("availability"):
        roles = test.get("nodes_roles") or {}
        checkers["availability"] = functools.partial(
            check_availability, history, WINDOWS, float(test["availability"]), sorted(roles),
            sorted(n for n, r in roles.items() if "controller" in r))
    results = compose(checkers, timeout=timeout, memory_bytes=memory_bytes)
    if not journal_paths:
        notes.append("no node journals in the run directory: Raft and fencing invariants were not checked")
        if results.get("valid") is True:
            results["valid"] = "unknown"
    if notes:
        results.setdefault("notes", []).extend(notes)
    results["history"] = {"events": len(history.events), "linearizable_events": len(lin.events)}
    if test.get("topology"):  # the cluster judged, and what of it the seed drew (kraftlab.topology_swarm)
        results["cluster"] = {"topology": test["topology"], "drawn": test.get("drawn") or {}}
    try:
        results["coverage"] = coverage(journals, history, WINDOWS, _node_ids(run).values(), session_timeout_ms)
    except Exception as exc:  # coverage describes the run; it never decides or breaks the verdict
        results.setdefault("notes", []).append(f"coverage not computed: {type(exc).__name__}: {exc}")
    write_json(run.results, json.loads(json.dumps(results, default=str)))
    return results


def _node_ids(run: RunDir) -> dict[str, int]:
    """Node name → node id, from test.json (runs before node_ids were recorded: the digits of the name)."""
    try:
        test = run.read_test()
    except (OSError, ValueError):
        test = {}
    ids = test.get("node_ids")
    if isinstance(ids, dict):
        return {str(k): int(v) for k, v in ids.items()}
    names = test.get("nodes_roles") or {}
    return {n: int(d) for n in names if (d := "".join(c for c in n if c.isdigit()))}


def exit_code(valid: Any) -> int:
    return 0 if valid is True else 1 if valid is False else 2
