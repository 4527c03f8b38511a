"""What a node does when its disk fails under it (the `disk-errors` nemesis, on the disk-fault
filesystem): it must stop or refuse, never serve or acknowledge what it failed to write — as Kafka
halts when its metadata log directory fails.

The evidence is not the node's word: the filesystem itself lists the errors it returned (each
`stop-disk-errors` completion's `injected`: per node, `op`, `path`, `errno` and `rmono`, the host's
unskewed monotonic clock in ns), and the node's journal carries the same clock on every line
(`rmono`; one kernel for all: `Journals.shared_clock`).

- StopsOnWriteError: once a write, fsync or create in its metadata directory failed, the node's
  process journals nothing more after a grace of `GRACE_MS` — no append, high-water mark, vote,
  role change or decision — except its own notice that it stops (`log_dir_failed`, `fatal`,
  `corruption`).
- StopsOnReadError: the same once a read of its metadata directory failed (EIO): a node that cannot
  read its log must not answer from it (Kafka takes the directory offline; the metadata log's
  directory halts the node).

A restart begins a new process life, which may serve again: a life begins at its
  `launch` (journalled before the process touches its storage, so an error met while it opens and
  recovers its log is its own), or, in journals without one, at `recovery` / `start`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kraftlab.checker.history import History
from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["StopsOnWriteError", "StopsOnReadError"]
WRITE_OPS = frozenset({"write", "fsync", "create"})
READ_OPS = frozenset({"read"})


def _invariant(op: Any) -> str | None:
    return "StopsOnWriteError" if op in WRITE_OPS else "StopsOnReadError" if op in READ_OPS else None
GRACE_MS = 1000
"""How long a failing process may still journal what its last step did before it exits."""
STOPPING = frozenset({"log_dir_failed", "fatal", "corruption"})


def injected_errors(history: History) -> list[tuple[str, dict[str, Any]]]:
    """(node name, error) for every error the filesystems say they returned, oldest first."""
    out: list[tuple[str, dict[str, Any]]] = []
    for e in history.events:
        if e.process == "nemesis" and e.f == "stop-disk-errors" and e.type in ("ok", "info") \
                and isinstance(e.value, dict):
            for node, errors in (e.value.get("injected") or {}).items():
                out += [(str(node), dict(err)) for err in errors]
    return sorted(out, key=lambda ne: int(ne[1].get("rmono", 0)))


def lives(entries: Iterable[Entry]) -> list[list[Entry]]:
    """A node's journal split into process lives: each begins at `launch`, or at a `recovery` (or a
    `start`) that no `launch` (or `recovery`) of the same life announced."""
    out: list[list[Entry]] = []
    seen: set[str] = set()  # the life-opening events the current life has had
    for e in entries:
        if e.ev == "launch":
            opens = True
        elif e.ev == "recovery":
            opens = not ("launch" in seen and not seen & {"recovery", "start"})
        elif e.ev == "start":
            opens = not (seen & {"launch", "recovery"} and "start" not in seen)
        else:
            opens = False
        if not out or opens:
            out.append([])
            seen = set()
        out[-1].append(e)
        if e.ev in ("launch", "recovery", "start"):
            seen.add(e.ev)
    return out


def _node_id(name: str, node_ids: Mapping[str, int]) -> int | None:
    if name in node_ids:
        return node_ids[name]
    digits = re.sub(r"\D", "", name)
    return int(digits) if digits else None


def check_disk_errors(journals: Journals, history: History, node_ids: Mapping[str, int]) -> dict[str, Any]:
    errors = [(n, err) for n, err in injected_errors(history) if _invariant(err.get("op")) is not None]
    judged = sorted({inv for _, err in errors if (inv := _invariant(err.get("op"))) is not None},
                    key=INVARIANTS.index)
    not_checked = {"StopsOnWriteError": "no write, fsync or create failed on any node's disk",
                   "StopsOnReadError": "no read failed on any node's disk"}
    not_checked = {k: v for k, v in not_checked.items() if k not in judged}
    if not errors:
        return result([], [], not_checked)
    if not journals.shared_clock:
        return result([], [], {inv: "the journals do not share one monotonic clock (rmono), so they cannot be "
                                    "ordered against the filesystems' errors" for inv in INVARIANTS})
    by_node = {nid: lives(entries) for nid, entries in journals.by_node.items()}
    vs: list[Violation] = []
    reported: set[tuple[int, int]] = set()  # (node, life): one report per process life
    for name, err in errors:
        nid = _node_id(name, node_ids)
        t = int(err.get("rmono", 0))
        life_index = None
        for i, life in enumerate(by_node.get(nid, []) if nid is not None else []):
            first = life[0].rmono
            if first is not None and first <= t:
                life_index = i
        if nid is None or life_index is None or (nid, life_index) in reported:
            continue
        life = by_node[nid][life_index]
        later = next((e for e in life if e.rmono is not None and e.rmono > t + GRACE_MS * 1_000_000
                      and e.ev not in STOPPING), None)
        if later is None:
            continue
        reported.add((nid, life_index))
        before = [e for e in life if e.rmono is not None and e.rmono <= t]
        went_on_ms = (int(later.rmono or 0) - t) / 1e6
        what = "serve from a log it cannot read" if err.get("op") in READ_OPS else \
            "serve or acknowledge what it never wrote"
        vs.append(Violation(str(_invariant(err.get("op"))), (
            f"node {nid} ({name}): its disk failed a {err.get('op')} of {err.get('path')} with {err.get('errno')}, "
            f"and the same process went on: it journalled `{later.ev}` {went_on_ms:.0f} ms later. A node whose "
            f"metadata directory fails must stop (Kafka halts), or it may {what}"),
            ([before[-1]] if before else []) + [later],
            before=f"{err.get('op')} {err.get('path')}: {err.get('errno')}", after=f"{later.ev} at {later.where()}"))
    stats = {"write_errors": sum(1 for _, e in errors if e.get("op") in WRITE_OPS),
             "read_errors": sum(1 for _, e in errors if e.get("op") in READ_OPS), "nodes": len({n for n, _ in errors})}
    return result(vs, judged, not_checked, stats=stats)
