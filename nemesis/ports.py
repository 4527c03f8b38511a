"""The seams the nemesis needs besides `control.host.Host`.

`NodeControl` is how process and disk faults start/stop a node and where they find its files;
`kraftlab/deploy.py` implements it for a deployed lab, `nemesis.fakes.FakeNodeControl` for tests.
`OpRecorder` is how every nemesis operation reaches the history (process "nemesis").
`Ledger` persists the faults in force so `kraftlab clean` can undo them after a killed run.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kraftlab.control.host import Host


@runtime_checkable
class NodeControl(Protocol):
    """The nodes of one deployed lab, seen from the nemesis."""

    def nodes(self) -> list[str]:
        """All node names (n1 … n5), in a stable order."""
        ...

    def controllers(self) -> list[str]:
        """Nodes whose process.roles include controller."""
        ...

    def brokers(self) -> list[str]:
        """Nodes whose process.roles include broker."""
        ...

    def host(self, node: str) -> Host:
        """The host the node runs on."""
        ...

    def active_controller(self) -> str | None:
        """The node that leads the metadata quorum now (DescribeQuorum), or None if unknown."""
        ...

    def start(self, node: str) -> None:
        """Start the node's process (after a kill or stop); returns once it is spawned."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL the node's process."""
        ...

    def stop(self, node: str, *, graceful: bool = True) -> None:
        """Stop the node: SIGTERM (controlled shutdown) and wait, SIGKILL if it does not exit."""
        ...

    def pause(self, node: str) -> None:
        """SIGSTOP the node's process."""
        ...

    def resume(self, node: str) -> None:
        """SIGCONT the node's process."""
        ...

    def running(self, node: str) -> bool: ...

    def pid(self, node: str) -> int | None:
        """The node's pid on its host (recorded so a later `clean` can SIGCONT it)."""
        ...

    def data_dir(self, node: str) -> str:
        """The directory holding everything the node writes (log.dirs)."""
        ...

    def metadata_log_dir(self, node: str) -> str:
        """`metadata.log.dir`: holds `__cluster_metadata-0/` (segments, snapshots, quorum-state)."""
        ...

    def clock_file(self, node: str) -> str:
        """`kraftlab.clock.file`: the clock control file the node reads (docs/contracts.md)."""
        ...

    def reformat(self, node: str) -> None:
        """Format the node's (wiped) storage again with the lab's cluster id."""
        ...


class OpRecorder(Protocol):
    """Receives each nemesis operation; the runner appends it to the history as process "nemesis"."""

    def __call__(self, type_: str, f: str, value: Any = None, *, node: str | None = None,
                 error: str | None = None) -> None: ...


class Ledger(Protocol):
    """Durable record of the faults in force (a JSON object)."""

    def load(self) -> dict[str, Any]: ...

    def save(self, state: dict[str, Any]) -> None: ...


class MemoryLedger:
    """A ledger kept in memory (tests)."""

    def __init__(self) -> None:
        self._state: dict[str, Any] = {}

    def load(self) -> dict[str, Any]:
        return copy.deepcopy(self._state)

    def save(self, state: dict[str, Any]) -> None:
        self._state = copy.deepcopy(state)


class FileLedger:
    """A ledger in a JSON file, replaced atomically and fsynced on every save."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, state: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


def null_recorder(type_: str, f: str, value: Any = None, *, node: str | None = None,
                  error: str | None = None) -> None:
    """An OpRecorder that drops everything."""


class MemoryRecorder(list[dict[str, Any]]):
    """An OpRecorder that keeps every op as a dict, in order (the in-memory implementation, for tests)."""

    def __call__(self, type_: str, f: str, value: Any = None, *, node: str | None = None,
                 error: str | None = None) -> None:
        self.append({"type": type_, "f": f, "value": value, "node": node, "error": error})

    def completions(self) -> list[dict[str, Any]]:
        return [op for op in self if op["type"] != "invoke"]
