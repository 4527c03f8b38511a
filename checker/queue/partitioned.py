"""The queue checker one partition at a time, for histories too large for one process (Spark).

Every queue rule but one is about a single partition, so a history splits by key: each send goes
to its partition, each poll is cut into one poll per partition it fetched (its positions, records
and high-water marks of that partition only), and assigns go to every partition (they reset a
process's inferred positions in Jepsen's histories). Each part is judged by `check_queue` on its
own — anywhere: `check_partitioned(ops, map_parts=...)` takes the mapping function, e.g. a Spark
RDD's — and `merge` puts the verdicts together. The one rule that spans partitions is Duplicate
across partitions: a value sent to one partition and read from another; split, that read is an
UnexpectedValue of the other partition (a value never sent there), so the verdict is the same.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.queue.check import check_queue
from kraftlab.checker.rules import UNKNOWN

RESETS = ("assign", "subscribe")
SHOWN = 200


def _mine(d: Any, key: str) -> dict[str, Any] | None:
    if not isinstance(d, Mapping):
        return None
    return {k: v for k, v in d.items() if str(k) == key}


def _ours_keys(op: Op) -> set[str]:
    v = op.value if isinstance(op.value, Mapping) else {}
    out = op.output if isinstance(op.output, Mapping) else {}
    if op.f == "send":
        return {str(v["key"])}
    if op.f == "poll":
        return {str(k) for part in (v.get("positions"), out.get("records"), out.get("high_water_marks"))
                if isinstance(part, Mapping) for k in part}
    return set()


def _ours_part(op: Op, key: str) -> Op:
    if op.f != "poll":
        return op
    v = dict(op.value or {})
    if "positions" in v:
        v["positions"] = _mine(v["positions"], key)
    out = op.output
    if isinstance(out, Mapping):
        out = {**out, **{f: _mine(out[f], key) for f in ("records", "high_water_marks") if f in out}}
    return dataclasses.replace(op, value=v, output=out)


def _mop_key(mop: Any, done: Any) -> set[str]:
    if mop[0] == "send":
        return {str(mop[1])}
    if mop[0] == "poll" and isinstance(done, list | tuple) and len(done) > 1 and isinstance(done[1], Mapping):
        return {str(k) for k in done[1]}
    return set()


def _jepsen_parts(op: Op) -> dict[str, Op]:
    done = op.output if isinstance(op.output, list) and len(op.output) == len(op.value) else None
    keys: dict[str, list[int]] = {}
    for i, mop in enumerate(op.value):
        for k in _mop_key(mop, done[i] if done is not None else mop):
            keys.setdefault(k, []).append(i)
    parts = {}
    for k, idx in keys.items():
        value = [op.value[i] for i in idx]
        output: Any = op.output
        if done is not None:
            output = [[m[0], _mine(m[1], k)] if m[0] == "poll" else m for m in (done[i] for i in idx)]
        parts[k] = dataclasses.replace(op, value=value, output=output)
    return parts


def split(ops: Iterable[Op]) -> dict[str, list[Op]]:
    """Partition key → its part of the queue history (paired ops, in the order given)."""
    ops = list(ops)
    parts: dict[str, list[Op]] = {}
    resets: list[tuple[int, Op]] = []
    for i, op in enumerate(ops):
        if op.f in RESETS:
            resets.append((i, op))
            continue
        if isinstance(op.value, list):
            for k, piece in _jepsen_parts(op).items():
                parts.setdefault(k, []).append(piece)
        else:
            for k in _ours_keys(op):
                parts.setdefault(k, []).append(_ours_part(op, k))
    for ops_of_key in parts.values():  # each partition also sees every assign, in its place
        if resets:
            ops_of_key.extend(op for _, op in resets)
            ops_of_key.sort(key=lambda o: o.call)
    return parts


def poll_stats(ops: Iterable[Op]) -> dict[str, int]:
    """The whole history's poll counts (a poll of several partitions counted once)."""
    polls = [op for op in ops if op.f == "poll" and op.status == "ok" and isinstance(op.output, Mapping)]
    return {"completed": len(polls), "final_reads": sum(1 for p in polls if (p.value or {}).get("final")),
            "records": sum(len(rs) for p in polls for rs in (p.output.get("records") or {}).values())}


