"""The cluster simulator's clients send each request at a version drawn from the range the node
advertises (node/sim/versions.py), and every answer must come at the version asked: the rebuilding
at each version, the spread of a run, and a broker relaying answers at the wrong version — a
deliberately wrong relay put in for the test — caught."""

from __future__ import annotations

import datetime
import random
from typing import Any

import pytest
from kio.schema.create_topics.v4.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreateTopicsResponse as NewestCreateTopicsResponse
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

import kraftlab.node.broker.apis as broker_apis
import kraftlab.node.controller.quorum_controller as quorum_controller
from kraftlab.node.controller.messages import api_name, build, respond
from kraftlab.node.sim.kraft import KraftSim, SimViolation
from kraftlab.node.sim.kraft_tokens import TokenClient
from kraftlab.node.sim.versions import BROKER, CONTROLLER, at_version, versions
from kraftlab.node.sim.wire import through_the_wire


def _create_topics() -> CreateTopicsRequest:
    topic = CreatableTopic(name=TopicName("t"), num_partitions=i32(3), replication_factor=i16(2), assignments=(),
                           configs=(CreatableTopicConfig(name="retention.ms", value="60000"),))
    return CreateTopicsRequest(topics=(topic,), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)))


@pytest.mark.parametrize("served", [BROKER, CONTROLLER], ids=["broker", "controller"])
def test_every_advertised_version_is_rebuilt_and_goes_through_the_wire(served: dict[str, Any]) -> None:
    client = TokenClient(random.Random(7))
    client.hmacs.append(b"mac")
    requests = [_create_topics(), *(client.request() for _ in range(30))]
    for request in requests:
        span = versions(request, served)
        assert len(span) >= 2
        for v in span:
            sent = through_the_wire(at_version(request, v), "test")
            assert sent.__version__ == v and api_name(sent) == api_name(request)
            back = at_version(sent, request.__version__)
            # what every version carries survives the trip to an older version and back
            if api_name(request) == "CreateTopics":
                assert back.topics == request.topics
            elif api_name(request) == "CreateDelegationToken":
                assert (back.renewers, back.max_lifetime) == (request.renewers, request.max_lifetime)
            else:
                assert back.hmac == request.hmac


def test_a_run_sends_several_versions_of_each_api() -> None:
    sim = KraftSim(seed=1)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    for api in ("CreateTopics", "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken",
                "ElectLeaders", "AlterClientQuotas"):
        assert len({v for a, v in sim.sent_versions if a == api}) >= 2, (api, sim.sent_versions)


def test_a_broker_relaying_at_the_wrong_version_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    right = broker_apis.respond

    def newest(request: Any, values: dict[str, Any]) -> Any:
        if api_name(request) == "CreateTopics":
            return build(NewestCreateTopicsResponse, values)
        return right(request, values)

    monkeypatch.setattr(broker_apis, "respond", newest)
    sim = KraftSim(seed=1)
    with pytest.raises(SimViolation, match=r"answered a v\d request with CreateTopicsResponse v7"):
        sim.run(fault_ms=15_000, settle_ms=15_000)


def test_an_elect_leaders_refusal_without_its_partitions_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ElectLeaders v0 has no top-level error code: a NOT_CONTROLLER answered only there reads as
    "nothing to elect" (Kafka puts it on every partition asked)."""
    right = quorum_controller.error_response

    def top_level_only(request: Any, code: Any) -> Any:
        if api_name(request) == "ElectLeaders":
            return respond(request, {"error_code": code})
        return right(request, code)

    monkeypatch.setattr(quorum_controller, "error_response", top_level_only)
    caught = []
    for seed in (1, 2, 3):  # a v0 ElectLeaders must meet a standby or a failover: the first run nearly always
        try:
            KraftSim(seed=seed).run(fault_ms=15_000, settle_ms=15_000)
        except SimViolation as exc:
            caught.append(str(exc))
            break
    assert caught and "ElectLeaders answered" in caught[0]
