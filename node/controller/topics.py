"""CreateTopics and DeleteTopics on the active controller.

CreateTopics, per topic: a legal name (INVALID_TOPIC_EXCEPTION), not already existing nor named
twice in the request (TOPIC_ALREADY_EXISTS / INVALID_REQUEST), not colliding with an existing topic
('.' and '_' are one character: INVALID_TOPIC_EXCEPTION, Kafka's topicsWithCollisionChars, judged
against the topics before the request); either explicit assignments
(with num_partitions and replication_factor -1; partitions 0..n-1, replicas registered and
distinct, at least one usable, every list as long: else INVALID_REPLICA_ASSIGNMENT) or a count and
factor (defaults for -1; a factor below 1 INVALID_REPLICATION_FACTOR, then a count below 1
INVALID_PARTITIONS, as Kafka's ReplicationControlManager judges them; INVALID_REPLICATION_FACTOR
when more than the usable brokers), placed
round-robin over usable brokers from a seeded start. A topic is one TopicRecord, its
PartitionRecords and ConfigRecords, all in the request's single batch. `validate_only` writes
nothing. DeleteTopics (by name or by id): a RemoveTopicRecord per existing topic asked once.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.log_dirs import place_replicas
from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import (
    NO_LEADER,
    RESOURCE_TOPIC,
    ConfigRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class Invalid(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def place(brokers: list[int], num_partitions: int, replication_factor: int, start: int) -> list[tuple[int, ...]]:
    """Round-robin placement: partition p's replicas are `replication_factor` consecutive brokers
    from `start + p`, so leaders (first replicas) spread evenly."""
    n = len(brokers)
    return [tuple(brokers[(start + p + k) % n] for k in range(replication_factor)) for p in range(num_partitions)]


MAX_RECORDS_PER_USER_OP = 10_000
"""As Kafka's controller: one request may not make more records than this (a CreateTopics asking
for two billion partitions must be refused before anything is built, not exhaust memory)."""


def check_size(w: Write, partitions: int) -> None:
    if len(w.records) + partitions + 1 > MAX_RECORDS_PER_USER_OP:
        raise Invalid(ErrorCode.policy_violation,
                      f"the request would create more than {MAX_RECORDS_PER_USER_OP} records "
                      f"({partitions} partitions asked for)")


def check_replicas(w: Write, replicas: tuple[int, ...], partition: int) -> None:
    """An explicit replica list (CreateTopics, CreatePartitions): non-empty, distinct, registered
    brokers, at least one usable — else INVALID_REPLICA_ASSIGNMENT."""
    if not replicas or len(set(replicas)) != len(replicas):
        raise Invalid(ErrorCode.invalid_replica_assignment, f"bad replicas {list(replicas)}")
    missing = [b for b in replicas if b not in w.image.brokers]
    if missing:
        raise Invalid(ErrorCode.invalid_replica_assignment, f"unregistered brokers {missing}")
    if not any(w.image.is_usable(b) for b in replicas):
        raise Invalid(
            ErrorCode.invalid_replica_assignment,
            f"all brokers of partition {partition} are fenced or in controlled shutdown",
        )


def _assignments(w: Write, topic: Any) -> list[tuple[int, ...]]:
    assignments = sorted(topic.assignments, key=lambda a: a.partition_index)
    if assignments:
        check_size(w, len(assignments))
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise Invalid(ErrorCode.invalid_request, "assignments given with num_partitions or replication_factor")
        if [a.partition_index for a in assignments] != list(range(len(assignments))):
            raise Invalid(ErrorCode.invalid_replica_assignment, "partitions must be numbered 0..n-1")
        out: list[tuple[int, ...]] = []
        for a in assignments:
            replicas = tuple(a.broker_ids)
            check_replicas(w, replicas, a.partition_index)
            if out and len(replicas) != len(out[0]):
                raise Invalid(ErrorCode.invalid_replica_assignment,
                              f"partition {a.partition_index} has {len(replicas)} replicas, the others {len(out[0])}")
            out.append(replicas)
        return out
    partitions = w.config.default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = w.config.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    if factor <= 0:  # Kafka judges the factor before the count
        raise Invalid(ErrorCode.invalid_replication_factor, "replication factor must be larger than 0")
    if partitions <= 0:
        raise Invalid(ErrorCode.invalid_partitions, "number of partitions must be larger than 0")
    check_size(w, partitions)
    usable = w.image.usable_brokers()
    if factor > len(usable):
        raise Invalid(
            ErrorCode.invalid_replication_factor,
            f"replication factor {factor} larger than the {len(usable)} available brokers",
        )
    return place(usable, partitions, factor, w.rng.randrange(len(usable)))


def unified(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' are one character in metric names."""
    return name.replace(".", "_")


