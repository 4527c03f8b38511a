"""What one step of the Raft core gives its driver: the `Output`, the StateMachine updates in it,
and the exceptions a step raises (`NotLeader`, `RaftSafetyError`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record


class NotLeader(Exception):
    """`append` on a node that is not the leader; carries the leader it knows of."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftSafetyError(Exception):
    """The core was asked to do something that would break Raft's safety (for example truncate
    below the high-water mark): the node must stop rather than continue."""


@dataclass(slots=True)
class LoadSnapshot:
    snapshot_id: OffsetAndEpoch
    records: list[Record]


@dataclass(slots=True)
class Commit:
    batches: list[Batch]


@dataclass(slots=True)
class LeaderChange:
    leader_id: int | None
    epoch: int
    local_is_leader: bool


Update = LoadSnapshot | Commit | LeaderChange


@dataclass(slots=True)
class Output:
    messages: list[m.Envelope] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    deadline: int | None = None
    flush_to: int | None = None

    def merge(self, later: Output) -> None:
        """Append a later step's output (its deadline supersedes this one's)."""
        self.messages.extend(later.messages)
        self.events.extend(later.events)
        self.updates.extend(later.updates)
        self.deadline = later.deadline
        if later.flush_to is not None:
            self.flush_to = max(self.flush_to or 0, later.flush_to)
