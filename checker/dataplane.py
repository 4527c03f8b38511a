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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["LeaderAppendsInItsEpoch", "OneLeaderPerEpoch"]
EVENTS = ("partition_role", "partition_append", "partition_hw")
SHOWN = 20


def _tp(e: Entry) -> str:
    return f"{e['topic']}-{e['partition']}"


@dataclass
class _Held:
    """One broker's latest view of one partition: its role event and the ISR it last journalled."""

    role: Entry
    isr: list[int] = field(default_factory=list)


def _appends(entries: Iterable[Entry]) -> tuple[list[Violation], int]:
    vs: list[Violation] = []
    held: dict[str, _Held] = {}
    judged = 0
    for e in entries:
        if e.ev == "start":
            held.clear()
        elif e.ev == "partition_role":
            held[_tp(e)] = _Held(e, [int(r) for r in e.get("isr") or []])
        elif e.ev == "partition_hw" and _tp(e) in held:
            held[_tp(e)].isr = [int(r) for r in e.get("isr") or []]
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
    checked, not_checked = ["LeaderAppendsInItsEpoch"], {}
    if all(e.get("topic_id") for e in roles):
        vs += _leaders(roles)
        checked.append("OneLeaderPerEpoch")
    else:
        not_checked["OneLeaderPerEpoch"] = ("the brokers' partition_role events name no topic id, and a topic "
                                            "deleted and created again starts its leader epochs anew")
    return result(vs, checked, not_checked, stats={"appends_judged": judged, "roles": len(roles)})
