"""How a fault reports that it was not, or only partly, applied."""

from __future__ import annotations

from typing import Any


class FaultError(Exception):
    """The fault was not applied at all (recorded as `fail`)."""


class Unsupported(FaultError):
    """This host/kernel cannot do it (recorded as `fail` with "unsupported here: …")."""


class PartialFault(Exception):
    """Some of it was applied: `value` says what (recorded as `info`)."""

    def __init__(self, value: Any, error: str) -> None:
        super().__init__(error)
        self.value = value
        self.error = error
