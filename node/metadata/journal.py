"""The journal events that controller and broker cores return as outputs (docs/contracts.md).

A core never writes files: it returns `JournalEvent`s; the node process adds `ts`, `mono` and
`node` and appends them to `journal.jsonl`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class JournalEvent:
    ev: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The event's line without the node-added `ts`/`mono`/`node` fields."""
        return {"ev": self.ev, **self.fields}
