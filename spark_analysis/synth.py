"""Large synthetic histories with known verdicts, for tests and benchmarks.

A history of the `kv` model (put/get of strings per key; docs: checker.models.Kv) in the
project's JSON Lines format, generated in rounds: each round `concurrency` processes invoke one
op each on a random key, the ops take effect in a random order (their linearization points lie
between every invocation and every completion of the round, so the history is linearizable by
construction), then complete in another random order. Some puts end `info` (they took effect or
not, at random; the process retires and a new one takes its place); a few nemesis partitions
open and close fault windows.

Planted anomalies (`plant=[op numbers]`): the get at (about) that op number returns the value
its key held before the last completed put, a value a completed later put had already replaced
before the get was invoked: a stale read, illegal whatever the crashed ops did, since every put
writes a unique value. `Synth.anomalies` says where each one is (key, history line).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

MODEL = "kv"


@dataclass
class Synth:
    """What was generated: its size and the planted anomalies (each {"key", "line", "op"})."""

    path: Path
    ops: int
    keys: int
    anomalies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "model": MODEL, "ops": self.ops, "keys": self.keys,
                "valid": self.valid, "anomalies": self.anomalies}


class _Writer:
    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        self.line = 0
        self.time = 0

    def event(self, process: Any, typ: str, f: str, value: Any, error: Any = None) -> int:
        self.time += 1000
        self.fh.write(json.dumps({"index": self.line, "time": self.time, "process": process, "type": typ, "f": f,
                                  "value": value, "node": None, "error": error}) + "\n")
        self.line += 1
        return self.line


def generate(path: str | Path, ops: int, keys: int = 10_000, concurrency: int = 8, seed: int = 0,
             plant: Sequence[int] = (), info_rate: float = 0.01, faults: int = 4) -> Synth:
    """Write a history of about `ops` client ops over `keys` keys; see the module docstring."""
    rng = random.Random(seed)
    out = Synth(Path(path), 0, keys)
    state: dict[int, str] = {}
    previous: dict[int, str] = {}  # the value each key held before its last completed put
    tainted: set[int] = set()  # keys with an `info` put: no stale read is planted on them
    procs = list(range(concurrency))
    next_proc = concurrency
    plant_at = sorted(plant)
    rounds = max(1, ops // concurrency)
    fault_rounds = {rounds * (i + 1) // (faults + 1): i for i in range(faults)}
    with open(path, "w", encoding="utf-8") as fh:
        w = _Writer(fh)
        for r in range(rounds):
            if r in fault_rounds:
                i = fault_rounds[r]
                f = "start-partition" if i % 2 == 0 else "stop-partition"
                w.event("nemesis", "info", f, {"grudge": {"n1": ["n2", "n3"]}} if i % 2 == 0 else None)
            batch: list[tuple[int, int, str, str | None]] = []
            planted: set[int] = set()
            for p in procs:
                k = rng.randrange(keys)
                while k in planted:
                    k = rng.randrange(keys)
                if (plant_at and out.ops >= plant_at[0] and k in previous and k not in tainted
                        and previous[k] != state.get(k) and all(b[1] != k for b in batch)):
                    plant_at.pop(0)
                    planted.add(k)
                    batch.append((p, k, "get", previous[k]))
                else:
                    batch.append((p, k, "put" if rng.random() < 0.5 else "get", None))
                out.ops += 1
            for p, k, f, _ in batch:
                w.event(p, "invoke", f, {"key": f"k{k}", "value": f"{out.ops}-{p}" if f == "put" else None})
            outputs = []
            for p, k, f, how in rng.sample(batch, len(batch)):
                if f == "get":
                    seen = state.get(k, "") if how is None else how
                    outputs.append((p, k, f, seen, None if how is None else "stale"))
                    continue
                crashed = rng.random() < info_rate
                if not crashed or rng.random() < 0.5:
                    previous[k], state[k] = state.get(k, ""), f"{out.ops}-{p}"
                outputs.append((p, k, f, f"{out.ops}-{p}", "info" if crashed else None))
            for p, k, f, v, how in rng.sample(outputs, len(outputs)):
                if how == "info":
                    w.event(p, "info", f, {"key": f"k{k}", "value": v}, "timeout")
                    procs[procs.index(p)] = next_proc
                    next_proc += 1
                    tainted.add(k)
                    continue
                line = w.event(p, "ok", f, {"key": f"k{k}", "value": v})
                if how == "stale":
                    out.anomalies.append({"key": f"k{k}", "line": line, "op": out.ops})
    return out
