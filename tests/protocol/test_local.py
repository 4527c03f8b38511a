"""The in-memory RequestSender behaves like the network client against the same registry."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import ConnectionLost, InvalidRequest
from kraftlab.node.protocol.local import LocalSender, RequestSender
from kraftlab.node.protocol.negotiate import api_versions_request
from kraftlab.node.protocol.registry import ApiRegistry
from kraftlab.node.protocol.server import ProtocolServer
from protocol.handlers import TopicStore, example_registry


def create(name: str) -> CreateTopicsRequest:
    topic = CreatableTopic(
        name=TopicName(name), num_partitions=i32(3), replication_factor=i16(1), assignments=(), configs=()
    )
    return CreateTopicsRequest(topics=(topic,), timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)))


async def conversation(sender: RequestSender) -> list[object]:
    """The same requests through any sender; returns what a caller would observe."""
    created = await sender.send(create("t1"))
    again = await sender.send(create("t1"))
    listed = await sender.send(MetadataRequest(topics=None, include_topic_authorized_operations=False))
    versions = await sender.send(api_versions_request(4))
    return [
        [t.error_code for t in created.topics],  # type: ignore[attr-defined]
        [t.error_code for t in again.topics],  # type: ignore[attr-defined]
        [t.name for t in listed.topics],  # type: ignore[attr-defined]
        [(k.api_key, k.min_version, k.max_version) for k in versions.api_keys],  # type: ignore[attr-defined]
    ]


def test_local_and_network_senders_observe_the_same_answers() -> None:
    async def scenario() -> tuple[list[object], list[object]]:
        local = await conversation(LocalSender(example_registry(TopicStore())))
        async with (
            ProtocolServer(example_registry(TopicStore())) as server,
            ProtocolClient("127.0.0.1", server.port) as client,
        ):
            remote = await conversation(client)
        return local, remote

    local, remote = asyncio.run(scenario())
    assert local == remote
    assert local[0] == [ErrorCode.none] and local[1] == [ErrorCode.topic_already_exists] and local[2] == ["t1"]


def test_local_sender_reports_what_a_closed_connection_would() -> None:
    def broken(request: object, context: object) -> object:
        raise RuntimeError("bug")

    registry = ApiRegistry(api_versions_range=(0, 2))
    registry.register(12, 4, 4, broken)
    sender = LocalSender(registry)

    async def scenario() -> None:
        with pytest.raises(ConnectionLost, match="not served"):
            await sender.send(MetadataRequest(topics=None, include_topic_authorized_operations=False))
        with pytest.raises(ConnectionLost, match="handler failed"):
            await sender.send(HeartbeatRequest(group_id=GroupId("g"), generation_id=i32(1), member_id="m"))
        with pytest.raises(InvalidRequest):
            await sender.send(HeartbeatRequest(group_id=GroupId("g"), generation_id=2**40, member_id="m"))  # type: ignore[arg-type]
        old = await sender.send(api_versions_request(4))
        assert old.__version__ == 0 and old.error_code == ErrorCode.unsupported_version

    asyncio.run(scenario())
