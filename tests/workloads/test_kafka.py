"""The Kafka connection helper: error codes and transport failures mapped to Jepsen's fail/info,
the active controller found with DescribeQuorum and re-discovered after NOT_CONTROLLER."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.protocol.errors import ClientClosed, ConnectFailed, ConnectionLost, InvalidRequest, RequestTimedOut
from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.interpreter import invoke_once
from kraftlab.workloads.kafka import Cluster, IndefiniteError, call, check, is_definite
from kraftlab.workloads.ops import broker_read, op
from kraftlab.workloads.session import KafkaClient, KafkaClientFactory
from kraftlab.workloads.topics import TopicsWorkload

DEFINITE = ["TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_OR_PARTITION", "STALE_BROKER_EPOCH",
            "DUPLICATE_BROKER_REGISTRATION", "FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION", "INELIGIBLE_REPLICA",
            "BROKER_ID_NOT_REGISTERED", "INVALID_REQUEST", "INVALID_REPLICA_ASSIGNMENT", "INVALID_PARTITIONS",
            "INVALID_REPLICATION_FACTOR", "INVALID_TOPIC_EXCEPTION"]
INDEFINITE = ["NOT_CONTROLLER", "REQUEST_TIMED_OUT", "UNKNOWN_SERVER_ERROR", "NOT_ENOUGH_REPLICAS"]


@pytest.mark.parametrize("name", DEFINITE)
def test_definite_refusals_fail_with_their_name(name: str) -> None:
    code = ErrorCode[name.lower()]
    with pytest.raises(DefiniteFailure) as e:
        check(code, {"topic": "t0"})
    assert e.value.error == name and e.value.value == {"topic": "t0"}
    assert is_definite(name)


@pytest.mark.parametrize("name", INDEFINITE)
def test_not_controller_and_timeouts_are_indefinite(name: str) -> None:
    with pytest.raises(IndefiniteError) as e:
        check(ErrorCode[name.lower()])
    assert e.value.error == name
    assert not is_definite(name)


def test_none_passes() -> None:
    check(ErrorCode.none)
    check(0)


class Failing:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def send(self, request: Any) -> Any:
        raise self.exc

    async def close(self) -> None:
        pass


@pytest.mark.parametrize("exc", [ConnectFailed("refused"), ClientClosed("closed"), InvalidRequest("bad")])
def test_never_sent_is_a_definite_failure(exc: Exception) -> None:
    with pytest.raises(DefiniteFailure) as e:
        asyncio.run(call(Failing(exc), object()))
    assert e.value.error.startswith("not-sent")


@pytest.mark.parametrize("exc", [RequestTimedOut("slow"), ConnectionLost("reset")])
def test_sent_without_answer_propagates(exc: Exception) -> None:
    with pytest.raises(type(exc)):
        asyncio.run(call(Failing(exc), object()))


def open_client(fake: FakeKafka, node: str = "n1", process: int = 0, **kw: Any) -> KafkaClient:
    cluster = Cluster.parse(fake.spec())
    topics = TopicsWorkload(cluster.brokers, [1, 2, 3], **kw)
    factory = KafkaClientFactory(cluster, fake.connector, topics.handlers())
    return asyncio.run(factory.open(node, process))


def invoke(client: KafkaClient, inv: Invocation) -> Any:
    return asyncio.run(invoke_once(client, inv, 2.0))


def test_completion_types_through_the_interpreter() -> None:
    fake = FakeKafka()
    client = open_client(fake)
    assert invoke(client, op("topics", "create", {"topic": "t1"})).type == "ok"
    done = invoke(client, op("topics", "create", {"topic": "t1"}))
    assert (done.type, done.error) == ("fail", "TOPIC_ALREADY_EXISTS")
    fake.p_timeout = 1.0
    done = invoke(client, op("topics", "delete", {"topic": "t1"}))
    assert done.type == "info" and "RequestTimedOut" in done.error
    fake.p_timeout, fake.p_lost = 0.0, 1.0
    assert invoke(client, op("topics", "create", {"topic": "t2"})).type == "info"
    assert "t2" in fake.topics  # applied although the answer was lost: info was right
    fake.p_lost, fake.p_not_controller = 0.0, 1.0
    done = invoke(client, op("topics", "create", {"topic": "t3"}))
    assert (done.type, done.error) == ("info", "NOT_CONTROLLER")
    fake.p_not_controller = 0.0
    fake.down.add("n1:9092")
    done = invoke(client, op("topics", "create", {"topic": "t4"}))
    assert done.type == "fail" and done.error.startswith("not-sent") and "t4" not in fake.topics


def test_an_unanswered_read_fails_without_retiring() -> None:
    fake = FakeKafka()
    client = open_client(fake)
    assert invoke(client, broker_read("topics", "list", "n2")).type == "ok"  # versions now known
    assert invoke(client, op("topics", "create", {"topic": "t9"})).type == "ok"

    async def lost(addr: str, request: Any, conn: Any = None) -> Any:
        raise ConnectionLost("reset")

    fake.send = lost  # type: ignore[method-assign]
    done = invoke(client, broker_read("topics", "list", "n2"))
    assert (done.type, done.error) == ("fail", "read-unanswered: ConnectionLost")
    assert invoke(client, op("topics", "create", {"topic": "t0"})).type == "info"  # a write stays in doubt


def test_unknown_op_is_not_sent() -> None:
    done = invoke(open_client(FakeKafka()), op("topics", "rename", {"topic": "t1"}))
    assert done.type == "fail" and "no handler" in done.error


def test_active_controller_rediscovered_after_not_controller() -> None:
    fake = FakeKafka(nodes=3, controllers=3)
    spec = fake.spec()
    spec["n3"]["broker"] = None  # a controller-only node: its creates go straight to the controller
    cluster = Cluster.parse(spec)
    factory = KafkaClientFactory(cluster, fake.connector, TopicsWorkload(cluster.brokers, [1, 2]).handlers())
    client = asyncio.run(factory.open("n3", 0))

    def quorum_asks() -> int:
        return sum(isinstance(r, DescribeQuorumRequest) for r in fake.requests)

    assert invoke(client, op("topics", "create", {"topic": "t0"})).type == "ok"
    assert quorum_asks() == 1
    assert invoke(client, op("topics", "create", {"topic": "t1"})).type == "ok"
    assert quorum_asks() == 1  # cached
    fake.leader = 2  # a new leader: the old one answers NOT_CONTROLLER, in doubt
    done = invoke(client, op("topics", "create", {"topic": "t2"}))
    assert (done.type, done.error) == ("info", "NOT_CONTROLLER")
    assert invoke(client, op("topics", "create", {"topic": "t3"})).type == "ok"
    assert quorum_asks() == 2 and "t3" in fake.topics


def test_discovery_skips_a_dead_controller_and_fails_definitely_when_none_answers() -> None:
    fake = FakeKafka()
    spec = fake.spec()
    spec["n1"]["broker"] = None
    cluster = Cluster.parse(spec)
    factory = KafkaClientFactory(cluster, fake.connector, TopicsWorkload(cluster.brokers, [2, 3]).handlers())
    client = asyncio.run(factory.open("n1", 0))
    fake.down.add("n1:9093")
    fake.leader = 2  # n1 is gone; n2 leads: discovery asks n1 first (its own node), then n2
    assert invoke(client, op("topics", "create", {"topic": "t0"})).type == "ok"
    fake.down |= {"n2:9093", "n3:9093"}
    client = asyncio.run(factory.open("n1", 1))
    done = invoke(client, op("topics", "create", {"topic": "t1"}))
    assert done.type == "fail" and "no active controller" in done.error


def test_cluster_parse_ids_from_names_or_given() -> None:
    c = Cluster.parse({"n1": {"broker": "10.0.0.1:9092", "controller": None},
                       "x": {"broker": None, "controller": "10.0.0.2:9093", "id": 7}})
    assert c.nodes["n1"].id == 1 and c.controller_addr(7) == "10.0.0.2:9093"
    assert c.brokers == ["n1"] and c.controllers == ["x"]
    with pytest.raises(ValueError):
        Cluster.parse({"alpha": {"broker": "h:1"}})
