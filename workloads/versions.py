"""Request versions for the broker-listener APIs, negotiated with ApiVersions like Kafka's clients.

Brokers may serve older versions than the newest kio knows (the node caps its client APIs at
non-flexible versions), so Metadata, CreateTopics and DeleteTopics are built in the highest
version both sides serve; fields a version lacks are left out (`entity`). Responses are read
with `getattr` defaults for fields of newer versions (topic ids: Metadata v10+, CreateTopics v7+).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from collections.abc import Sequence
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest

from kraftlab.workloads.client import DefiniteFailure

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
DATA_PLANE = (PRODUCE, FETCH, LIST_OFFSETS)
"""The APIs a broker must serve before producers and consumers can use it (the queue workload)."""
METADATA, CREATE_TOPICS, DELETE_TOPICS = 3, 19, 20
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS = 29, 30, 31, 32
OURS: dict[int, tuple[int, int]] = {METADATA: (1, 12), CREATE_TOPICS: (2, 7), DELETE_TOPICS: (1, 6),
                                    # v1: literal and prefixed patterns; every server of KIP-290 on serves it
                                    DESCRIBE_ACLS: (1, 1), CREATE_ACLS: (1, 1), DELETE_ACLS: (1, 1),
                                    DESCRIBE_CONFIGS: (1, 1)}
_NAMES = {METADATA: "metadata", CREATE_TOPICS: "create_topics", DELETE_TOPICS: "delete_topics",
          DESCRIBE_ACLS: "describe_acls", CREATE_ACLS: "create_acls", DELETE_ACLS: "delete_acls",
          DESCRIBE_CONFIGS: "describe_configs"}

Ranges = dict[int, tuple[int, int]]


def request_module(api_key: int, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{_NAMES[api_key]}.v{version}.request")


def entity(cls: type, **values: Any) -> Any:
    """An instance of the kio class `cls` from the values it has fields for."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


async def server_ranges(transport: Any) -> Ranges:
    """The server's api key → (min, max) version (ApiVersions v0: every server answers it)."""
    resp = await transport.send(ApiVersionsRequest())
    if int(resp.error_code) != 0:
        raise DefiniteFailure(f"not-sent: ApiVersions error {int(resp.error_code)}")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}


def serves(server: Ranges, api_keys: Sequence[int]) -> bool:
    """Whether the server's ApiVersions lists every one of `api_keys`."""
    return all(k in server for k in api_keys)


def pick(server: Ranges, api_key: int) -> int:
    """The highest version of `api_key` both sides serve."""
    lo, hi = OURS[api_key]
    s = server.get(api_key)
    if s is None or max(lo, s[0]) > min(hi, s[1]):
        raise DefiniteFailure(f"not-sent: no common version of api {api_key} (server {s}, ours {(lo, hi)})")
    return min(hi, s[1])


def metadata_request(version: int, topics: Sequence[str] | None) -> Any:
    """Metadata for `topics` (all topics when None; none when empty)."""
    mod = request_module(METADATA, version)
    wanted = None if topics is None else tuple(entity(mod.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    return entity(mod.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                  include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def create_topics_request(version: int, name: str, *, partitions: int = -1, replication_factor: int = -1,
                          assignment: Sequence[Sequence[int]] = (), timeout_ms: int = 3000) -> Any:
    mod = request_module(CREATE_TOPICS, version)
    topic = mod.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        assignments=tuple(mod.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(reps))
                          for i, reps in enumerate(assignment)),
        configs=())
    return entity(mod.CreateTopicsRequest, topics=(topic,), timeout=datetime.timedelta(milliseconds=timeout_ms),
                  validate_only=False)


def delete_topics_request(version: int, name: str, *, timeout_ms: int = 3000) -> Any:
    mod = request_module(DELETE_TOPICS, version)
    timeout = datetime.timedelta(milliseconds=timeout_ms)
    if hasattr(mod, "DeleteTopicState"):
        return mod.DeleteTopicsRequest(topics=(mod.DeleteTopicState(name=name, topic_id=None),), timeout=timeout)
    return mod.DeleteTopicsRequest(topic_names=(name,), timeout=timeout)
