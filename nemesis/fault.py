"""The shape of one fault kind: named operations, what healing it takes, and what is in force."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Handler = Callable[[dict[str, Any]], dict[str, Any]]

# The history `f` that opens a fault window → the `f` that closes it (for reports and checkers).
WINDOWS: dict[str, str] = {
    "start-partition": "stop-partition",
    "start-packet": "stop-packet",
    "start-disk": "stop-disk",
    "kill": "restart",
    "graceful-stop": "restart",
    "pause": "resume",
    "clock-bump": "clock-reset",
    "clock-strobe": "clock-reset",
    "clock-rate": "clock-reset",
    "clock-step": "clock-step-reset",
}


class Fault(Protocol):
    kind: str

    def operations(self) -> dict[str, Handler]:
        """History `f` → handler taking the op's value and returning what was done."""
        ...

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        """The operations (f, value) that undo everything of this kind now in force."""
        ...

    def close(self) -> None:
        """Stop background activity (strobe threads); does not heal."""
        ...
