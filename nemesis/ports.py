"""The seams the nemesis needs besides `control.host.Host`.

`NodeControl` is how process and disk faults start/stop a node and where they find its files;
`kraftlab/deploy.py` implements it for a deployed lab, `nemesis.fakes.FakeNodeControl` for tests.
`OpRecorder` is how every nemesis operation reaches the history (process "nemesis").
`Ledger` persists the faults in force so `kraftlab clean` can undo them after a killed run.
`VoterControl` is how the membership nemesis reads and changes a dynamic quorum's voter set.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class VoterAnswer:
    """What a controller answered one voter change (AddRaftVoter / RemoveRaftVoter): Kafka's error
    name (`NONE`: done and committed; `UNREACHABLE`: no controller took the request) and its message."""

    error: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error == "NONE"


@dataclass(frozen=True, slots=True)
class QuorumView:
    """A dynamic quorum as DescribeQuorum (v2) shows it, by node name: the leader and each voter's
    directory id (Kafka's base64 text); the leader's high-water mark (-1 until its epoch has committed
    an entry) and each voter's log end offset as the leader last saw it."""

    leader: str | None
    voters: dict[str, str]
    high_watermark: int = -1
    ends: dict[str, int] = field(default_factory=dict)

    def unsettled(self) -> str | None:
        """Why this is not a settled quorum (None when it is): one whose leader has committed an entry
        of its epoch that every voter holds — what an operator checks before replacing a disk, since
        a replaced disk's entries are gone for good and may have been the only copy of that epoch's."""
        if self.leader is None:
            return "no leader"
        if self.high_watermark < 0:
            return f"the leader {self.leader} has no high-water mark in its epoch yet"
        hw = self.high_watermark
        behind = [f"{n} at {self.ends.get(n, -1)}" for n in sorted(self.voters) if self.ends.get(n, -1) < hw]
        if behind:
            return f"voters behind the high-water mark {self.high_watermark}: {', '.join(behind)}"
        return None


@dataclass(frozen=True, slots=True)
class VoterRequest:
    """One voter change to send: `add` the node (its disk's directory id), or `remove` (the node's id,
    `directory_id`)."""

    kind: str  # add | remove
    node: str
    directory_id: str | None = None


@runtime_checkable
class VoterControl(Protocol):
    """A lab's dynamic quorum (KIP-853), seen from the membership nemesis: the voter set, and the
    changes Kafka's tools make (`kafka-metadata-quorum add-controller` / `remove-controller`,
    `kafka-storage format --no-initial-controllers` for a new disk). `kraftlab/deploy.py` implements
    it for a deployed lab, `nemesis.fakes.FakeQuorumControl` in memory for tests."""

    def dynamic_quorum(self) -> bool:
        """The lab runs a dynamic quorum (controller.quorum.bootstrap.servers): voters can change."""
        ...

    def spare_controllers(self) -> list[str]:
        """Controllers formatted `--no-initial-controllers` by the deploy (they start as observers)."""
        ...

    def describe_voters(self) -> QuorumView:
        """The voter set in force now (HostError when no controller answers)."""
        ...

    def directory_id(self, node: str) -> str | None:
        """The directory id in the node's metadata directory (its meta.properties), None if unformatted."""
        ...

    def add_controller(self, node: str, timeout_s: float) -> VoterAnswer:
        """AddRaftVoter for the node (its id, its disk's directory id, its controller listener), sent
        to the quorum's leader; the leader waits up to `timeout_s` for it to catch up."""
        ...

    def remove_controller(self, node: str, directory_id: str, timeout_s: float) -> VoterAnswer:
        """RemoveRaftVoter for (the node's id, `directory_id`), sent to the quorum's leader."""
        ...

    def change_voters_together(self, requests: Sequence[VoterRequest], timeout_s: float) -> list[VoterAnswer]:
        """Every request sent to the leader at the same moment, each over its own connection (as tools run
        by two operators at once), not one after the other's answer; their answers, in order."""
        ...

    def new_disk(self, node: str) -> None:
        """Wipe the (stopped) node's directories and format them as a controller that joins an
        existing quorum (`--no-initial-controllers`): a new directory id."""
        ...
