"""The shape of one fault kind: named operations, what healing it takes, and what is in force.

Which `f` opens and closes a window is declared by the packages (`nemesis.packages.WINDOWS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Handler = Callable[[dict[str, Any]], dict[str, Any]]



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
