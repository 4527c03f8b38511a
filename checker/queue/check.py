"""check_queue: a queue history in, the verdict of every queue rule (checker.queue.rules) out.

The verdict is three-valued: false with any broken rule; unknown when nothing could break a rule
(no poll completed while sends were acknowledged) or when acknowledged records above every polled
offset were never looked for (their partition's final read did not complete); true otherwise.
`stats` counts what the data plane did: sends acknowledged, failed and unknown, polls, records
read, and a line per partition (the report draws it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kraftlab.checker.history import History, Op
from kraftlab.checker.queue.logs import QueueReplay, replay
from kraftlab.checker.queue.observe import observe
from kraftlab.checker.queue.rules import ALL_RULES, unseen_unjudged
from kraftlab.checker.rules import UNKNOWN, judge, select


def stats(rp: QueueReplay) -> dict[str, Any]:
    sends = Counter(s.op.status for s in rp.obs.sends)
    polls = [p for p in rp.obs.polls]
    partitions = {}
    for key, pl in sorted(rp.logs.items()):
        acked = [s for s in rp.obs.sends if s.key == key and s.op.status == "ok"]
        partitions[key] = {"acknowledged": len(acked), "polled_values": len(pl.polled),
                           "known_offsets": len(pl.known), "max_offset": pl.known[-1] if pl.known else None,
                           "final_read": pl.final_read is not None}
    return {"sends": {"acknowledged": sends.get("ok", 0), "failed": sends.get("fail", 0),
                      "unknown": sends.get("info", 0)},
            "polls": {"completed": len(polls), "final_reads": sum(1 for p in polls if p.final),
                      "records": sum(len(r) for p in polls for r in p.records.values())},
            "partitions": partitions}


def check_queue(history: History | Iterable[Op], out_dir: str | Path | None = None,
                only: Iterable[str] | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Judge a queue history (events or paired ops); with `out_dir`, draw each partition where a rule
    broke (checker.queue.picture)."""
    rp = replay(observe(history))
    res = judge(select(ALL_RULES, None if only is None else set(only)), rp, seconds=seconds, stats=stats(rp))
    notes: list[str] = []
    acked = res["stats"]["sends"]["acknowledged"]
    if acked and not res["stats"]["polls"]["completed"]:
        notes.append(f"{acked} sends were acknowledged but no poll completed: no record was ever read back")
    unjudged = unseen_unjudged(rp)
    if unjudged:
        notes.append("unseen not judged (no final read of the partition completed) for "
                     + ", ".join(f"{k}: {n} acknowledged record(s) above every polled offset"
                                 for k, n in sorted(unjudged.items())))
    if notes:
        res["notes"] = notes
        if res["valid"] is True:
            res["valid"] = UNKNOWN
            res["explanation"] = "unknown: " + "; ".join(notes) + f"; all hold: {', '.join(res['checked'])}"
    if out_dir is not None and res["valid"] is False:
        from kraftlab.checker.queue.picture import draw_partitions

        keys = sorted({a["key"] for a in res["anomalies"] if a.get("key") is not None})
        res["pictures"] = [str(p) for p in draw_partitions(rp, res["anomalies"], keys, Path(out_dir))]
    return res
