"""A violated invariant with the journal entries (file:line) that show it, and the result dict
shape shared by the invariant checkers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.journal import Entry


@dataclass
class Violation:
    """One broken rule, in the shape the report renders (docs/contracts.md, "Anomalies in
    results.json"): the rule's name, the explanation, the journal entries that show it, and — when
    the checker can say — the state before and after in the rule's terms."""

    invariant: str
    explanation: str
    entries: list[Entry] = field(default_factory=list)
    before: str | None = None
    after: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.invariant, "explanation": self.explanation,
                               "entries": [e.to_json() for e in self.entries]}
        if self.before is not None:
            out["before"] = self.before
        if self.after is not None:
            out["after"] = self.after
        return out


def result(violations: list[Violation], checked: list[str], not_checked: dict[str, str] | None = None,
           stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """valid is false with any violation; otherwise true for what was checked."""
    counts: dict[str, int] = {}
    for v in violations:
        counts[v.invariant] = counts.get(v.invariant, 0) + 1
    if violations:
        head = "; ".join(f"{k} ×{n}" for k, n in counts.items())
        expl = f"violated: {head}. First: {violations[0].explanation}"
    else:
        expl = f"all hold: {', '.join(checked)}"
    out: dict[str, Any] = {"valid": not violations, "explanation": expl,
                           "anomalies": [v.to_json() for v in violations[:200]], "checked": checked}
    if not_checked:
        out["not_checked"] = not_checked
    if stats:
        out["stats"] = stats
    return out
