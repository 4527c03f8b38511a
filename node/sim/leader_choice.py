"""The partition leader choice, judged on every committed PartitionRecord and PartitionChangeRecord as
Kafka's PartitionChangeBuilder makes it (KIP-631, with KIP-966's last known ELR).

A broker is *eligible* for a partition after a record when it is registered, unfenced, not in
controlled shutdown, its replica is not on a failed log directory, and the record did not just take
it out of the ISR (Kafka writes the changes moving a broker out of every ISR before the record that
fences or unregisters it: the broker a change removes is the one being removed). The rules:

- a new partition is led by its first eligible ISR member in replica order, and has no leader only
  when none is eligible;
- a change keeps the current leader while it stays an eligible ISR member and replica (a preferred
  election may instead move it to the first replica, when that one is eligible);
- otherwise the first eligible ISR member in replica order leads;
- with no eligible ISR member the partition has no leader — unless its ISR is empty and a member of
  its last known ELR is eligible: then the first such one (in replica order) leads, alone in the ISR;
  a leader from outside the ISR and ELR (an unclean election, which the configuration or an operator's
  ElectLeaders UNCLEAN allows) is the first eligible replica, alone in the ISR;
- the last known ELR (the ISR members remembered when it emptied) is kept only while the ISR is
  empty: a record leaving ISR members and remembered ones is wrong (this node's KIP-966 subset:
  node.controller.partitions).

Judged from what the records did alone (nothing of the controller's intent), so that a wrong choice
is caught wherever the controller makes it: fencing, controlled shutdown, unfencing, reassignment,
AlterPartition, elections. `LeaderChoice` keeps, per node, the image its committed records make (the
node's `apply` journal events, resynchronised with the node's own image after a snapshot load) and
judges each partition record once.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from kraftlab.node.metadata.image import MetadataImage, PartitionInfo
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord, PartitionRecord, decode


def _first(candidates: list[int]) -> int:
    return candidates[0] if candidates else NO_LEADER


def leader_verdict(image: MetadataImage, before: PartitionInfo | None, after: PartitionInfo) -> str | None:
    """Why `after`'s leader is not the one Kafka chooses for a partition that was `before` (None: a
    new partition), brokers as in `image`; None when it is."""
    if after.isr and after.last_known_elr:
        return (f"ISR {list(after.isr)} with a last known ELR {list(after.last_known_elr)}: the last ISR members are "
                "remembered only while the ISR is empty (and forgotten once it has members again)")
    removed = set(before.isr) - set(after.isr) if before is not None else set()

    def eligible(b: int) -> bool:
        return b not in removed and image.is_usable(b) and image.replica_online(after, b)

    in_isr = [r for r in after.replicas if r in after.isr and eligible(r)]
    if before is None:
        want, rule = {_first(in_isr)}, "a new partition is led by its first eligible ISR member in replica order"
    elif after.leader not in (NO_LEADER, before.leader, *before.isr) and not set(before.isr) & set(after.isr):
        elr = before.last_known_elr or before.isr
        clean = [r for r in after.replicas if r in elr and eligible(r)]
        pool = clean or [r for r in after.replicas if eligible(r)]
        if after.isr != (after.leader,):
            return (f"leader {after.leader} elected from outside the ISR {list(before.isr)} with the ISR "
                    f"{list(after.isr)}: a leader from the last known ELR or an unclean election leads alone "
                    "in the ISR")
        want = {_first(pool)}
        rule = ("with no eligible ISR member, the first eligible member of the last known ELR "
                f"{list(elr)} in replica order leads" if clean else
                "an unclean election elects the first eligible replica in replica order")
    elif before.leader in in_isr:
        want = {before.leader} | ({after.replicas[0]} & set(in_isr))
        rule = (f"the leader {before.leader} stays while it is an eligible ISR member (or a preferred election "
                "moves it to the first replica)")
    elif in_isr:
        want, rule = {in_isr[0]}, "a new leader is the first eligible ISR member in replica order"
    else:
        back = [r for r in after.replicas if r in after.last_known_elr and eligible(r)] if not after.isr else []
        want = {NO_LEADER} if not back else {back[0]}
        rule = ("with no eligible ISR member there is no leader" if not back else
                f"an eligible member of the last known ELR {list(after.last_known_elr)} leads an empty ISR")
    if after.leader in want:
        return None
    shown = "no leader" if after.leader == NO_LEADER else f"leader {after.leader}"
    return (f"{shown} (replicas {list(after.replicas)}, ISR {list(after.isr)}, before: leader "
            f"{before.leader if before is not None else '-'}, ISR {list(before.isr) if before is not None else '-'}); "
            f"{rule}: {sorted(want)}")


class LeaderChoice:
    """Judges the partition records each node applies (one verdict per offset: the log is the same)."""

    def __init__(self) -> None:
        self._images: dict[int, tuple[MetadataImage, int]] = {}
        self._records: dict[int, MetadataRecord] = {}
        self.judged: set[int] = set()

    def restart(self, node_id: int) -> None:
        """The node's process starts anew: its replay starts from nothing (or from a snapshot)."""
        self._images[node_id] = (MetadataImage(), 0)

    def observe(self, node_id: int, event: JournalEvent,
                current: Callable[[], tuple[int, MetadataImage]]) -> str | None:
        """Take one journal event of the node's replay; why a partition record it applied chose the
        wrong leader, or None. `current`: the node's own (next offset, image), read after a snapshot
        load (every record applied after it is already in that image)."""
        if event.ev == "image" and event.fields.get("reason") == "snapshot-load":
            offset, image = current()
            self._images[node_id] = (image.copy(), offset)
            return None
        if event.ev != "apply":
            return None
        image, next_offset = self._images.setdefault(node_id, (MetadataImage(), 0))
        offset = event.fields["offset"]
        if offset < next_offset:
            return None
        record = self._records.get(offset)
        if record is None:
            record = self._records[offset] = decode(base64.b64decode(event.fields["value"]))
        self._images[node_id] = (image, offset + 1)
        if not isinstance(record, PartitionRecord | PartitionChangeRecord):
            image.apply(record)
            return None
        topic = image.topics.get(record.topic_id)
        before = topic.partitions.get(record.partition_id) if topic is not None else None
        image.apply(record)
        if offset in self.judged:
            return None
        self.judged.add(offset)
        after = image.topics[record.topic_id].partitions[record.partition_id]
        verdict = leader_verdict(image, before if isinstance(record, PartitionChangeRecord) else None, after)
        if verdict is None:
            return None
        name = image.topics[record.topic_id].name
        return f"offset {offset}: {type(record).__name__} of {name}-{record.partition_id}: {verdict}"
