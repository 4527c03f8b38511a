"""CreatePartitions on the active controller: more partitions for existing topics.

Per topic, as Kafka's controller decides it: a topic named twice in one request is refused
(INVALID_REQUEST), an unknown one is UNKNOWN_TOPIC_OR_PARTITION; the new count must be larger
than the current one (INVALID_PARTITIONS); explicit assignments must be exactly one per new
partition, each with the replication factor of the topic's existing partitions, distinct
registered brokers and at least one usable (INVALID_REPLICA_ASSIGNMENT); without them the new
partitions are placed round-robin over the usable brokers with the topic's replication factor
(INVALID_REPLICATION_FACTOR when fewer brokers are usable). A topic being deleted cannot exist
here (deletion is one record). The new partitions are PartitionRecords numbered from the current
count, with every usable replica in the ISR and the first one leading; `validate_only` writes
nothing. The request is atomic (one batch).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.log_dirs import place_replicas
from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.topics import Invalid, check_replicas, check_size, place
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import TopicInfo
from kraftlab.node.metadata.records import NO_LEADER, PartitionRecord


def _replication_factor(topic: TopicInfo) -> int:
    """The topic's replication factor: its first partition's target replica count (as Kafka takes it)."""
    p = topic.partitions[min(topic.partitions)]
    return len([r for r in p.replicas if r not in p.removing])


def _new_assignment(w: Write, topic: TopicInfo, count: int, assignments: Any) -> list[tuple[int, ...]]:
    current = len(topic.partitions)
    if count < current:
        raise Invalid(ErrorCode.invalid_partitions,
                      f"The topic {topic.name} currently has {current} partition(s); {count} would not be an increase.")
    if count == current:
        raise Invalid(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    added = count - current
    check_size(w, added)
    factor = _replication_factor(topic)
    if assignments is not None:
        if len(assignments) != added:
            raise Invalid(ErrorCode.invalid_replica_assignment,
                          f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                          f"assignment(s) were specified.")
        out = []
        for k, a in enumerate(assignments):
            replicas = tuple(a.broker_ids)
            if len(replicas) != factor:
                raise Invalid(ErrorCode.invalid_replica_assignment,
                              f"The manual partition assignment includes a partition with {len(replicas)} "
                              f"replica(s), but this is not consistent with previous partitions, which have "
                              f"{factor} replica(s).")
            check_replicas(w, replicas, current + k)
            out.append(replicas)
        return out
    usable = w.image.usable_brokers()
    if factor > len(usable):
        raise Invalid(ErrorCode.invalid_replication_factor,
                      f"Unable to replicate the partition {factor} time(s): The target replication factor of "
                      f"{factor} cannot be reached because only {len(usable)} broker(s) are registered and usable.")
    return place(usable, added, factor, w.rng.randrange(len(usable)))


def _create_one(w: Write, t: Any, validate_only: bool) -> None:
    topic = w.image.topic(t.name)
    if topic is None:
        raise Invalid(ErrorCode.unknown_topic_or_partition, f"Unknown topic {t.name!r}.")
    current = len(topic.partitions)
    assignment = _new_assignment(w, topic, t.count, t.assignments)
    if validate_only:
        return
    for k, replicas in enumerate(assignment):
        isr = tuple(b for b in replicas if w.image.is_usable(b))
        w.emit(PartitionRecord(partition_id=current + k, topic_id=topic.topic_id, replicas=replicas, isr=isr,
                               leader=isr[0] if isr else NO_LEADER, leader_epoch=0, partition_epoch=0,
                               directories=place_replicas(w.image, replicas, current + k)))


def create_partitions(w: Write, req: Any) -> Outcome:
    names = [t.name for t in req.topics]
    results, decisions = [], []
    for t in req.topics:
        try:
            if names.count(t.name) > 1:
                raise Invalid(ErrorCode.invalid_request, f"Duplicate topic name {t.name!r}.")
            _create_one(w, t, bool(req.validate_only))
            result: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.none, "error_message": None}
        except Invalid as exc:
            result = {"name": t.name, "error_code": exc.code, "error_message": str(exc)}
        results.append(result)
        decisions.append({"api": "CreatePartitions", "topic": t.name, "count": int(t.count),
                          "error": error_name(result["error_code"])})
    return Outcome({"results": results}, decisions)
