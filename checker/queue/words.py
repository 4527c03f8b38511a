"""Queue ops said in Kafka's words, for explanations and the report: "p3 send 17 to q-1 → offset 5"."""

from __future__ import annotations

from typing import Any

from kraftlab.checker.history import Op, short


def records_span(records: list[Any]) -> str:
    """"offsets 3..9 (7 records)" of a poll's [offset, value] list."""
    if not records:
        return "no records"
    offsets = [int(r[0]) for r in records]
    n = len(offsets)
    return f"offset {offsets[0]}" if n == 1 else f"offsets {min(offsets)}..{max(offsets)} ({n} records)"


def describe(op: Op) -> str:
    """The op's words without process and status (a history op of the queue workload)."""
    v, out = op.value, op.output
    if op.f == "send" and isinstance(v, dict):
        at = f" → offset {out['offset']}" if isinstance(out, dict) and out.get("offset") is not None else ""
        return f"send {short(v['value'], 30)} to {v['key']}{at}"
    if op.f == "poll" and isinstance(v, dict):
        kind = "final read" if v.get("final") else "poll"
        positions = v.get("positions") or {}
        read = (out or {}).get("records") or {} if isinstance(out, dict) else {}
        parts = [f"{k} from {p}" + (f" → {records_span(read.get(k) or [])}" if op.status == "ok" else "")
                 for k, p in sorted(positions.items())]
        return f"{kind} " + ("; ".join(parts) if parts else "(nothing assigned)")
    if op.f == "assign" and isinstance(v, dict):
        return f"assign {', '.join(map(str, v.get('keys') or []))}"
    raise ValueError("not a queue op of the suite's shape")


def op_ref(op: Op) -> dict[str, Any]:
    """An op as anomalies name it in results.json (`label`, the history lines, process, status)."""
    return {"process": op.process, "f": op.f, "status": op.status, "label": op.label(describe),
            "invoke_line": op.call_line, "complete_line": op.ret_line or None, "time": op.call_time}
