"""The client seam: what a workload client does for one process, and Jepsen's op semantics.

A client turns an invocation into a completion: `ok` (took effect), `fail` (definitely did not)
or `info` (unknown: may take effect at any later time). Clients raise `DefiniteFailure` for a
refusal the server guarantees had no effect; any other exception or a timeout means `info`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kraftlab.checker.history import Completion


@dataclass(frozen=True, slots=True)
class Invocation:
    """An op to perform. `extra`: fields recorded on both history lines of the op (e.g.
    `{"workload": "topics"}`, which the checker splits the history by)."""

    f: str
    value: Any = None
    extra: Mapping[str, Any] | None = None


class DefiniteFailure(Exception):
    """The operation certainly did not take effect (e.g. a validation error from the controller)."""

    def __init__(self, error: str, value: Any = None) -> None:
        super().__init__(error)
        self.error = error
        self.value = value


class Client(Protocol):
    """One logical client process bound to one node."""

    @property
    def node(self) -> str: ...  # read-only: a client stays bound to its node

    async def invoke(self, op: Invocation) -> Completion: ...

    async def close(self) -> None: ...


class ClientFactory(Protocol):
    async def open(self, node: str, process: int) -> Client: ...
