"""Small but real handlers for protocol tests: Metadata (every version) and CreateTopics (stateful, async).

They answer every well-formed request of every registered version, whatever its field values, so
a fuzz run against them may expect an answer to every well-formed frame.
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass, field, fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.headers import response_schema
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from protocol.entities import zero_entity

METADATA_KEY, METADATA_VERSIONS = 3, (0, 12)
CREATE_TOPICS_KEY, CREATE_TOPICS_VERSIONS = 19, (2, 7)


def _nested(response_type: type[ResponsePayload], name: str) -> Any:
    return getattr(importlib.import_module(response_type.__module__), name)


@dataclass
class TopicStore:
    """Topics by name, created by CreateTopics and listed by Metadata."""

    topics: dict[str, int] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 9092
    max_topics: int = 8  # beyond it CreateTopics fails with POLICY_VIOLATION (keeps fuzzed responses small)

    def metadata(self, request: RequestPayload, context: RequestContext) -> ResponsePayload:
        response_type = response_schema(context.api_key, context.api_version)
        broker = zero_entity(
            _nested(response_type, "MetadataResponseBroker"), node_id=1, host="localhost", port=self.port
        )
        topic_type = _nested(response_type, "MetadataResponseTopic")
        requested = request.topics  # type: ignore[union-attr]
        names = sorted(self.topics) if requested is None else [t.name for t in requested]
        topics = tuple(
            zero_entity(
                topic_type,
                name=name,
                error_code=ErrorCode.none if name in self.topics else ErrorCode.unknown_topic_or_partition,
            )
            for name in names
            if name is not None
        )
        extra = {"controller_id": 1} if "controller_id" in {f.name for f in fields(response_type)} else {}
        return zero_entity(response_type, brokers=(broker,), topics=topics, **extra)

    async def create_topics(self, request: RequestPayload, context: RequestContext) -> ResponsePayload:
        await asyncio.sleep(0)  # a real await: the response is produced after other work ran
        response_type = response_schema(context.api_key, context.api_version)
        result_type = _nested(response_type, "CreatableTopicResult")
        results = []
        for topic in request.topics:  # type: ignore[union-attr]
            if topic.name in self.topics:
                error = ErrorCode.topic_already_exists
            elif topic.num_partitions == 0 or topic.num_partitions < -1:
                error = ErrorCode.invalid_partitions
            elif len(self.topics) >= self.max_topics:
                error = ErrorCode.policy_violation
            else:
                error = ErrorCode.none
                if not request.validate_only:  # type: ignore[union-attr]
                    self.topics[topic.name] = int(topic.num_partitions)
            results.append(zero_entity(result_type, name=topic.name, error_code=error))
        return zero_entity(response_type, topics=tuple(results))


def example_registry(store: TopicStore | None = None) -> ApiRegistry:
    """A registry serving ApiVersions, Metadata v0-12 and CreateTopics v2-7 from ``store``."""
    store = store if store is not None else TopicStore()
    registry = ApiRegistry()
    registry.register(METADATA_KEY, *METADATA_VERSIONS, store.metadata)
    registry.register(CREATE_TOPICS_KEY, *CREATE_TOPICS_VERSIONS, store.create_topics)
    return registry
