"""Helpers for driving one RaftCore by hand over in-memory storage (imported by the tests here)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.retention import UNLIMITED, RetentionPolicy
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore

KEEP_NO_LOG = RetentionPolicy(max_bytes=0, max_ms=UNLIMITED)
"""metadata.max.retention.bytes=0: the log behind each snapshot is deleted at once."""


@dataclass
class Harness:
    core: RaftCore
    log: MemoryLog
    quorum: MemoryQuorumStateStore
    snapshots: MemorySnapshotStore
    outputs: list[Output] = field(default_factory=list)

    def step(self, out: Output) -> Output:
        self.outputs.append(out)
        return out

    def start(self, now: int = 0) -> Output:
        return self.step(self.core.start(now))

    def tick(self, now: int) -> Output:
        return self.step(self.core.tick(now))

    def deliver(self, src: int, message: m.Message, now: int, ref: object = None) -> Output:
        return self.step(self.core.handle(m.Envelope(src, self.core.node_id, message, ref), now))

    def answer(self, request: m.Envelope, response: m.Message, now: int) -> Output:
        """Deliver `response` as the answer to a request this core sent."""
        return self.step(self.core.handle(m.Envelope(request.dst, request.src, response, request.ref), now))


def sent(out: Output, kind: type) -> list[m.Envelope]:
    return [e for e in out.messages if isinstance(e.message, kind)]


def events(out: Output, ev: str) -> list[dict]:
    return [e for e in out.events if e["ev"] == ev]


@pytest.fixture
def make_core():
    def make(
        node_id: int = 1,
        voters: tuple[int, ...] = (1, 2, 3),
        config: RaftConfig | None = None,
        seed: int = 1,
        log: MemoryLog | None = None,
        quorum: MemoryQuorumStateStore | None = None,
        snapshots: MemorySnapshotStore | None = None,
    ) -> Harness:
        log = log or MemoryLog()
        quorum = quorum or MemoryQuorumStateStore()
        snapshots = snapshots or MemorySnapshotStore()
        core = RaftCore(config or RaftConfig(), node_id, voters, log, quorum, snapshots, random.Random(seed))
        return Harness(core, log, quorum, snapshots)

    return make