def merge(results: Mapping[str, Mapping[str, Any]], polls: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One verdict from the partitions' verdicts (false with any false, else unknown with any
    unknown, else true), their anomalies, notes, per-rule counts and stats."""
    keys = sorted(results)
    verdicts = [results[k]["valid"] for k in keys]
    anomalies = [a for k in keys for a in results[k].get("anomalies", [])]
    notes = [n for k in keys for n in results[k].get("notes", [])]
    rules: dict[str, dict[str, Any]] = {}
    for k in keys:
        for name, r in results[k].get("rules", {}).items():
            acc = rules.setdefault(name, {"valid": True, "violations": 0, "seconds": 0.0})
            if r["valid"] is False or acc["valid"] is False:
                acc["valid"] = False
            elif r["valid"] == UNKNOWN:
                acc["valid"] = UNKNOWN
            acc["violations"] += r.get("violations", 0)
            acc["seconds"] = round(acc["seconds"] + r.get("seconds", 0.0), 4)
    sends: Counter[str] = Counter()
    partitions: dict[str, Any] = {}
    for k in keys:
        st = results[k].get("stats", {})
        sends.update(st.get("sends", {}))
        partitions.update(st.get("partitions", {}))
    checked = [n for n, r in rules.items() if r["valid"] != UNKNOWN]
    out: dict[str, Any] = {"checked": checked, "rules": rules, "anomalies": anomalies[:SHOWN],
                           "stats": {"sends": dict(sends), "polls": dict(polls or {}), "partitions": partitions}}
    if False in verdicts:
        counts = Counter(r for k in keys for r, v in results[k].get("rules", {}).items() if v["valid"] is False)
        head = "; ".join(f"{name} ×{rules[name]['violations']}" for name in counts)
        first = anomalies[0]["explanation"] if anomalies else ""
        out["valid"], out["explanation"] = False, f"violated: {head}. First: {first}"
    elif UNKNOWN in verdicts or any(v is not True for v in verdicts):
        out["valid"] = UNKNOWN
        out["explanation"] = "unknown: " + "; ".join(
            f"{k}: {results[k].get('explanation', '')}" for k in keys if results[k]["valid"] is not True)
    else:
        out["valid"], out["explanation"] = True, f"all hold: {', '.join(checked)}"
    if notes:
        out["notes"] = notes
    pictures = [p for k in keys for p in results[k].get("pictures", [])]
    if pictures:
        out["pictures"] = pictures
    return out


PartCheck = Callable[[tuple[str, list[Op]]], tuple[str, dict[str, Any]]]


def check_part(item: tuple[str, list[Op]]) -> tuple[str, dict[str, Any]]:
    """One partition's verdict (a module-level function: it travels to Spark executors)."""
    key, ops = item
    return key, check_queue(ops)


def check_partitioned(history: History | Iterable[Op],
                      map_parts: Callable[[PartCheck, list[tuple[str, list[Op]]]], Iterable[tuple[str, dict[str, Any]]]]
                      | None = None) -> dict[str, Any]:
    """The queue verdict of a history judged partition by partition; `map_parts(check_part, items)`
    runs the parts (default: here, one after another)."""
    ops = pair_ops(history) if isinstance(history, History) else list(history)
    ops = [op for op in ops if op.process != "nemesis"]
    items = sorted(split(ops).items())
    if not items:
        return check_queue([])
    run = map_parts or (lambda fn, xs: map(fn, xs))
    return merge(dict(run(check_part, items)), poll_stats(ops))


__all__ = ["check_part", "check_partitioned", "merge", "split"]
