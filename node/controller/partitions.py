"""Partition changes: the one place that decides ISRs, leaders and reassignment completion.

`change()` turns a wanted partition state into a minimal PartitionChangeRecord (or None when
nothing changes), like Kafka's PartitionChangeBuilder:

- a reassignment completes once every target replica is in the ISR (replicas := target, the
  ISR pruned to it, adding/removing cleared);
- the leader stays if it is still an eligible ISR member; otherwise the first eligible replica
  in preference order leads; an eligible broker is registered, unfenced and not in controlled
  shutdown; with no eligible ISR member the partition has no leader (-1), never an unclean
  leader unless `unclean` is set;
- when fencing empties an ISR, its last member is remembered (LastKnownElr) and leads again
  (alone in the ISR) once it is unfenced: it holds every committed message;
- unless it comes back from an unclean shutdown (KIP-966's `uncleanShutdownReplicas`) without the
  log directories it registered before: a new directory id (KIP-858) is a lost and reformatted disk,
  an empty log, so it is struck from the ISR and the remembered members and never elected from them;
  with nobody else the partition stays leaderless (offline, not unclean) until an operator's unclean
  election. Back on the same directories it leads again, as Kafka 4.1+'s balanced recovery elects the
  last known leader (a crashed process finds its log; a power loss may have cut its unflushed tail,
  Kafka's accepted risk without `log.flush.interval.messages`). A broker registering no log
  directory is never trusted: nothing tells its power loss from a lost disk (cluster.register
  decides which).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kraftlab.node.metadata.image import MetadataImage, PartitionInfo
from kraftlab.node.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord

Emit = Callable[[PartitionChangeRecord], None]


def _ordered(isr: tuple[int, ...] | list[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    """ISR members in replica order (a canonical form: equal sets give equal tuples)."""
    members = set(isr)
    return tuple(r for r in replicas if r in members) + tuple(sorted(members - set(replicas)))


def change(
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition_id: int,
    *,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    prefer_preferred: bool = False,
    unclean: bool = False,
    ineligible: int | None = None,
    unclean_shutdown: int | None = None,
) -> PartitionChangeRecord | None:
    """The record moving the partition to the wanted state, or None if it is already there.
    `ineligible`: a broker to treat as unusable whatever the image says (one being fenced or
    unregistered by records that come after this one). `unclean_shutdown`: a broker registering
    after an unclean shutdown, never remembered as holding every committed message."""
    p = image.topics[topic_id].partitions[partition_id]
    new_replicas = p.replicas if replicas is None else replicas
    new_removing = p.removing if removing is None else removing
    new_adding = p.adding if adding is None else adding
    new_isr = _ordered(p.isr if isr is None else isr, new_replicas)
    elr = p.last_known_elr

    if new_removing or new_adding:
        target = tuple(r for r in new_replicas if r not in new_removing)
        if target and set(target) <= set(new_isr):
            new_replicas, new_removing, new_adding = target, (), ()
            new_isr = _ordered([r for r in new_isr if r in target], target)

    def usable(b: int) -> bool:  # a replica on a failed log directory is not (node.controller.log_dirs)
        return b != ineligible and image.is_usable(b) and image.replica_online(p, b)

    def eligible(b: int) -> bool:
        return b in new_isr and usable(b)

    leader = NO_LEADER
    if prefer_preferred and new_replicas and eligible(new_replicas[0]):
        leader = new_replicas[0]
    elif p.leader != NO_LEADER and eligible(p.leader) and p.leader in new_replicas:
        leader = p.leader
    else:
        leader = next((r for r in new_replicas if eligible(r)), NO_LEADER)
    if leader == NO_LEADER and not new_isr:
        if p.isr and not elr:
            elr = tuple(p.isr)
        elr = tuple(b for b in elr if b != unclean_shutdown)
        back = next((r for r in new_replicas if r in elr and usable(r)), NO_LEADER)
        if back == NO_LEADER and unclean:
            back = next((r for r in new_replicas if usable(r)), NO_LEADER)
        if back != NO_LEADER:
            leader, new_isr, elr = back, (back,), ()
    elif new_isr:
        elr = ()

    if set(new_isr) == set(p.isr):
        new_isr = p.isr  # the same members: no ISR change (order is not a change)
    rec = PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=new_isr if new_isr != p.isr else None,
        leader=leader if leader != p.leader else NO_LEADER_CHANGE,
        replicas=new_replicas if new_replicas != p.replicas else None,
        removing_replicas=new_removing if new_removing != p.removing else None,
        adding_replicas=new_adding if new_adding != p.adding else None,
        last_known_elr=elr if elr != p.last_known_elr else None,
    )
    unchanged = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    return None if rec == unchanged else rec


def remove_broker(
    image: MetadataImage, broker_id: int, emit: Emit, *, unclean: bool = False, limit: int | None = None,
    unclean_shutdown: bool = False,
) -> int:
    """Remove `broker_id` from every ISR and leadership, treating it as ineligible (so this may come
    before the record that fences or unregisters it, as in Kafka); after an `unclean_shutdown` from
    the remembered last ISR members too (Kafka's handleBrokerUncleanShutdown). Emits one record per
    changed partition, at most `limit` (then it stops: call again for the rest); returns how many."""
    n = 0
    struck = broker_id if unclean_shutdown else None
    for topic, pid, p in image.partitions():
        if limit is not None and n >= limit:
            break
        if broker_id in p.isr or p.leader == broker_id or (unclean_shutdown and broker_id in p.last_known_elr):
            isr = tuple(b for b in p.isr if b != broker_id)
            rec = change(image, topic.topic_id, pid, isr=isr, unclean=unclean, ineligible=broker_id,
                         unclean_shutdown=struck)
            if rec is not None:
                emit(rec)
                n += 1
    return n


def recover_leaderless(image: MetadataImage, broker_id: int, emit: Emit, *, unclean: bool = False) -> int:
    """After `broker_id` became eligible: elect leaders of leaderless partitions it replicates."""
    n = 0
    for topic, pid, p in image.partitions():
        if p.leader == NO_LEADER and broker_id in p.replicas:
            rec = change(image, topic.topic_id, pid, unclean=unclean)
            if rec is not None:
                emit(rec)
                n += 1
    return n


def leads_any(image: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for _, _, p in image.partitions())


def is_valid_isr(p: PartitionInfo, isr: tuple[int, ...]) -> bool:
    """Kafka's Replicas.validateIsr: no duplicates, every member a replica."""
    return len(set(isr)) == len(isr) and set(isr) <= set(p.replicas)
