"""The data plane as brokers journalled it: who wrote client records into a partition, and in
which leader epoch.

Brokers journal `partition_role` when they take a partition's role (role, leader, leader_epoch,
isr, topic_id), `partition_append` for each Produce they append as leader (topic, partition, first, last,
leader_epoch, acks) and `partition_hw` when its high-water mark moves (with the ISR they hold).

- LeaderAppendsInItsEpoch: a broker appends client records to a partition only while it leads it,
  in the leader epoch it leads in, and while its ISR holds it — its own latest `partition_role`
  says leader at the append's epoch (a restart forgets roles until it journals them anew). A
  follower or a deposed leader appending would put records in the log no ISR commits.
- OneLeaderPerEpoch: one broker leads a partition in a leader epoch. The controller hands out
  each epoch once; two brokers leading in one epoch would both append at the same offsets, and a
  follower truncating by leader epoch (OffsetsForLeaderEpoch) could not tell their logs apart.
  A topic deleted and created again under its name starts its epochs anew, so the rule needs the
  topic id on `partition_role` (`topic_id`) and is not judged without it.
- AckedWithMinIsr: with acks=all, a leader acknowledges a record (`partition_ack`) only once the
  high-water mark passed it with an ISR of at least `min.insync.replicas` (holding the leader):
  the HW it journalled in that epoch and the one the ack names are past the record. An ack with a
  smaller ISR is a write one crash can lose (NOT_ENOUGH_REPLICAS / _AFTER_APPEND in Kafka).
- HighWatermarkMonotonic: within one leader epoch a leader's high-water mark never goes back (its
  `partition_role` as leader, then each `partition_hw`; a restart starts over). A consumer that read
  up to the HW would find its position past the end (KAFKA-2143's class).
- AckedBelowLaterLeaderEnd: an acknowledged offset stays below the log end of every later leader
  of the partition (a `partition_role` as leader in a higher epoch of the same topic id): a leader
  elected from the ISR holds every acknowledged record, so one that starts below it has lost it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["LeaderAppendsInItsEpoch", "OneLeaderPerEpoch", "AckedWithMinIsr", "HighWatermarkMonotonic",
              "AckedBelowLaterLeaderEnd"]
EVENTS = ("partition_role", "partition_append", "partition_hw", "partition_ack")
SHOWN = 20


def _tp(e: Entry) -> str:
    return f"{e['topic']}-{e['partition']}"


@dataclass
class _Held:
    """One broker's latest view of one partition: its role event and the ISR it last journalled."""

    role: Entry
    isr: list[int] = field(default_factory=list)
    hw: Entry | None = None
    """The latest event giving the HW it holds as leader in its role's epoch (role or partition_hw)."""


def _hw_went_back(h: _Held, e: Entry) -> Violation | None:
    """HighWatermarkMonotonic for one `partition_hw` of a broker that holds the partition's role."""
    before, epoch = h.hw, int(e["leader_epoch"])
    if before is not None and int(before["leader_epoch"]) == epoch and int(e["hw"]) < int(before["hw"]):
        return Violation(
            "HighWatermarkMonotonic",
            f"broker {e.node}'s high-water mark of {_tp(e)} went back from {before['hw']} to {e['hw']} in leader "
            f"epoch {epoch}: a leader's HW never goes back (consumers may already have read up to it)", [before, e])
    return None


def _acked_with(h: _Held | None, e: Entry) -> Violation | None:
    """AckedWithMinIsr for one `partition_ack`."""
    last, epoch = int(e["last"]), int(e["leader_epoch"])
    isr, needed = [int(r) for r in e.get("isr") or []], int(e.get("min_insync_replicas") or 1)
    passed = h is not None and h.hw is not None and int(h.hw["leader_epoch"]) == epoch and int(h.hw["hw"]) > last
    if len(isr) < needed:
        why = f"its ISR {isr} was smaller than min.insync.replicas {needed}"
    elif e.node not in isr:
        why = f"its ISR {isr} did not hold it"
    elif int(e["hw"]) <= last or not passed:
        why = f"its high-water mark ({e['hw']}; journalled {h.hw['hw'] if h and h.hw else 'none'}) had not passed it"
    else:
        return None
    return Violation(
        "AckedWithMinIsr",
        f"broker {e.node} acknowledged offsets {e.get('first')}..{last} of {_tp(e)} (acks=all, leader epoch {epoch}) "
        f"but {why}: an acks=all write is acknowledged once the HW passed it with an ISR of at least "
        "min.insync.replicas", [x for x in ((h.hw if h else None), e) if x is not None])


