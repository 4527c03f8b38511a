"""The Raft listener refuses what Kafka refuses before its handler, where Kafka puts the error:
every Raft API served, in every version, well formed or from another cluster, without the cluster
permission, for another topic, partition 1, two partitions or none — the listener's answer judged
against the simulator's independent reference (`raft_reference.before_handler`; the requests that
reach the core against `raft_reference.expected`), a refusal of the whole request carrying nothing
beside its error (`node.sim.wire.response_rules`), every answer through Kafka's wire format."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kraftlab.node.process.transport import register_raft_apis
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.sim import raft_reference as ref
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore
from kraftlab.node.sim.wire import through_the_wire

CLUSTER = "kraftlab-cluster-A"


@dataclasses.dataclass(eq=False)
class Node:
    """One voter leading alone over in-memory storage, and the driver the listener hands requests to."""

    node_id: int = 1
    voter: bool = True
    log: MemoryLog = dataclasses.field(default_factory=MemoryLog)
    snapshots: MemorySnapshotStore = dataclasses.field(default_factory=MemorySnapshotStore)
    core: RaftCore | None = None
    reached: list[m.Message] = dataclasses.field(default_factory=list)

    def submit(self, src: int, message: m.Message, timeout_s: float) -> asyncio.Future[m.Message]:
        assert self.core is not None
        self.reached.append(message)
        out = self.core.handle(m.Envelope(src, self.node_id, message, "ref"), 10)
        (answer,) = [e.message for e in out.messages if e.ref == "ref"]
        future: asyncio.Future[m.Message] = asyncio.get_running_loop().create_future()
        future.set_result(answer)
        return future


def leading_node() -> Node:
    node = Node()
    core = RaftCore(RaftConfig(), 1, (1,), node.log, MemoryQuorumStateStore(), node.snapshots, random.Random(1))
    node.core = core
    core.start(0)
    core.append([Record(None, b"a")], 1)
    core.create_snapshot(OffsetAndEpoch(core.high_watermark, core.epoch), [Record(None, b"state")], 2)
    return node


class Permission:
    """A listener's security that grants the cluster permission or not."""

    def __init__(self, granted: bool) -> None:
        self.granted = granted

    def allows_on_cluster(self, principal: str, peer: str, describe: bool = False) -> bool:
        return self.granted


def requests(node: Node) -> list[Any]:
    """A well-formed request entity of every API, in every version the listener serves."""
    assert node.core is not None
    epoch, sid = node.core.epoch, node.snapshots.latest()
    assert sid is not None
    messages: list[m.Request] = [
        m.VoteRequest(epoch + 1, 2, epoch, node.log.end_offset(), True),
        m.BeginQuorumEpochRequest(epoch, 2),
        m.EndQuorumEpochRequest(epoch, 2, (1,)),
        m.FetchRequest(epoch, 2, 0, 0),
        m.FetchSnapshotRequest(epoch, 2, sid, 0, 64),
        m.DescribeQuorumRequest(),
    ]
    entities = [wire.request_to_wire(msg, CLUSTER, 1) for msg in messages[:3] + messages[5:]]
    entities += [wire.request_to_wire(messages[3], CLUSTER, 1, v) for v in wire.FETCH_VERSIONS]
    entities += [wire.request_to_wire(messages[4], CLUSTER, 1, v) for v in wire.FETCH_SNAPSHOT_VERSIONS]
    return entities


def _set_on_partitions(entity: Any, change: Callable[[Any], Any]) -> Any:
    topic = entity.topics[0]
    return dataclasses.replace(entity, topics=(dataclasses.replace(topic, partitions=change(topic.partitions)),))


def _renamed(entity: Any) -> Any:
    topic = entity.topics[0]
    for attr, value in (("topic_name", "other"), ("topic", "other"), ("name", "other"), ("topic_id", uuid.uuid4())):
        if hasattr(topic, attr):
            return dataclasses.replace(entity, topics=(dataclasses.replace(topic, **{attr: value}),))
    raise AssertionError(topic)


def _partition_one(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    attr = next(a for a in ("partition_index", "partition", "index") if hasattr(parts[0], a))
    return (dataclasses.replace(parts[0], **{attr: 1}),)


FLAWS: dict[str, Callable[[Any], Any]] = {
    "well formed": lambda e: e,
    "no cluster id": lambda e: dataclasses.replace(e, cluster_id=None) if hasattr(e, "cluster_id") else e,
    "another cluster": lambda e: dataclasses.replace(e, cluster_id="another") if hasattr(e, "cluster_id") else e,
    "another topic": _renamed,
    "partition 1": lambda e: _set_on_partitions(e, _partition_one),
    "two partitions": lambda e: _set_on_partitions(e, lambda parts: parts + parts),
    "no partition": lambda e: _set_on_partitions(e, lambda parts: ()),
    "two topics": lambda e: dataclasses.replace(e, topics=e.topics + e.topics),
    "no topic": lambda e: dataclasses.replace(e, topics=()),
}


def listener_answer(node: Node, entity: Any, granted: bool) -> Any:
    registry = ApiRegistry()
    register_raft_apis(registry, node, CLUSTER, 1.0, Permission(granted))  # type: ignore[arg-type]  # duck-typed
    _, handler = registry.lookup(int(entity.__api_key__), int(entity.__version__))
    context = RequestContext(int(entity.__api_key__), int(entity.__version__), 1, "peer", "127.0.0.1:1")

    async def answer() -> Any:
        result = handler(entity, context)
        return await result if asyncio.isfuture(result) or asyncio.iscoroutine(result) else result

    return asyncio.run(answer())


@pytest.mark.parametrize("granted", [True, False], ids=["permitted", "no-permission"])
def test_the_listener_refuses_what_kafka_refuses_where_kafka_puts_the_error(granted: bool) -> None:
    node = leading_node()
    judged: set[tuple[str, str]] = set()
    for entity in requests(node):
        for flaw, make in FLAWS.items():
            request = make(entity)
            what = f"{type(request).__name__} v{request.__version__} ({flaw})"
            assert node.core is not None
            before = ref.responder(node, wire.request_from_wire(entity))
            answer = through_the_wire(listener_answer(node, request, granted), what)
            want = ref.before_handler(request, CLUSTER, granted)
            if want is None:  # the handler's own checks: the core's exact answer
                expected = ref.expected(wire.request_from_wire(request), before) if before is not None else None
                assert expected is not None and wire.response_from_wire(answer).error == expected.error, what
            else:
                assert ref.refused_as(answer) == want, (what, answer)
            judged.add((type(request).__name__, str(want)))
    apis = {api for api, _ in judged}
    assert len(apis) == 6  # every API: answered by the core and refused before it, or refused for want of permission
    assert len(judged) >= (3 * len(apis) if granted else len(apis)), judged
