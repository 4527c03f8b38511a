"""A correct simulated register producing Jepsen-style histories, and injected anomalies.

Processes invoke reads and writes of fresh values; each op takes effect atomically at a point
between its invocation and its completion; an op may crash (`info`) before or after taking
effect, retiring its process. `inject` appends a quiet sequential tail that shows one anomaly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Event, History


@dataclass
class SimRegister:
    seed: int
    processes: int = 3
    crash_p: float = 0.05
    value: Any = None
    events: list[Event] = field(default_factory=list)
    next_value: int = 1
    next_proc: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.next_proc = self.processes

    def emit(self, p: int, typ: str, f: str, v: Any, error: Any = None) -> None:
        self.events.append(Event(len(self.events), p, typ, f, v, time=len(self.events) * 1000,
                                 error=error, line=len(self.events) + 1))

    def fresh(self) -> int:
        v = self.next_value
        self.next_value += 1
        return v

    def run(self, steps: int) -> SimRegister:
        """Random concurrent ops on a correct register."""
        procs = list(range(self.processes))
        active: dict[int, list[Any]] = {}  # p → [f, arg, applied, result]
        for _ in range(steps):
            p = self.rng.choice(procs)
            if p not in active:
                if self.rng.random() < 0.5:
                    active[p] = ["read", None, False, None]
                    self.emit(p, "invoke", "read", None)
                else:
                    v = self.fresh()
                    active[p] = ["write", v, False, None]
                    self.emit(p, "invoke", "write", v)
                continue
            op = active[p]
            if not op[2]:
                op[2] = True
                if op[0] == "read":
                    op[3] = self.value
                else:
                    self.value = op[1]
                continue
            del active[p]
            if self.rng.random() < self.crash_p:
                self.emit(p, "info", op[0], op[1], "timeout")
                procs[procs.index(p)] = self.next_proc
                self.next_proc += 1
            else:
                self.emit(p, "ok", op[0], op[3] if op[0] == "read" else op[1])
        for p, op in list(active.items()):  # finish everything still running
            if not op[2] and op[0] == "write":
                self.value = op[1]
            self.emit(p, "ok", op[0], (self.value if not op[2] else op[3]) if op[0] == "read" else op[1])
        return self

    def seq(self, f: str, value: Any, result: Any = None) -> None:
        p = 0 if f == "write" else 1
        p = p + self.next_proc
        self.emit(p, "invoke", f, value if f == "write" else None)
        self.emit(p, "ok", f, value if f == "write" else result)

    def history(self) -> History:
        return History(list(self.events))


ANOMALIES = ("lost-write", "stale-read", "duplicate-apply")


def inject(sim: SimRegister, anomaly: str) -> SimRegister:
    """Append a sequential tail showing `anomaly` (the register's real state is `sim.value`)."""
    old = sim.fresh()
    sim.seq("write", old)
    sim.seq("read", None, old)
    new = sim.fresh()
    sim.seq("write", new)
    if anomaly == "lost-write":  # the write was acknowledged but never took effect
        sim.seq("read", None, old)
        sim.seq("read", None, old)
    elif anomaly == "stale-read":  # one read returns the replaced value; the new one is still there
        sim.seq("read", None, new)
        sim.seq("read", None, old)
        sim.seq("read", None, new)
    elif anomaly == "duplicate-apply":  # the old write is applied a second time and sticks
        sim.seq("read", None, new)
        sim.seq("read", None, old)
        sim.seq("read", None, old)
    else:
        raise ValueError(anomaly)
    return sim