def _appends(entries: Iterable[Entry]) -> tuple[list[Violation], int]:
    vs: list[Violation] = []
    held: dict[str, _Held] = {}
    judged = 0
    for e in entries:
        if e.ev == "start":
            held.clear()
        elif e.ev == "partition_role":
            held[_tp(e)] = _Held(e, [int(r) for r in e.get("isr") or []], e if e.get("role") == "leader" else None)
        elif e.ev == "partition_hw" and _tp(e) in held:
            leading = held[_tp(e)]
            leading.isr = [int(r) for r in e.get("isr") or []]
            back = _hw_went_back(leading, e)
            if back is not None and len(vs) < SHOWN:
                vs.append(back)
            leading.hw = e
        elif e.ev == "partition_ack":
            acked = _acked_with(held.get(_tp(e)), e)
            if acked is not None and len(vs) < SHOWN:
                vs.append(acked)
        elif e.ev == "partition_append":
            judged += 1
            h = held.get(_tp(e))
            epoch = int(e["leader_epoch"])
            if h is None:
                why = "it had journalled no role for the partition since it started"
            elif h.role.get("role") != "leader":
                why = f"its latest role there was {h.role.get('role')} (leader {h.role.get('leader')})"
            elif int(h.role["leader_epoch"]) != epoch:
                why = f"it led in leader epoch {h.role['leader_epoch']}, not {epoch}"
            elif e.node not in h.isr:
                why = f"its ISR {h.isr} no longer held it"
            else:
                continue
            if len(vs) < SHOWN:
                vs.append(Violation(
                    "LeaderAppendsInItsEpoch",
                    f"broker {e.node} appended client records at offsets {e.get('first')}..{e.get('last')} of "
                    f"{_tp(e)} in leader epoch {epoch}, but {why}: only the partition's leader writes, in its own "
                    "epoch, while in the ISR", [x for x in ((h.role if h else None), e) if x is not None]))
    return vs, judged


def _leaders(roles: list[Entry]) -> list[Violation]:
    by_epoch: dict[tuple[str, str, int], dict[int, Entry]] = {}
    for e in roles:
        if e.get("role") == "leader":
            by_epoch.setdefault((str(e["topic_id"]), _tp(e), int(e["leader_epoch"])), {}).setdefault(e.node, e)
    vs = []
    for (_, tp, epoch), nodes in sorted(by_epoch.items()):
        if len(nodes) > 1:
            vs.append(Violation(
                "OneLeaderPerEpoch",
                f"brokers {', '.join(str(n) for n in sorted(nodes))} each led {tp} in leader epoch {epoch}: the "
                "controller hands out a leader epoch once, so one of them led on metadata it never committed",
                [nodes[n] for n in sorted(nodes)]))
    return vs[:SHOWN]


def _lost_acks(roles: list[Entry], acks: list[Entry]) -> list[Violation]:
    """AckedBelowLaterLeaderEnd: every leader of a later epoch starts with a log end past each ack."""
    by_tp: dict[tuple[str, str], list[tuple[int, int, Entry]]] = {}
    for a in acks:
        by_tp.setdefault((str(a["topic_id"]), _tp(a)), []).append((int(a["leader_epoch"]), int(a["last"]), a))
    vs = []
    for r in roles:
        if r.get("role") != "leader":
            continue
        epoch, end = int(r["leader_epoch"]), int(r["log_end_offset"])
        acked = by_tp.get((str(r["topic_id"]), _tp(r)), [])
        below = [(last, a) for ep, last, a in acked if ep < epoch and last >= end]
        if below:
            last, a = max(below, key=lambda x: x[0])
            vs.append(Violation(
                "AckedBelowLaterLeaderEnd",
                f"broker {r.node} became leader of {_tp(r)} in leader epoch {epoch} with its log ending at {end}, "
                f"but broker {a.node} had acknowledged offset {last} (acks=all, leader epoch {a['leader_epoch']}): "
                "a leader from the ISR holds every acknowledged record", [a, r]))
    return vs[:SHOWN]


def check_dataplane(journals: Journals) -> dict[str, Any]:
    """The data-plane rules over every broker's journal."""
    roles = [e for e in journals.all() if e.ev == "partition_role"]
    if not roles and not any(e.ev == "partition_append" for e in journals.all()):
        return result([], [], {name: "no broker journalled a partition role or append (no data plane in use)"
                               for name in INVARIANTS})
    vs: list[Violation] = []
    judged = 0
    for entries in journals.by_node.values():
        found, n = _appends(entries)
        vs += found
        judged += n
    checked, not_checked = ["LeaderAppendsInItsEpoch", "HighWatermarkMonotonic"], {}
    acks = [e for e in journals.all() if e.ev == "partition_ack"]
    if all(e.get("topic_id") for e in roles):
        vs += _leaders(roles)
        checked.append("OneLeaderPerEpoch")
    else:
        not_checked["OneLeaderPerEpoch"] = ("the brokers' partition_role events name no topic id, and a topic "
                                            "deleted and created again starts its leader epochs anew")
    if not acks:
        for name in ("AckedWithMinIsr", "AckedBelowLaterLeaderEnd"):
            not_checked[name] = "no broker journalled an acks=all acknowledgement (partition_ack)"
    else:
        checked.append("AckedWithMinIsr")
        if all(e.get("topic_id") for e in [*roles, *acks]):
            vs += _lost_acks(roles, acks)
            checked.append("AckedBelowLaterLeaderEnd")
        else:
            not_checked["AckedBelowLaterLeaderEnd"] = "partition_role or partition_ack events name no topic id"
    return result(vs, checked, not_checked,
                  stats={"appends_judged": judged, "roles": len(roles), "acks_judged": len(acks)})
