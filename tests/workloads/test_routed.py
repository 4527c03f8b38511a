"""The per-process router of mixed runs: each op reaches the client of its workload, opened once
on first use; a client that cannot open makes the op a definite failure; close closes them all."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from kraftlab.workloads.client import Completion, DefiniteFailure, Invocation
from kraftlab.workloads.routed import RoutedFactory


@dataclass
class Recorder:
    name: str
    seen: list[str] = field(default_factory=list)
    closed: bool = False
    node: str = "n1"

    async def invoke(self, op: Invocation) -> Completion:
        self.seen.append(op.f)
        return Completion("ok", self.name)

    async def close(self) -> None:
        self.closed = True


@dataclass
class Factory:
    name: str
    opened: list[Recorder] = field(default_factory=list)
    fail: bool = False

    async def open(self, node: str, process: int) -> Recorder:
        if self.fail:
            raise ConnectionRefusedError("refused")
        self.opened.append(Recorder(self.name))
        return self.opened[-1]


def test_ops_go_to_their_workloads_client() -> None:
    kio, queue = Factory("kio"), Factory("queue")

    async def go() -> None:
        client = await RoutedFactory(kio, {"queue": queue}).open("n1", 4)
        assert client.node == "n1" and not kio.opened and not queue.opened
        answers = [await client.invoke(Invocation(f, None, {"workload": w}))
                   for f, w in [("create", "topics"), ("send", "queue"), ("register", "registry"), ("poll", "queue")]]
        assert [a.value for a in answers] == ["kio", "queue", "kio", "queue"]
        assert [r.seen for r in kio.opened] == [["create", "register"]]
        assert [r.seen for r in queue.opened] == [["send", "poll"]]
        await client.close()
        assert kio.opened[0].closed and queue.opened[0].closed

    asyncio.run(go())


def test_a_client_that_cannot_open_fails_the_op() -> None:
    async def go() -> None:
        client = await RoutedFactory(Factory("kio"), {"queue": Factory("queue", fail=True)}).open("n2", 1)
        with pytest.raises(DefiniteFailure, match="not-sent: connect: ConnectionRefusedError"):
            await client.invoke(Invocation("send", {"key": "queue-0", "value": 1}, {"workload": "queue"}))
        assert (await client.invoke(Invocation("list", None, {"workload": "topics"}))).value == "kio"

    asyncio.run(go())
