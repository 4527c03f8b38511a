"""AlterPartition (v2+, topic ids): a partition leader asks to change its ISR.

Validated in Kafka's order: the sender's broker epoch (STALE_BROKER_EPOCH, top level); then per
partition: unknown topic id (UNKNOWN_TOPIC_ID) or partition (UNKNOWN_TOPIC_OR_PARTITION); a
leader or partition epoch ahead of ours (NOT_CONTROLLER: this controller is behind); an older
leader epoch (FENCED_LEADER_EPOCH); a sender that is not the leader (INVALID_REQUEST); an older
partition epoch (INVALID_UPDATE_VERSION); an ISR with duplicates, non-replicas or without the
leader (INVALID_REQUEST); a member that is unregistered, fenced, in controlled shutdown, (v3)
of another broker epoch, or whose replica is on a failed log directory (INELIGIBLE_REPLICA). An
accepted ISR bumps the partition epoch and may
complete a reassignment; if that moves leadership away from the sender the answer is
FENCED_LEADER_EPOCH (KIP-631), otherwise the partition state actually applied.

Each partition's `decision` journal event carries the state after the decision (`isr`,
`leader`, `replicas`, `leader_epoch`, `partition_epoch`), what was asked (`requested_isr`, its
members' `requested_broker_epochs` — -1 where v2 or the sender gave none —,
`requested_leader_epoch`, `requested_partition_epoch`), and `changed`:
an accepted request that changes nothing writes no record and repeats the partition epoch.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.partitions import change, is_valid_isr
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage, PartitionInfo


def _new_isr(pd: Any) -> list[tuple[int, int]]:
    """(broker id, broker epoch or -1) of the requested ISR, for v2 and v3 alike."""
    if hasattr(pd, "new_isr_with_epochs"):
        return [(s.broker_id, s.broker_epoch) for s in pd.new_isr_with_epochs]
    return [(b, -1) for b in pd.new_isr]


def validate(image: MetadataImage, sender: int, p: PartitionInfo, pd: Any) -> ErrorCode:
    """The per-partition checks after the partition was found, in Kafka's order."""
    if pd.leader_epoch > p.leader_epoch or pd.partition_epoch > p.partition_epoch:
        return ErrorCode.not_controller
    if pd.leader_epoch < p.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if sender != p.leader:
        return ErrorCode.invalid_request
    if pd.partition_epoch < p.partition_epoch:
        return ErrorCode.invalid_update_version
    members = _new_isr(pd)
    isr = tuple(b for b, _ in members)
    if not is_valid_isr(p, isr) or p.leader not in isr:
        return ErrorCode.invalid_request
    for b, epoch in members:
        reg = image.brokers.get(b)
        if reg is None or reg.fenced or reg.in_controlled_shutdown or (epoch != -1 and epoch != reg.epoch):
            return ErrorCode.ineligible_replica
        if not image.replica_online(p, b):  # its replica is on a failed log directory
            return ErrorCode.ineligible_replica
    return ErrorCode.none


def alter_partition(w: Write, req: Any) -> Outcome:
    sender, sender_epoch = req.broker_id, req.broker_epoch
    reg = w.image.brokers.get(sender)
    base = {"api": "AlterPartition", "broker": sender, "broker_epoch": sender_epoch}
    stale = reg is not None and reg.epoch != sender_epoch and not w.config.bugs.on("accept-stale-broker-epoch")
    if reg is None or stale:  # BUG ZOO: accept-stale-broker-epoch skips the epoch comparison
        code = ErrorCode.stale_broker_epoch
        return Outcome({"error_code": code, "topics": []}, [{**base, "error": error_name(code)}])
    topics_out, decisions = [], []
    for td in req.topics:
        topic = w.image.topics.get(td.topic_id)
        parts_out = []
        for pd in td.partitions:
            pid = pd.partition_index
            p = topic.partitions.get(pid) if topic is not None else None
            if topic is None:
                code = ErrorCode.unknown_topic_id
            elif p is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                code = validate(w.image, sender, p, pd)
            rec = None
            if code == ErrorCode.none and topic is not None:
                rec = change(w.image, td.topic_id, pid, isr=tuple(b for b, _ in _new_isr(pd)))
                if rec is not None:
                    w.emit(rec)
                p = topic.partitions[pid]
                if p.leader != sender:
                    code = ErrorCode.fenced_leader_epoch
            out: dict[str, Any] = {"partition_index": pid, "error_code": code}
            if code == ErrorCode.none and p is not None:
                out |= {
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "isr": p.isr,
                    "partition_epoch": p.partition_epoch,
                }
            parts_out.append(out)
            decisions.append(
                {
                    **base,
                    "topic": topic.name if topic is not None else str(td.topic_id),
                    "topic_id": str(td.topic_id),
                    "partition": pid,
                    "leader_epoch": p.leader_epoch if p is not None else pd.leader_epoch,
                    "partition_epoch": p.partition_epoch if p is not None else pd.partition_epoch,
                    "isr": list(p.isr) if p is not None else [b for b, _ in _new_isr(pd)],
                    "leader": p.leader if p is not None else None,
                    "replicas": list(p.replicas) if p is not None else None,
                    "changed": rec is not None,
                    "requested_isr": [b for b, _ in _new_isr(pd)],
                    "requested_broker_epochs": [e for _, e in _new_isr(pd)],
                    "requested_leader_epoch": pd.leader_epoch,
                    "requested_partition_epoch": pd.partition_epoch,
                    "error": error_name(code),
                }
            )
        topics_out.append({"topic_id": td.topic_id, "partitions": parts_out})
    return Outcome({"error_code": ErrorCode.none, "topics": topics_out}, decisions)
