"""Checking a run directory: the history and the node journals → `results.json`.

The checkers, composed (false > unknown > true; a crash is unknown):
- `linearizable-<workload>`: each workload's ops (split by their `workload` field) against its
  model — the writes, and the FINAL reads taken after heal and recovery. Reads a broker served
  during the run are left out (`workloads.catalog.linearizable`): Kafka's broker metadata is
  eventually consistent, so a lagging broker is not a linearizability violation; those reads
  go to the fencing checker's staleness/monotonic checks instead. A final topic `list` is
  projected onto one `describe` per topic the history names, so the check stays per key
  (P-compositionality) instead of folding every topic into one search.
- `raft`: the Raft invariants over every node's journal.
- `fencing`: the fencing invariants over the journals and the whole history.
Anomaly pictures land under `<run>/checker/`, where the report picks them up.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from checker.compose import CheckerFn, compose
from checker.fencing import check_fencing
from checker.history import Event, History, parse_jsonl_line
from checker.journal import load_journals
from checker.linear.budget import Budget
from checker.raft import check_raft
from checker.run import linearizable_with_anomalies, split_by_workload
from kraftlab.store import RunDir, write_json
from workloads import catalog


def load_history(path: Path) -> tuple[History, list[str]]:
    """The run's history; a torn last line (the runner was killed mid-write) is dropped with a
    note, any other malformed line is an error naming file and line."""
    notes: list[str] = []
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = text.split("\n")
    events: list[Event] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(parse_jsonl_line(line, path, lineno, len(events)))
        except ValueError:
            if lineno == len(lines) and not text.endswith("\n"):
                notes.append(f"{path}:{lineno}: torn last line dropped (the runner was killed mid-write)")
                break
            raise
    return History(events, str(path), "jsonl"), notes


def _project_final_lists(events: list[Event]) -> list[Event]:
    """Replace each final topics `list` (invocation + completion) by one `describe` per topic."""
    topics = sorted({e.value["topic"] for e in events
                     if e.extra.get("workload") == "topics" and isinstance(e.value, dict) and "topic" in e.value})
    out: list[Event] = []
    pending: dict[Any, Event] = {}
    for e in events:
        if e.extra.get("workload") != "topics" or e.f != "list":
            out.append(e)
            continue
        if e.type == "invoke":
            pending[e.process] = e
            continue
        inv = pending.pop(e.process, None)
        if inv is None or e.type != "ok" or not isinstance(e.value, dict):
            continue  # an unknown-outcome read observes nothing
        listed = set(e.value.get("topics", []))
        for i, t in enumerate(topics):
            process = f"{inv.process}/{i}"  # distinct processes: the describes are concurrent
            value = {**inv.value, "topic": t}
            out.append(Event(inv.index, process, "invoke", "describe", value, inv.time, inv.node, None, inv.line,
                             dict(inv.extra)))
            out.append(Event(e.index, process, "ok", "describe", {"exists": t in listed}, e.time, e.node, None,
                             e.line, dict(e.extra)))
    return out


def linearizable_part(history: History) -> History:
    """What the linearizability checkers judge: client ops `workloads.catalog.linearizable`
    accepts, with final topic lists projected per topic."""
    keep: list[Event] = []
    accepted: dict[Any, bool] = {}
    for e in history.events:
        if e.process == "nemesis":
            continue
        if e.type == "invoke":
            accepted[e.process] = catalog.linearizable(e.to_json())
        if accepted.get(e.process, True):
            keep.append(e)
    return History(_project_final_lists(keep), history.source, history.format)


def check_run(run: RunDir, *, session_timeout_ms: float = 9000.0, budget: Budget | None = None,
              timeout: float | None = 900.0) -> dict[str, Any]:
    """Check a run directory, write `results.json`, and return it."""
    history, notes = load_history(run.history)
    journal_paths = list(run.journals().values())
    out_dir = run.path / "checker"
    out_dir.mkdir(exist_ok=True)
    budget = budget or Budget(seconds=300.0)
    lin = linearizable_part(history)
    checkers: dict[str, CheckerFn] = {}
    for w, (model, part) in split_by_workload(lin).items():
        tag = "linearizable" + (f"-{w}" if w else "")
        checkers[tag] = functools.partial(linearizable_with_anomalies, part, model, budget=budget,
                                          out_dir=out_dir, tag=tag)
    if journal_paths:
        journals = load_journals(journal_paths)
        checkers["raft"] = functools.partial(check_raft, journals)
        checkers["fencing"] = functools.partial(check_fencing, journals, history, session_timeout_ms)
    results = compose(checkers, timeout=timeout)
    if not journal_paths:
        notes.append("no node journals in the run directory: Raft and fencing invariants were not checked")
        if results.get("valid") is True:
            results["valid"] = "unknown"
    if notes:
        results.setdefault("notes", []).extend(notes)
    results["history"] = {"events": len(history.events), "linearizable_events": len(lin.events)}
    write_json(run.results, json.loads(json.dumps(results, default=str)))
    return results


def exit_code(valid: Any) -> int:
    return 0 if valid is True else 1 if valid is False else 2
