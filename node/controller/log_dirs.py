"""Log directories on the controller (KIP-858, Kafka's later design for a failed log directory).

A broker registers its online log directories (BrokerRegistration's LogDirs: the directory ids of
its `meta.properties`), kept in its RegisterBrokerRecord. Every new replica is placed on one of
its broker's directories (PartitionRecord's Directories, in replica order): the only one, as
Kafka's controller does, or, with several, the next in turn by partition (Kafka leaves those
UNASSIGNED until the broker's AssignReplicasToDirs; here the controller places them and the broker
creates the replica's log there); replicas a reassignment adds are placed the same way. A broker
without registered directories gets UNASSIGNED replicas.

When a heartbeat names OfflineLogDirs (a directory the broker can no longer use), the controller,
for each partition whose replica on that broker lived there, takes the broker out of the ISR and
elects another leader, then writes the broker's remaining directories (BrokerRegistrationChangeRecord's
LogDirs), in that order (Kafka's handleDirectoriesOffline): a replica on a failed directory is not
eligible to lead or to be in the ISR (MetadataImage.replica_online) until the broker registers
again with the directory back online. A broker that registers again without a directory one of
its replicas was placed on (a disk lost and formatted anew has a new directory id) gets that
replica placed on one of its registered directories, as its AssignReplicasToDirs would in Kafka, and
is not trusted to hold any committed record of it (cluster.register).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

from kraftlab.node.controller.partitions import change
from kraftlab.node.controller.write import Write
from kraftlab.node.metadata.image import UNASSIGNED_DIR, MetadataImage, PartitionInfo
from kraftlab.node.metadata.records import BrokerRegistrationChangeRecord, PartitionChangeRecord


def place_replicas(image: MetadataImage, replicas: tuple[int, ...], partition_index: int) -> tuple[uuid.UUID, ...]:
    """Each replica's directory for a new partition; () when no replica's broker registered any."""
    dirs = [sorted(b.log_dirs) if (b := image.brokers.get(r)) is not None else [] for r in replicas]
    if not any(dirs):
        return ()
    return tuple(d[partition_index % len(d)] if d else UNASSIGNED_DIR for d in dirs)


def directories_after(image: MetadataImage, p: PartitionInfo, replicas: tuple[int, ...],
                      partition_index: int) -> tuple[uuid.UUID, ...] | None:
    """The directories of a partition whose replicas become `replicas` (a reassignment): replicas
    that stay keep theirs, new ones are placed as at creation; None when none is known."""
    dirs = tuple(p.directory(r) if r in p.replicas else (place_replicas(image, (r,), partition_index) or
                                                         (UNASSIGNED_DIR,))[0] for r in replicas)
    return None if all(d == UNASSIGNED_DIR for d in dirs) else dirs


def lost_replicas(image: MetadataImage, broker_id: int) -> list[tuple[uuid.UUID, int]]:
    """The partitions (topic id, index) whose replica on `broker_id` is assigned to a directory the
    broker's registration no longer names: lost, or formatted anew with a new directory id."""
    b = image.brokers.get(broker_id)
    if b is None or not b.log_dirs:
        return []
    return [(topic.topic_id, pid) for topic, pid, p in image.partitions()
            if broker_id in p.replicas and p.directory(broker_id) not in (UNASSIGNED_DIR, *b.log_dirs)]


def rehome(w: Write, broker_id: int, lost: Iterable[tuple[uuid.UUID, int]]) -> None:
    """Place each `lost` replica on one of the broker's registered directories, where its log is
    created anew — what Kafka's broker reports with AssignReplicasToDirs; without it the replica
    would stay offline (`MetadataImage.replica_online`) and never rejoin the ISR."""
    for topic_id, pid in lost:
        p = w.image.topics[topic_id].partitions[pid]
        home = place_replicas(w.image, (broker_id,), pid)[0]
        dirs = tuple(home if r == broker_id else p.directory(r) for r in p.replicas)
        # Built as any other change (Kafka's PartitionChangeBuilder): a leaderless partition elects
        # whom it would elect now, as the same change of anything else would.
        rec = change(w.image, topic_id, pid, unclean=w.config.unclean_leader_election) or \
            PartitionChangeRecord(partition_id=pid, topic_id=topic_id)
        w.emit(dataclasses.replace(rec, directories=dirs))


def handle_offline_dirs(w: Write, broker_id: int, epoch: int, offline: Iterable[uuid.UUID]) -> list[str]:
    """Record the broker's failed directories and move its replicas there out of ISRs and
    leadership; the partitions changed (`topic-partition`)."""
    b = w.image.brokers[broker_id]
    failed = {d for d in offline if d in b.log_dirs}
    if not failed:
        return []
    moved = []
    for topic, pid, p in list(w.image.partitions()):
        if broker_id in p.replicas and p.directory(broker_id) in failed and (
                broker_id in p.isr or p.leader == broker_id):
            isr = tuple(r for r in p.isr if r != broker_id)
            rec = change(w.image, topic.topic_id, pid, isr=isr, unclean=w.config.unclean_leader_election,
                         ineligible=broker_id)
            if rec is not None:
                w.emit(rec)
                moved.append(f"{topic.name}-{pid}")
    # Last, as Kafka's handleDirectoriesOffline writes it: a heartbeat's records may span batches,
    # and no committed offset may show the directory offline while a replica on it leads or is in an ISR.
    online = tuple(d for d in b.log_dirs if d not in failed)
    w.emit(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, log_dirs=online))
    return moved
