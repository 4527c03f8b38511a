"""A simulated broker registry for tests: concurrent clients whose ops take effect at a random
instant between invocation and completion (so the history is linearizable by construction),
some crashing (`info`), with an optional injected bug. Also a small builder of hand-made histories."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Event, History

BUGS = ("epoch-goes-back", "stale-heartbeat-accepted", "lost-unregister", "stale-read")


def history(rows: list[tuple[Any, ...]]) -> History:
    """Rows of (process, type, f, value[, error]) in real-time order; each op's rows carry a
    workload field of `registry`."""
    return History([Event(i, r[0], r[1], r[2], r[3], i * 10, error=r[4] if len(r) > 4 else None, line=i + 1,
                          extra={"workload": "registry"}) for i, r in enumerate(rows)])


@dataclass
class _Pending:
    process: int
    f: str
    value: Any
    applied: bool = False
    result: tuple[str, Any, str | None] | None = None  # type, value, error


@dataclass
class RegistrySim:
    seed: int
    bug: str | None = None
    brokers: int = 3
    processes: int = 3
    ops: int = 30
    crash_rate: float = 0.1
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def run(self) -> History:
        rng = random.Random(self.seed)
        offset = 0
        regs: dict[int, tuple[int, str]] = {}
        old: dict[int, int] = {}  # a broker's previous epoch (for the stale-heartbeat bug)
        snapshots: list[dict[str, int]] = [{}]
        known: dict[int, int] = {}  # what clients believe each broker's epoch is
        free = list(range(self.processes))
        pending: list[_Pending] = []
        started = 0
        incarnation = 0
        while started < self.ops or pending:
            choice = rng.random()
            if free and started < self.ops and (choice < 0.4 or not pending):
                p = free.pop(rng.randrange(len(free)))
                b = rng.randrange(1, self.brokers + 1)
                kind = rng.random()
                if kind < 0.3:
                    incarnation += 1
                    op = _Pending(p, "register", {"broker": b, "incarnation": f"i{incarnation}"})
                elif kind < 0.65:
                    e = known.get(b, 0) if rng.random() < 0.8 else rng.choice([*known.values(), 1])
                    op = _Pending(p, "heartbeat", {"broker": b, "epoch": e})
                elif kind < 0.85:
                    op = _Pending(p, "unregister", {"broker": b})
                else:
                    op = _Pending(p, "read", None)
                pending.append(op)
                started += 1
                self.rows.append((p, "invoke", op.f, op.value))
                continue
            op = rng.choice(pending)
            if not op.applied:
                op.applied = True
                if rng.random() < self.crash_rate / 2:  # crashed before taking effect
                    op.result = None
                    op.applied = True
                    self._crash(op, pending, free)
                    continue
                offset, op.result = self._apply(op, rng, regs, old, snapshots, offset)
                snapshots.append({str(b): e for b, (e, _) in regs.items()})
                continue
            if rng.random() < self.crash_rate / 2:
                self._crash(op, pending, free)
                continue
            assert op.result is not None
            typ, out, err = op.result
            if op.f == "register" and typ == "ok":
                known[op.value["broker"]] = out["epoch"]
            self.rows.append((op.process, typ, op.f, out, err) if err else (op.process, typ, op.f, out))
            pending.remove(op)
            free.append(op.process)
        return history(self.rows)

    def _crash(self, op: _Pending, pending: list[_Pending], free: list[int]) -> None:
        self.rows.append((op.process, "info", op.f, op.value))
        pending.remove(op)
        free.append(op.process + self.processes * 100)  # the process is retired

    def _apply(self, op: _Pending, rng: random.Random, regs: dict[int, tuple[int, str]], old: dict[int, int],
               snapshots: list[dict[str, int]], offset: int) -> tuple[int, tuple[str, Any, str | None]]:
        v = op.value
        if op.f == "read":
            snap = snapshots[-1] if self.bug != "stale-read" or len(snapshots) < 3 else snapshots[-3]
            return offset, ("ok", {"brokers": dict(snap)}, None)
        b = v["broker"]
        if op.f == "register":
            cur = regs.get(b)
            if cur is not None and cur[1] != v["incarnation"] and rng.random() < 0.5:
                return offset, ("fail", v, "DUPLICATE_BROKER_REGISTRATION")
            offset += rng.randint(1, 3)
            epoch = offset
            if self.bug == "epoch-goes-back" and offset > 6 and rng.random() < 0.5:
                epoch = offset - 6
            if cur is not None:
                old[b] = cur[0]
            regs[b] = (epoch, v["incarnation"])
            return offset, ("ok", {"broker": b, "epoch": epoch}, None)
        if op.f == "heartbeat":
            cur = regs.get(b)
            if cur is not None and cur[0] == v["epoch"]:
                return offset, ("ok", v, None)
            if self.bug == "stale-heartbeat-accepted" and old.get(b) == v["epoch"]:
                return offset, ("ok", v, None)
            return offset, ("fail", v, "STALE_BROKER_EPOCH")
        if b in regs:
            if self.bug != "lost-unregister" or rng.random() < 0.5:
                del regs[b]
            return offset, ("ok", v, None)
        return offset, ("fail", v, "BROKER_ID_NOT_REGISTERED")
