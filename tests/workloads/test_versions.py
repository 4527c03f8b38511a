"""Broker API versions: every request version we may pick encodes; negotiation picks the highest
common version (the node serves Metadata up to v8); no common version or an unanswered
ApiVersions leaves the op unsent (a definite failure)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from wl_harness import invoke

from kraftlab.node.protocol.errors import RequestTimedOut
from kraftlab.node.protocol.headers import encode_request
from kraftlab.workloads import versions
from kraftlab.workloads.client import DefiniteFailure
from kraftlab.workloads.kafka import Cluster
from kraftlab.workloads.ops import broker_read, op
from kraftlab.workloads.session import KafkaClientFactory
from kraftlab.workloads.topics import TopicsWorkload


@pytest.mark.parametrize("version", range(versions.OURS[versions.METADATA][0], versions.OURS[versions.METADATA][1] + 1))
def test_metadata_every_version_encodes(version: int) -> None:
    for topics in (None, [], ["t0", "t1"]):
        req = versions.metadata_request(version, topics)
        assert req.__version__ == version
        assert encode_request(req, 1, "x")


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version_encodes(version: int) -> None:
    req = versions.create_topics_request(version, "t0", assignment=[[1, 2], [3]])
    assert req.__version__ == version and req.topics[0].assignments[1].broker_ids == (3,)
    assert encode_request(req, 1, "x")


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version_encodes(version: int) -> None:
    req = versions.delete_topics_request(version, "t0")
    assert req.__version__ == version
    assert encode_request(req, 1, "x")


def test_pick() -> None:
    assert versions.pick({3: (0, 8)}, versions.METADATA) == 8
    assert versions.pick({3: (0, 20)}, versions.METADATA) == 12
    with pytest.raises(DefiniteFailure):
        versions.pick({3: (13, 14)}, versions.METADATA)
    with pytest.raises(DefiniteFailure):
        versions.pick({}, versions.CREATE_TOPICS)


class OldBroker:
    """A broker serving Metadata 0..8 only; records what it is sent."""

    def __init__(self, answer_api_versions: bool = True) -> None:
        self.sent: list[Any] = []
        self.answer_api_versions = answer_api_versions

    async def send(self, request: Any) -> Any:
        self.sent.append(request)
        if isinstance(request, ApiVersionsRequest):
            if not self.answer_api_versions:
                raise RequestTimedOut("no answer")
            return ApiVersionsResponse(error_code=ErrorCode.none, api_keys=(
                ApiVersion(api_key=3, min_version=0, max_version=8),))
        from kio.schema.metadata.v8.response import MetadataResponse

        assert request.__version__ == 8
        return MetadataResponse(throttle_time=0, brokers=(), cluster_id="c", controller_id=1, topics=(),
                                cluster_authorized_operations=0)

    async def close(self) -> None:
        pass


def client(broker: OldBroker) -> Any:
    cluster = Cluster.parse({"n1": {"broker": "b:1", "controller": None}})
    factory = KafkaClientFactory(cluster, lambda addr: broker, TopicsWorkload(["n1"], [1]).handlers())
    return asyncio.run(factory.open("n1", 0))


def test_negotiates_down_to_what_the_broker_serves() -> None:
    broker = OldBroker()
    c = client(broker)
    assert invoke(c, broker_read("topics", "list", "n1")).value == {"topics": []}
    assert invoke(c, broker_read("topics", "list", "n1")).type == "ok"
    assert [type(r).__name__ for r in broker.sent] == ["ApiVersionsRequest", "MetadataRequest", "MetadataRequest"]
    done = invoke(c, op("topics", "create", {"topic": "t0"}))  # CreateTopics not served at all: never sent
    assert done.type == "fail" and done.error.startswith("not-sent")


def test_unanswered_api_versions_leaves_the_op_unsent() -> None:
    broker = OldBroker(answer_api_versions=False)
    done = invoke(client(broker), op("topics", "create", {"topic": "t0"}))
    assert done.type == "fail" and "ApiVersions" in done.error
    assert all(isinstance(r, ApiVersionsRequest) for r in broker.sent)
