"""An in-memory NodeControl for tests: tracks process states without processes, on
`control.fake.FakeHost`s (which record the commands they are given); `FakeQuorumControl` adds a
dynamic quorum's voter set."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.control.fake import FakeHost
from kraftlab.control.host import HostError
from kraftlab.nemesis.ports import QuorumView, VoterAnswer, VoterRequest
from kraftlab.nemesis.voter_races import send_in_threads


@dataclass
class FakeNode:
    host: FakeHost
    roles: tuple[str, ...]
    state: str = "running"  # running | killed | stopped | paused
    starts: int = 0
    formats: int = 0
    pid: int = 0


@dataclass
class FakeNodeControl:
    """Nodes n1…nN on FakeHosts at 10.9.0.1…; the first `controllers` are controllers, the rest
    brokers (all of them brokers when `combined`)."""

    size: int = 5
    n_controllers: int = 3
    combined: bool = False
    leader: str | None = "n1"
    startup_watch_s: float = 0.0  # processes start (or refuse) at once: stop-disk need not wait
    nodes_by_name: dict[str, FakeNode] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for i in range(1, self.size + 1):
            roles: tuple[str, ...] = ("controller",) if i <= self.n_controllers else ("broker",)
            if self.combined and i <= self.n_controllers:
                roles = ("controller", "broker")
            self.nodes_by_name[f"n{i}"] = FakeNode(FakeHost(f"n{i}", f"10.9.0.{i}"), roles, pid=4000 + i)

    def nodes(self) -> list[str]:
        return list(self.nodes_by_name)

    def controllers(self) -> list[str]:
        return [n for n, f in self.nodes_by_name.items() if "controller" in f.roles]

    def brokers(self) -> list[str]:
        return [n for n, f in self.nodes_by_name.items() if "broker" in f.roles]

    def host(self, node: str) -> FakeHost:
        return self.nodes_by_name[node].host

    def hosts(self) -> dict[str, FakeHost]:
        return {n: f.host for n, f in self.nodes_by_name.items()}

    def active_controller(self) -> str | None:
        return self.leader

    def _set(self, node: str, action: str, state: str, *, allowed: tuple[str, ...]) -> None:
        fake = self.nodes_by_name[node]
        if fake.state not in allowed:
            raise RuntimeError(f"{node}: cannot {action} a {fake.state} node")
        fake.state = state
        self.log.append(f"{action} {node}")

    def start(self, node: str) -> None:
        self._set(node, "start", "running", allowed=("killed", "stopped"))
        self.nodes_by_name[node].starts += 1
        self.nodes_by_name[node].pid += 100

    def kill(self, node: str) -> None:
        self._set(node, "kill", "killed", allowed=("running", "paused"))

    def stop(self, node: str, *, graceful: bool = True) -> None:
        self._set(node, "stop" if graceful else "kill", "stopped" if graceful else "killed",
                  allowed=("running", "paused"))

    def pause(self, node: str) -> None:
        self._set(node, "pause", "paused", allowed=("running",))

    def resume(self, node: str) -> None:
        self._set(node, "resume", "running", allowed=("paused",))

    def running(self, node: str) -> bool:
        return self.nodes_by_name[node].state in ("running", "paused")

    def pid(self, node: str) -> int | None:
        return self.nodes_by_name[node].pid if self.running(node) else None

    def data_dir(self, node: str) -> str:
        return f"/var/lib/kraftlab/{node}/data"

    def metadata_log_dir(self, node: str) -> str:
        return f"/var/lib/kraftlab/{node}/meta"

    def clock_file(self, node: str) -> str:
        return f"/var/lib/kraftlab/{node}/clock.json"

    def reformat(self, node: str) -> None:
        self.nodes_by_name[node].formats += 1
        self.log.append(f"format {node}")


@dataclass
class FakeDiskControl(FakeNodeControl):
    """Fake nodes on a fake disk-fault filesystem (nemesis.diskrules.DiskRules): requests are recorded
    and answered ok; `injected` answers what a test put in `errors` (node → errors), once."""

    diskfs: bool = True
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def on_diskfs(self) -> bool:
        return self.diskfs

    def disk_request(self, node: str, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((node, request))
        if request.get("cmd") == "injected":
            return {"ok": True, "errors": self.errors.pop(node, [])}
        return {"ok": True}

    def fail_stop(self, node: str) -> None:
        """The node exits on its own (as on a failed write)."""
        self.nodes_by_name[node].state = "stopped"
        self.log.append(f"exit {node}")


@dataclass
class FakeQuorumControl(FakeNodeControl):
    """Fake nodes of a dynamic quorum (nemesis.ports.VoterControl): every node a combined controller,
    the first `n_voters` voters, the rest spares; voter changes applied at once, or answered by what a
    test put in `answers` (node → Kafka error names, one per request, `NONE` applying it).
    A node whose process is down cannot be added (it does not catch up: REQUEST_TIMED_OUT)."""

    n_voters: int = 3
    dynamic: bool = True
    voters: dict[str, str] = field(default_factory=dict)  # node → directory id in force
    disks: dict[str, str] = field(default_factory=dict)  # node → directory id on its disk
    answers: dict[str, list[str]] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (add|remove, node, directory)
    silent: int = 0
    """The next `silent` DescribeQuorum calls find no leader (HostError), as during an election."""
    behind: dict[str, int] = field(default_factory=dict)
    """Voters the leader describes behind its high-water mark, for the next N DescribeQuorum calls
    each (N = the value); `high_watermark` -1 makes a leader whose epoch has committed nothing yet."""
    high_watermark: int = 100
    _next_disk: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)  # changes sent together come from threads

    def __post_init__(self) -> None:
        self.n_controllers = self.size
        self.combined = True
        super().__post_init__()
        for node in self.nodes():
            self.disks[node] = self._new_directory()
        self.voters = {n: self.disks[n] for n in self.nodes()[: self.n_voters]}

    def _new_directory(self) -> str:
        self._next_disk += 1
        return f"dir{self._next_disk:02d}-AAAAAAAAAAAAAAAA"

    def dynamic_quorum(self) -> bool:
        return self.dynamic

    def spare_controllers(self) -> list[str]:
        return self.nodes()[self.n_voters:]

    def describe_voters(self) -> QuorumView:
        if self.silent > 0:
            self.silent -= 1
            raise HostError("describe-quorum failed: no leader")
        leader = self.leader if self.leader in self.voters else next(iter(self.voters), None)
        ends = {n: self.high_watermark - (1 if self.behind.get(n, 0) > 0 else 0) for n in self.voters}
        self.behind = {n: left - 1 for n, left in self.behind.items() if left > 1}
        return QuorumView(leader, dict(self.voters), self.high_watermark, ends)

    def directory_id(self, node: str) -> str | None:
        return self.disks.get(node)

    def _answer(self, node: str) -> str:
        queued = self.answers.get(node)
        return queued.pop(0) if queued else "NONE"

    def add_controller(self, node: str, timeout_s: float) -> VoterAnswer:
        with self._lock:
            return self._add_controller(node)

    def _add_controller(self, node: str) -> VoterAnswer:
        self.requests.append(("add", node, self.disks.get(node)))
        error = self._answer(node)
        if error != "NONE":
            return VoterAnswer(error, "scripted")
        if node in self.voters:
            return VoterAnswer("DUPLICATE_VOTER", f"{node} is already a voter")
        if not self.running(node):
            return VoterAnswer("REQUEST_TIMED_OUT", f"{node} did not catch up")
        self.voters[node] = self.disks[node]
        return VoterAnswer("NONE")

    def remove_controller(self, node: str, directory_id: str, timeout_s: float) -> VoterAnswer:
        with self._lock:
            return self._remove_controller(node, directory_id)

    def _remove_controller(self, node: str, directory_id: str) -> VoterAnswer:
        self.requests.append(("remove", node, directory_id))
        error = self._answer(node)
        if error != "NONE":
            return VoterAnswer(error, "scripted")
        if self.voters.get(node) != directory_id:
            return VoterAnswer("VOTER_NOT_FOUND", f"({node}, {directory_id}) is not a voter")
        if len(self.voters) == 1:
            return VoterAnswer("INVALID_REQUEST", "the last voter cannot be removed")
        del self.voters[node]
        if self.leader == node:
            self.leader = next(iter(self.voters))
        return VoterAnswer("NONE")

    def change_voters_together(self, requests: Sequence[VoterRequest], timeout_s: float) -> list[VoterAnswer]:
        return send_in_threads(self, requests, timeout_s)

    def new_disk(self, node: str) -> None:
        if self.running(node):
            raise RuntimeError(f"{node}: a new disk for a running node")
        self.disks[node] = self._new_directory()
        self.log.append(f"new-disk {node}")
