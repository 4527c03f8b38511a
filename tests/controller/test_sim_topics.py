"""The cluster simulator's topic administrator (node/sim/kraft_topics.py): CreateTopics and DeleteTopics
drawn over their whole space, each answer judged as Kafka's ReplicationControlManager answers it, and
controllers handling part of that space wrong — deliberately wrong handlers put in for the test —
caught in a run."""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

import kraftlab.node.controller.topics as topics
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import TopicRecord
from kraftlab.node.protocol.served import CONTROLLER_API_VERSIONS
from kraftlab.node.sim.kraft import TOPIC_CONFIGS, KraftSim, SimViolation
from kraftlab.node.sim.kraft_topics import POOL, TopicAdmin, TopicFacts, request_timeout

Handler = Callable[[Write, Any], Outcome]


def _admin() -> TopicAdmin:
    return TopicAdmin(random.Random(0), [101, 102, 103], TOPIC_CONFIGS, 1, 1, CONTROLLER_API_VERSIONS)


def _topic(name: str, partitions: int, factor: int) -> CreatableTopic:
    return CreatableTopic(name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(factor),
                          assignments=(), configs=())


def _judge(asked: list[CreatableTopic], codes: list[ErrorCode], usable: int = 3) -> str | None:
    request = CreateTopicsRequest(topics=tuple(asked), timeout=request_timeout(), validate_only=True)
    response = CreateTopicsResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=tuple(
        CreatableTopicResult(name=t.name, topic_id=None, error_code=c, error_message=None, num_partitions=i32(1),
                             replication_factor=i16(1), configs=None) for t, c in zip(asked, codes, strict=True)))
    old = uuid.uuid4()
    after = MetadataImage()
    after.apply(TopicRecord(name="old", topic_id=old))
    facts = TopicFacts({"old": old}, frozenset({101, 102, 103}), frozenset([101, 102, 103][:usable]), after)
    return _admin().judge(request, facts, response)


def test_the_model_refuses_in_kafkas_order() -> None:
    e = ErrorCode
    assert _judge([_topic("a", 0, 0)], [e.invalid_replication_factor]) is None
    assert _judge([_topic("a", 0, 0)], [e.invalid_partitions]) is not None  # the factor is judged first
    assert _judge([_topic("a", 0, -1)], [e.invalid_partitions]) is None
    assert _judge([_topic("a", 1, 1), _topic("a", 1, 1)], [e.invalid_request] * 2) is None
    assert _judge([_topic("old", 0, 0)], [e.topic_already_exists]) is None
    assert _judge([_topic("a b", 1, 1)], [e.invalid_topic_exception]) is None
    assert _judge([_topic("a", 1, 4)], [e.invalid_replication_factor]) is None
    assert _judge([_topic("a", 1, 4)], [e.none]) is not None
    # between the usable and the registered brokers Kafka's placer may use fenced ones: both accepted
    assert _judge([_topic("a", 1, 3)], [e.none], usable=2) is None
    assert _judge([_topic("a", 1, 3)], [e.invalid_replication_factor], usable=2) is None
    assert _judge([_topic("a", 1, 3)], [e.invalid_replication_factor], usable=3) is not None


def _literal_defaults(original: Handler) -> Handler:
    """CreateTopics reading num_partitions -1 as 3 instead of the controller's num.partitions."""
    def wrong(w: Write, req: Any) -> Outcome:
        topics_ = tuple(dataclasses.replace(t, num_partitions=i32(3)) if t.num_partitions == -1 and not t.assignments
                        else t for t in req.topics)
        return original(w, dataclasses.replace(req, topics=topics_))
    return wrong


def _validates_by_creating(original: Handler) -> Handler:
    """CreateTopics ignoring validate_only (the topics are written)."""
    def wrong(w: Write, req: Any) -> Outcome:
        return original(w, dataclasses.replace(req, validate_only=False) if hasattr(req, "validate_only") else req)
    return wrong


def _deletes_duplicates(original: Handler) -> Handler:
    """DeleteTopics deleting a topic asked twice (once) instead of refusing it."""
    def wrong(w: Write, req: Any) -> Outcome:
        if hasattr(req, "topics"):
            return original(w, dataclasses.replace(req, topics=tuple(dict.fromkeys(req.topics))))
        return original(w, dataclasses.replace(req, topic_names=tuple(dict.fromkeys(req.topic_names))))
    return wrong


def _no_collisions(original: Callable[[MetadataImage], dict[str, str]]) -> Callable[[MetadataImage], dict[str, str]]:
    """No name collides: a_b is created beside a.b."""
    return lambda image: {}


class _Edges(TopicAdmin):
    """Every request an edge: a topic created with both counts -1 (the controller's defaults), the
    same validated only, and a topic that exists deleted by a request naming it twice; the pool's
    names in turn from the last (adm_5, then adm.5, which collides with it)."""

    def request(self, image: MetadataImage) -> Any:
        self.sent = getattr(self, "sent", 0) + 1
        name = POOL[-1 - self.sent // 3 % len(POOL)]
        if self.sent % 3 == 0:
            twice = (DeleteTopicState(name=TopicName(name), topic_id=None),) * 2
            return DeleteTopicsRequest(topics=twice, timeout=request_timeout())
        return CreateTopicsRequest(topics=(_topic(name, -1, -1),), timeout=request_timeout(),
                                   validate_only=self.sent % 3 == 1)


@pytest.mark.parametrize(("handler", "wrong"), [("create_topics", _literal_defaults),
                                                ("create_topics", _validates_by_creating),
                                                ("delete_topics", _deletes_duplicates),
                                                ("collision_names", _no_collisions)])
def test_a_controller_handling_part_of_the_space_wrong_is_caught(handler: str, wrong: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics, handler, wrong(getattr(topics, handler)))
    sim = KraftSim(seed=3)
    sim.topic_admin = _Edges(random.Random(3), sim.broker_ids, TOPIC_CONFIGS, 1, 1, CONTROLLER_API_VERSIONS)
    with pytest.raises(SimViolation, match="Topics v"):
        sim.run(fault_ms=15_000, settle_ms=15_000)
