"""An in-memory fake cluster for workload tests: a topic set whose calls can be made to fail,
hang (the client times out) or lose their connection after taking effect."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from kraftlab.checker.history import Completion
from kraftlab.workloads.client import DefiniteFailure, Invocation


@dataclass
class FakeCluster:
    """Applies create/delete/list to a set; `fault` decides per call what goes wrong."""

    topics: set[str] = field(default_factory=set)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    p_refuse: float = 0.0  # a definite refusal before applying
    p_hang: float = 0.0  # never answers (the client's timeout fires); applied or not at random
    p_lost: float = 0.0  # applies, then the connection drops before the answer
    applied: list[tuple[str, str]] = field(default_factory=list)

    async def call(self, op: Invocation) -> Completion:
        r = self.rng.random()
        if r < self.p_refuse:
            raise DefiniteFailure("NOT_CONTROLLER")
        r -= self.p_refuse
        if r < self.p_hang:
            if self.rng.random() < 0.5:
                self._apply(op)
            await asyncio.sleep(3600)
        r -= self.p_hang
        result = self._apply(op)
        if r < self.p_lost:
            raise ConnectionResetError("connection lost after the request was sent")
        return result

    def _apply(self, op: Invocation) -> Completion:
        self.applied.append((op.f, str(op.value)))
        if op.f == "create":
            if op.value in self.topics:
                return Completion("fail", op.value, "TOPIC_ALREADY_EXISTS")
            self.topics.add(op.value)
            return Completion("ok", op.value)
        if op.f == "delete":
            if op.value not in self.topics:
                return Completion("fail", op.value, "UNKNOWN_TOPIC_OR_PARTITION")
            self.topics.discard(op.value)
            return Completion("ok", op.value)
        if op.f == "list":
            return Completion("ok", sorted(self.topics))
        raise ValueError(f"unknown op {op.f}")


@dataclass
class FakeClient:
    cluster: FakeCluster
    node: str
    closed: bool = False

    async def invoke(self, op: Invocation) -> Completion:
        assert not self.closed, "invoke on a closed client"
        return await self.cluster.call(op)

    async def close(self) -> None:
        self.closed = True


@dataclass
class FakeFactory:
    cluster: FakeCluster
    opened: list[tuple[str, int]] = field(default_factory=list)
    unreachable: set[str] = field(default_factory=set)

    async def open(self, node: str, process: int) -> FakeClient:
        if node in self.unreachable:
            raise ConnectionRefusedError(f"{node} unreachable")
        self.opened.append((node, process))
        return FakeClient(self.cluster, node)
