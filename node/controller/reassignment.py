"""Partition reassignment (KIP-455 as KIP-631 describes it) and preferred leader election.

AlterPartitionReassignments, per partition: a target that is a subset of the current replicas
and meets the ISR completes at once (replicas := target, ISR pruned, leader moved if needed);
otherwise the replica list becomes target + the replicas being removed, with adding/removing
set, and the reassignment completes when an AlterPartition (or an unfencing) puts every target
replica in the ISR (partitions.change). A null target cancels: back to the original replicas.
Reassignments are hard state (in the partition records), so they survive failover.
ListPartitionReassignments lists the ongoing ones. ElectLeaders: preferred (type 0) moves
leadership to the first replica when it is an eligible ISR member; unclean (type 1) elects any
usable replica of a leaderless partition.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.log_dirs import directories_after
from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.partitions import change
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage, TopicInfo
from kraftlab.node.metadata.records import NO_LEADER


def _reassign_one(w: Write, topic: TopicInfo, pid: int, target: tuple[int, ...] | None) -> tuple[ErrorCode, str | None]:
    p = topic.partitions[pid]
    tid = topic.topic_id
    if target is None:
        if not p.reassigning:
            return ErrorCode.no_reassignment_in_progress, "no reassignment in progress"
        original = p.original_replicas
        isr = tuple(b for b in p.isr if b in original)
        if not isr:
            return ErrorCode.invalid_replica_assignment, "cancelling would leave an empty ISR"
        rec = change(w.image, tid, pid, replicas=original, isr=isr, removing=(), adding=())
    else:
        if not target or len(set(target)) != len(target):
            return ErrorCode.invalid_replica_assignment, f"bad target {list(target)}"
        missing = [b for b in target if b not in w.image.brokers]
        if missing:
            return ErrorCode.invalid_replica_assignment, f"unregistered brokers {missing}"
        current = p.original_replicas
        isr = tuple(b for b in p.isr if b in current)
        if set(target) <= set(current) and set(target) & set(isr):
            rec = change(
                w.image, tid, pid, replicas=target, isr=tuple(b for b in isr if b in target), removing=(), adding=()
            )
        else:
            merged = target + tuple(r for r in current if r not in target)
            adding = tuple(r for r in target if r not in current)
            removing = tuple(r for r in current if r not in target)
            rec = change(w.image, tid, pid, replicas=merged, isr=isr, removing=removing, adding=adding)
    if rec is not None and rec.replicas is not None and rec.directories is None:
        rec = replace(rec, directories=directories_after(w.image, p, rec.replicas, pid))
    if rec is not None:
        w.emit(rec)
    return ErrorCode.none, None


def alter_reassignments(w: Write, req: Any) -> Outcome:
    out_topics, decisions = [], []
    for rt in req.topics:
        topic = w.image.topic(rt.name)
        parts = []
        for rp in rt.partitions:
            msg: str | None
            if topic is None or rp.partition_index not in topic.partitions:
                code, msg = ErrorCode.unknown_topic_or_partition, "unknown topic or partition"
            else:
                target = tuple(rp.replicas) if rp.replicas is not None else None
                code, msg = _reassign_one(w, topic, rp.partition_index, target)
            parts.append({"partition_index": rp.partition_index, "error_code": code, "error_message": msg})
            decisions.append(
                {
                    "api": "AlterPartitionReassignments",
                    "topic": rt.name,
                    "partition": rp.partition_index,
                    "replicas": None if rp.replicas is None else list(rp.replicas),
                    "error": error_name(code),
                }
            )
        out_topics.append({"name": rt.name, "partitions": parts})
    return Outcome({"error_code": ErrorCode.none, "responses": out_topics}, decisions)


def list_reassignments(image: MetadataImage, req: Any) -> Outcome:
    wanted: dict[str, list[int] | None]
    if req.topics is None:
        wanted = {t.name: None for t in image.topics.values()}
    else:
        wanted = {t.name: list(t.partition_indexes) for t in req.topics}
    out = []
    for name in sorted(wanted):
        topic = image.topic(name)
        if topic is None:
            continue
        requested = wanted[name]
        pids = requested if requested is not None else sorted(topic.partitions)
        parts = [
            {
                "partition_index": pid,
                "replicas": p.replicas,
                "adding_replicas": p.adding,
                "removing_replicas": p.removing,
            }
            for pid in pids
            if (p := topic.partitions.get(pid)) is not None and p.reassigning
        ]
        if parts:
            out.append({"name": name, "partitions": parts})
    return Outcome({"error_code": ErrorCode.none, "topics": out})


def _elect_one(w: Write, topic: TopicInfo, pid: int, unclean: bool) -> ErrorCode:
    p = topic.partitions[pid]
    if unclean:
        if p.leader != NO_LEADER:
            return ErrorCode.election_not_needed
        rec = change(w.image, topic.topic_id, pid, unclean=True)
        if rec is None or rec.leader in (NO_LEADER, -2):
            return ErrorCode.eligible_leaders_not_available
    else:
        preferred = p.replicas[0]
        if p.leader == preferred:
            return ErrorCode.election_not_needed
        if preferred not in p.isr or not w.image.is_usable(preferred):
            return ErrorCode.preferred_leader_not_available
        rec = change(w.image, topic.topic_id, pid, prefer_preferred=True)
    if rec is not None:
        w.emit(rec)
    return ErrorCode.none


def elect_leaders(w: Write, req: Any) -> Outcome:
    unclean = getattr(req, "election_type", 0) == 1
    everything = req.topic_partitions is None
    if everything:
        wanted = [(t.name, sorted(t.partitions)) for t in sorted(w.image.topics.values(), key=lambda t: t.name)]
    else:
        wanted = [(tp.topic, list(tp.partitions)) for tp in req.topic_partitions]
    results, decisions = [], []
    for name, pids in wanted:
        topic = w.image.topic(name)
        parts = []
        for pid in pids:
            if topic is None or pid not in topic.partitions:
                code = ErrorCode.unknown_topic_or_partition
            else:
                code = _elect_one(w, topic, pid, unclean)
            if everything and code == ErrorCode.election_not_needed:
                continue
            parts.append({"partition_id": pid, "error_code": code, "error_message": None})
            decisions.append({"api": "ElectLeaders", "topic": name, "partition": pid, "error": error_name(code)})
        if parts or not everything:
            results.append({"topic": name, "partition_result": parts})
    return Outcome({"error_code": ErrorCode.none, "replica_election_results": results}, decisions)
