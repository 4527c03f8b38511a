"""Producer ids handed out by brokers (InitProducerId), judged against the committed ProducerIdsRecords.

A broker journals `producer_id_block` (`broker`, `broker_epoch`, `start`, `len`) for each block the
active controller granted it (AllocateProducerIds) and `producer_id` (`broker`, `producer_id`) for
each id it handed to a client. The committed records say which block went to whom: a
ProducerIdsRecord grants [the previous record's next producer id, its own) to its broker
(`model.ProducerIdBlock`).

- ProducerIdUnique: no producer id is handed out twice — across brokers, broker restarts and
  controller failovers. Two idempotent producers with one id would have their sequence numbers
  judged against each other: one's writes refused as duplicates or out of order.
- ProducerIdFromCommittedBlock: a block a broker received is one that a committed record granted
  to that broker (a controller that answers before its record commits, or that does not continue
  after its predecessor's blocks, hands out a block the log does not own), and every id a broker
  hands out lies in a block it received in the same process life.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import Entry, Journals
from kraftlab.checker.metadata.model import ProducerIdBlock

RULES: dict[str, str] = {
    "ProducerIdUnique": "no producer id is handed out twice (InitProducerId), across brokers, restarts and "
                        "controller failovers",
    "ProducerIdFromCommittedBlock": "a broker hands out producer ids only from a block a committed ProducerIdsRecord "
                                    "granted to it",
}


@dataclass(frozen=True, slots=True)
class Judged:
    violations: list[Violation]
    stats: dict[str, int]
    not_checked: dict[str, str]


def _broker(e: Entry) -> int:
    return int(e.get("broker", e.node))


def judge_producer_ids(journals: Journals, blocks: list[ProducerIdBlock], replay_complete: bool) -> Judged:
    """The RULES over every node's journal; `blocks`: what the committed records granted (all of
    them only when `replay_complete`: otherwise a received block is not judged against them)."""
    vs: list[Violation] = []
    granted = {(b.broker, b.start, b.end): b for b in blocks}
    first_holder: dict[int, Entry] = {}
    received = ids = 0
    for entries in journals.by_node.values():
        held: list[tuple[int, int]] = []  # blocks received in this process life
        for e in entries:
            if e.ev == "start":
                held = []
            elif e.ev == "producer_id_block":
                received += 1
                start, end = int(e["start"]), int(e["start"]) + int(e["len"])
                held.append((start, end))
                if replay_complete and (_broker(e), start, end) not in granted:
                    vs.append(Violation("ProducerIdFromCommittedBlock", (
                        f"broker {_broker(e)} received producer ids [{start}, {end}) from the controller, but no "
                        f"committed ProducerIdsRecord granted that block to it ({_owners(blocks, start, end)}): a "
                        "controller answered AllocateProducerIds with a block the log does not hold"), [e],
                        before="the committed blocks", after=f"broker {_broker(e)} holds [{start}, {end})"))
            elif e.ev == "producer_id":
                ids += 1
                pid = int(e["producer_id"])
                if not any(s <= pid < t for s, t in held):
                    vs.append(Violation("ProducerIdFromCommittedBlock", (
                        f"broker {_broker(e)} handed out producer id {pid}, which lies in no block it received in "
                        "this process life"), [e]))
                first = first_holder.get(pid)
                if first is None:
                    first_holder[pid] = e
                else:
                    vs.append(Violation("ProducerIdUnique", (
                        f"producer id {pid} was handed out twice: by broker {_broker(first)} and again by broker "
                        f"{_broker(e)}; two idempotent producers now share one id, and the broker judges each one's "
                        "sequence numbers against the other's (writes refused as duplicates or out of order)"),
                        [first, e], before=f"broker {_broker(first)} gave out id {pid}",
                        after=f"broker {_broker(e)} gave out id {pid} again"))
    not_checked: dict[str, str] = {}
    if ids == 0 and received == 0:
        why = "no broker handed out producer ids (no InitProducerId in this run)"
        not_checked = {rule: why for rule in RULES}
    elif not replay_complete and received:
        not_checked["ProducerIdFromCommittedBlock"] = ("the replay of the committed records stopped early: the "
                                                       "blocks brokers received were not compared with them")
    return Judged(vs, {"producer_id_blocks_received": received, "producer_ids_handed_out": ids}, not_checked)


def _owners(blocks: list[ProducerIdBlock], start: int, end: int) -> str:
    near = [b for b in blocks if b.start < end and start < b.end]
    if not near:
        return "no committed block covers these ids"
    return "; ".join(f"offset {b.offset} granted [{b.start}, {b.end}) to broker {b.broker}" for b in near[:3])