def collision_names(image: MetadataImage) -> dict[str, str]:
    """The existing topics whose names have '.' or '_', by their unified name (Kafka's
    topicsWithCollisionChars): a new topic whose unified name is one of these collides."""
    return {unified(t.name): t.name for t in image.topics.values() if "." in t.name or "_" in t.name}


def _create_one(w: Write, topic: Any, validate_only: bool, colliding: dict[str, str]) -> dict[str, Any]:
    name = topic.name
    if name in (".", "..") or not _LEGAL.match(name):
        raise Invalid(ErrorCode.invalid_topic_exception, f"illegal topic name {name!r}")
    if w.image.topic(name) is not None:
        raise Invalid(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
    if ("." in name or "_" in name) and unified(name) in colliding:
        raise Invalid(ErrorCode.invalid_topic_exception,
                      f"topic {name!r} collides with existing topic {colliding[unified(name)]!r}")
    assignment = _assignments(w, topic)
    configs = [(c.name, c.value) for c in topic.configs if c.value is not None]
    result = {
        "name": name,
        "num_partitions": len(assignment),
        "replication_factor": len(assignment[0]),
        "topic_id": None,  # validate_only: no id (zero, which the wire carries as null)
    }
    if validate_only:
        return result
    tid = w.new_topic_id()
    w.emit(TopicRecord(name=name, topic_id=tid))
    for pid, replicas in enumerate(assignment):
        isr = tuple(b for b in replicas if w.image.is_usable(b))
        w.emit(
            PartitionRecord(
                partition_id=pid,
                topic_id=tid,
                replicas=replicas,
                isr=isr,
                leader=isr[0] if isr else NO_LEADER,
                leader_epoch=0,
                partition_epoch=0,
                directories=place_replicas(w.image, replicas, pid),
            )
        )
    for key, value in configs:
        w.emit(ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name=key, value=value))
    return {**result, "topic_id": tid}


def create_topics(w: Write, req: Any) -> Outcome:
    names = [t.name for t in req.topics]
    colliding = collision_names(w.image)  # the topics before this request, as Kafka judges collisions
    results, decisions = [], []
    for topic in req.topics:
        try:
            if names.count(topic.name) > 1:
                raise Invalid(ErrorCode.invalid_request, f"topic {topic.name!r} named more than once")
            validate_only = bool(getattr(req, "validate_only", False))
            result = {**_create_one(w, topic, validate_only, colliding), "error_code": ErrorCode.none}
        except Invalid as exc:
            result = {"name": topic.name, "error_code": exc.code, "error_message": str(exc)}
        results.append(result)
        decisions.append({"api": "CreateTopics", "topic": topic.name, "error": error_name(result["error_code"])})
    return Outcome({"topics": results}, decisions)


def delete_topics(w: Write, req: Any) -> Outcome:
    """As Kafka's ControllerApis.deleteTopics: a name or an id asked twice is refused (INVALID_REQUEST,
    not deleted), as is an entry naming both or neither; an unknown name UNKNOWN_TOPIC_OR_PARTITION, an
    unknown id UNKNOWN_TOPIC_ID; every other topic gets its RemoveTopicRecord."""
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if hasattr(req, "topics"):
        wanted = [(t.name, t.topic_id if t.topic_id is not None and t.topic_id.int != 0 else None) for t in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    asked = Counter(wanted)
    results, decisions = [], []
    for name, tid in wanted:
        topic = None
        if (name is None) == (tid is None) or asked[(name, tid)] > 1:
            code = ErrorCode.invalid_request
        elif tid is not None:
            topic = w.image.topics.get(tid)
            code = ErrorCode.unknown_topic_id
        else:
            topic = w.image.topic(name or "")
            code = ErrorCode.unknown_topic_or_partition
        if topic is None:
            results.append({"name": name, "topic_id": tid, "error_code": code})
        else:
            code = ErrorCode.none
            results.append({"name": topic.name, "topic_id": topic.topic_id, "error_code": code})
            w.emit(RemoveTopicRecord(topic_id=topic.topic_id))
        decisions.append(
            {"api": "DeleteTopics", "topic": name if topic is None else topic.name, "error": error_name(code)}
        )
    return Outcome({"responses": results}, decisions)
