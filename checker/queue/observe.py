"""What a queue history says happened: the sends and the polls, per partition, in one shape.

Two history shapes are read (docs/workload-ops.md, "queue"):

- the suite's own: `send` {"key", "value"} → {"key", "value", "offset"}; `poll` {"positions": {key:
  fetch offset}[, "final": true]} → {"records": {key: [[offset, value], ...]}, "high_water_marks":
  {key: hw}}; `assign` {"keys": [...]} (the consumer's new assignment);
- Jepsen's Kafka workload (jepsen.tests.kafka): `send`/`poll`/`txn` ops whose value is a list of
  micro-ops, `["send", k, v]` completed as `["send", k, [offset, v]]` and `["poll"]` completed as
  `["poll", {k: [[offset, v], ...]}]`; `assign`/`subscribe` with a list of keys.

A key names one partition (the suite writes Kafka's `topic-partition`); keys are compared as
strings, since JSON object keys are strings. Where a poll's invocation does not record the fetch
positions it started from (Jepsen's histories), the position of a key is the offset after the last
record the same process polled from it, forgotten when the process assigns or subscribes anew.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import History, Op, pair_ops

WORKLOAD = "queue"


def value_id(v: Any) -> Hashable:
    """A record value as a dict key (JSON structures by their canonical text)."""
    return v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v, sort_keys=True)


@dataclass(slots=True)
class Send:
    """One send of `value` to partition `key`; `offset` is known when the send was acknowledged."""

    op: Op
    key: str
    value: Hashable
    offset: int | None


@dataclass(slots=True)
class Poll:
    """One completed poll: the records it returned per partition, where it started fetching each
    partition (None: unknown), and — for a final read — the high-water marks it read up to."""

    op: Op
    records: dict[str, list[tuple[int, Hashable]]]
    positions: dict[str, int | None]
    final: bool = False
    high_water_marks: dict[str, int] = field(default_factory=dict)


@dataclass
class Observations:
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    """Completed (`ok`) polls only: a poll whose outcome is unknown observed nothing."""
    notes: list[str] = field(default_factory=list)


class QueueShapeError(ValueError):
    """An op of the queue workload that is neither shape; names the history line."""


def observe(history: History | Iterable[Op]) -> Observations:
    """The sends and polls of a queue history (events or already paired ops), in invocation order."""
    ops = pair_ops(history) if isinstance(history, History) else list(history)
    obs = Observations()
    last_read: dict[Any, dict[str, int]] = {}  # process → key → offset after its last polled record
    for op in sorted(ops, key=lambda o: o.call):
        try:
            if isinstance(op.value, list):
                _jepsen(op, obs, last_read)
            else:
                _ours(op, obs, last_read)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise QueueShapeError(f"history line {op.call_line}: {op.f} is not a queue op: {exc}") from None
    return obs


def _ours(op: Op, obs: Observations, last_read: dict[Any, dict[str, int]]) -> None:
    if op.f == "send":
        out = op.output if op.status == "ok" and isinstance(op.output, dict) else {}
        offset = out.get("offset")
        obs.sends.append(Send(op, str(op.value["key"]), value_id(op.value["value"]),
                              None if offset is None else int(offset)))
    elif op.f == "poll":
        if op.status != "ok":
            return
        v = op.value or {}
        records = {str(k): [(int(o), value_id(x)) for o, x in rs] for k, rs in (op.output.get("records") or {}).items()}
        recorded = {str(k): (None if p is None else int(p)) for k, p in (v.get("positions") or {}).items()}
        _add_poll(obs, op, records, recorded, last_read, bool(v.get("final")),
                  {str(k): int(h) for k, h in (op.output.get("high_water_marks") or {}).items()})
    elif op.f in ("assign", "subscribe"):
        last_read.pop(op.process, None)


def _jepsen(op: Op, obs: Observations, last_read: dict[Any, dict[str, int]]) -> None:
    if op.f in ("assign", "subscribe"):
        last_read.pop(op.process, None)
        return
    done = op.output if op.status in ("ok", "info") and isinstance(op.output, list) else None
    mops = done if done is not None and len(done) == len(op.value) else op.value
    records: dict[str, list[tuple[int, Hashable]]] = {}
    for mop in mops:
        if mop[0] == "send":
            result = mop[2]
            if done is not None and isinstance(result, list) and len(result) == 2:
                offset, value = result
            else:
                offset, value = None, result
            obs.sends.append(Send(op, str(mop[1]), value_id(value),
                                  None if offset is None or op.status != "ok" else int(offset)))
        elif mop[0] == "poll" and op.status == "ok" and len(mop) > 1:
            for k, rs in (mop[1] or {}).items():
                records.setdefault(str(k), []).extend((int(o), value_id(x)) for o, x in rs)
    if records:
        _add_poll(obs, op, records, {}, last_read, False, {})


def _add_poll(obs: Observations, op: Op, records: dict[str, list[tuple[int, Hashable]]],
              recorded: dict[str, int | None], last_read: dict[Any, dict[str, int]], final: bool,
              hws: dict[str, int]) -> None:
    mine = last_read.setdefault(op.process, {})
    positions: dict[str, int | None] = {}
    for k in set(records) | set(recorded):
        positions[k] = recorded[k] if k in recorded else mine.get(k)
    for k, rs in records.items():
        if rs:
            mine[k] = max(o for o, _ in rs) + 1
    for k, p in recorded.items():
        if not records.get(k) and p is not None:
            mine[k] = p
    obs.polls.append(Poll(op, records, positions, final, hws))
