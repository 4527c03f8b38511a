"""Rules judged over one shared replay, each alone: its own verdict, violation count, time and
anomalies in the result, so a rule can be tested, budgeted and reported by itself.

A journal checker replays the journals once into a read-only object (its "replay") and hands it
to each of its rules (`Rule.check`). A rule that crashes, or reports an invariant it does not
own, makes that rule `unknown` — never the others, never `valid`; a rule not reached within the
budget is `unknown` too. Violations found by other rules still make the whole result `false`.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from kraftlab.checker.invariant import Violation, result

UNKNOWN = "unknown"
SHOWN_PER_RULE = 50
"""Anomalies of one rule kept in the result (all are counted): a flood of one rule hides no other."""
SHOWN = 200

R_contra = TypeVar("R_contra", contravariant=True)


class Rule(Protocol[R_contra]):
    """One invariant (or a small group judged together) over a checker's replay."""

    @property
    def name(self) -> str:
        """The rule's name in results (and the invariant its violations carry)."""
        ...

    @property
    def invariants(self) -> tuple[str, ...]:
        """Every invariant name this rule may report (usually just its own name)."""
        ...

    def check(self, replay: R_contra) -> Iterable[Violation]: ...


class NamedRule:
    """Base for rules that report exactly their own name: `name` is the class name."""

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def invariants(self) -> tuple[str, ...]:
        return (self.name,)


R = TypeVar("R")


def select(rules: Sequence[Rule[R]], only: Collection[str] | None) -> list[Rule[R]]:
    """The rules named in `only` (all when None); an unknown name is an error, not a silent skip."""
    if only is None:
        return list(rules)
    known = {r.name for r in rules}
    missing = sorted(set(only) - known)
    if missing:
        raise ValueError(f"no such rule: {', '.join(missing)} (known: {', '.join(sorted(known))})")
    return [r for r in rules if r.name in only]


def judge(rules: Sequence[Rule[R]], replay: R, *, seconds: float | None = None,
          stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Judge each rule over `replay`; the result shape of checker.invariant.result plus `rules`:
    rule name → {valid, violations, seconds} (or {valid: unknown, explanation})."""
    t0 = time.monotonic()
    found: list[Violation] = []
    shown: list[Violation] = []
    per_rule: dict[str, dict[str, Any]] = {}
    for rule in rules:
        if seconds is not None and time.monotonic() - t0 > seconds:
            per_rule[rule.name] = {"valid": UNKNOWN, "explanation": (
                f"not judged: the rules before it used up the budget of {seconds:g} s")}
            continue
        start = time.monotonic()
        try:
            vs = list(rule.check(replay))
            foreign = sorted({v.invariant for v in vs} - set(rule.invariants))
            if foreign:
                raise AssertionError(f"rule {rule.name} reported invariants it does not own: {foreign}")
        except Exception as exc:  # one broken rule is unknown; the others still judge
            per_rule[rule.name] = {"valid": UNKNOWN, "explanation": f"rule crashed: {type(exc).__name__}: {exc}",
                                   "error": traceback.format_exc()}
            continue
        per_rule[rule.name] = {"valid": not vs, "violations": len(vs),
                               "seconds": round(time.monotonic() - start, 4)}
        found += vs
        shown += vs[:SHOWN_PER_RULE]
    judged = [name for name, r in per_rule.items() if r["valid"] != UNKNOWN]
    out = result(found, judged, stats=stats)
    out["anomalies"] = [v.to_json() for v in shown[:SHOWN]]
    unknown = [name for name, r in per_rule.items() if r["valid"] == UNKNOWN]
    if unknown:
        out["not_checked"] = {name: per_rule[name]["explanation"] for name in unknown}
        if not found:
            out["valid"] = UNKNOWN
            out["explanation"] = (f"unknown: {', '.join(unknown)} not judged"
                                  + (f"; all hold: {', '.join(judged)}" if judged else ""))
    out["rules"] = per_rule
    return out
