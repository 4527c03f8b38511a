"""The error and delay rules the filesystem applies to chosen operations on chosen files.

A rule names the operations it hits (`read`, `write`, `fsync` — fsync also covers fdatasync and a
directory's fsync — `open`, `create`), the files by a glob on their path relative to the mount
(`*` matches across `/`: `*.log`, `*/quorum-state`), and either an errno (EIO or ENOSPC) returned
with a probability, or a delay added to every fsync it matches. Rules are drawn with the
filesystem's own seeded random source, so a run's faults are a function of its seed.
"""

from __future__ import annotations

import errno
import fnmatch
import random
import time
from dataclasses import dataclass
from typing import Any

OPERATIONS = ("read", "write", "fsync", "open", "create")
KEPT_ERRORS = 1000
"""Injected errors remembered for `take_errors` (the count goes on past it)."""
ERRNOS = {"EIO": errno.EIO, "ENOSPC": errno.ENOSPC}


class RuleError(ValueError):
    """A malformed rule (says which field and why)."""


@dataclass(frozen=True, slots=True)
class Rule:
    ops: frozenset[str]
    glob: str
    errno_name: str | None = None
    probability: float = 1.0
    delay_ms: int = 0

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        ops = raw.get("ops", ["read", "write", "fsync"])
        if isinstance(ops, str):
            ops = [o.strip() for o in ops.split(",") if o.strip()]
        unknown = sorted(set(ops) - set(OPERATIONS))
        if unknown or not ops:
            raise RuleError(f"ops {ops!r}: each one of {', '.join(OPERATIONS)}")
        name = raw.get("errno")
        delay = int(raw.get("delay_ms", 0))
        if name is None and delay <= 0:
            raise RuleError("a rule needs an errno (EIO, ENOSPC) or a positive delay_ms")
        if name is not None and name not in ERRNOS:
            raise RuleError(f"errno {name!r}: one of {', '.join(ERRNOS)}")
        p = float(raw.get("probability", 1.0))
        if not 0.0 < p <= 1.0:
            raise RuleError(f"probability {p}: in (0, 1]")
        return cls(frozenset(ops), str(raw.get("glob", "*")), name, p, delay)

    def matches(self, op: str, path: str) -> bool:
        return op in self.ops and fnmatch.fnmatchcase(path, self.glob)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ops": sorted(self.ops), "glob": self.glob, "probability": self.probability}
        if self.errno_name:
            out["errno"] = self.errno_name
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        return out


class FaultTable:
    def __init__(self, seed: int = 0) -> None:
        self.rules: list[Rule] = []
        self.rng = random.Random(seed)
        self.injected = 0
        self._errors: list[dict[str, Any]] = []

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)

    def clear(self, kind: str | None = None) -> int:
        """Remove the rules of one kind (`delay` or `fail`; None: every rule); how many went."""
        if kind not in (None, "delay", "fail"):
            raise RuleError(f"rules {kind!r}: delay or fail (or none named: every rule)")
        kept = [r for r in self.rules if kind is not None and (r.delay_ms > 0) != (kind == "delay")]
        gone = len(self.rules) - len(kept)
        self.rules[:] = kept
        return gone

    def error(self, op: str, path: str) -> int | None:
        """The errno this operation on `path` must fail with, or None."""
        for r in self.rules:
            if r.errno_name and r.matches(op, path) and self.rng.random() < r.probability:
                self.injected += 1
                if len(self._errors) < KEPT_ERRORS:
                    # the host's unskewed monotonic clock: the same one nodes journal as `rmono`
                    self._errors.append({"op": op, "path": path, "errno": r.errno_name,
                                         "rmono": time.monotonic_ns()})
                return ERRNOS[r.errno_name]
        return None

    def take_errors(self) -> list[dict[str, Any]]:
        """The errors injected since the last call (op, path, errno, `rmono`: when), oldest first."""
        taken, self._errors = self._errors, []
        return taken

    def delay_s(self, op: str, path: str) -> float:
        return sum(r.delay_ms for r in self.rules if r.delay_ms and r.matches(op, path)) / 1000.0
