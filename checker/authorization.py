"""Brokers' authorization decisions (`authz` journal events) judged against the committed ACLs.

The committed ACLs are rebuilt from the `apply` events of AccessControlEntryRecord and
RemoveAccessControlEntryRecord (decoded with Kafka's schemas by checker.metadata.decode, not the
node's code); each ACL is known by its value (resource type, name, pattern type, principal, host,
operation, permission), as a decision names the ACL that allowed it.

- AuthorizedByCommittedAcl: an allowed decision made on a broker image whose highest applied
  offset is `offset` (the journal's field: what the broker reports as its metadata offset) names an
  ACL that the committed log held at that offset (created at or below it, not removed there).
- StaleAuthorization: a broker that has heard nothing from the quorum (no successful heartbeat, no
  restart) for longer than its self-fencing bound (its `self_fence_ms` plus `slack_ms`, measured on
  its own clock, as it must fence itself by it) does not allow with an ACL whose removal was already
  committed: a broker may lag, but one cut from the quorum must have stopped serving by then. A
  broker that still hears the quorum is not judged by it (its image may trail by a slow disk), and
  the removal's commit (the first `apply` of it on any node) is ordered before the decision on the
  shared clock (`rmono`, one kernel), without which the rule is not judged.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals
from kraftlab.checker.metadata.decode import DecodeError, decode

INVARIANTS = ["AuthorizedByCommittedAcl", "StaleAuthorization"]
DEFAULT_SLACK_MS = 1000


@dataclass
class _AclHistory:
    """The committed life of one ACL value: (offset, +1 created | -1 removed, first apply entry)."""

    changes: list[tuple[int, int, Entry]] = field(default_factory=list)

    def live_below(self, offset: int) -> bool:
        count = 0
        for off, delta, _ in sorted(self.changes, key=lambda c: c[0]):
            if off >= offset:
                break
            count += delta
        return count > 0

    def removed_before(self, offset: int) -> Entry | None:
        """The removal (below `offset`) that left no live copy of the ACL, if the ACL is gone there."""
        count, last_removal = 0, None
        for off, delta, e in sorted(self.changes, key=lambda c: c[0]):
            if off >= offset:
                break
            count += delta
            if delta < 0 and count == 0:
                last_removal = e
            elif count > 0:
                last_removal = None
        return last_removal if count == 0 else None


def _acl_changes(journals: Journals) -> dict[tuple[Any, ...], _AclHistory]:
    ids: dict[str, tuple[Any, ...]] = {}
    seen: dict[int, Entry] = {}
    for entries in journals.by_node.values():
        for e in entries:
            if e.ev != "apply" or e.get("type") not in ("AccessControlEntryRecord", "RemoveAccessControlEntryRecord"):
                continue
            off = int(e.get("offset", -1))
            first = seen.get(off)
            if first is None or _time(e) < _time(first):
                seen[off] = e
    histories: dict[tuple[Any, ...], _AclHistory] = {}
    for off in sorted(seen):
        e = seen[off]
        try:
            rec = decode(base64.b64decode(e.get("value", "")))
        except (DecodeError, ValueError):
            continue
        f = rec.fields
        if rec.type == "AccessControlEntryRecord":
            value = (f["resource_type"], f["resource_name"], f["pattern_type"], f["principal"], f["host"],
                     f["operation"], f["permission_type"])
            ids[f["id"]] = value
            histories.setdefault(value, _AclHistory()).changes.append((off, 1, e))
        elif f["id"] in ids:
            histories.setdefault(ids[f["id"]], _AclHistory()).changes.append((off, -1, e))
    return histories


def _time(e: Entry) -> float:
    return float(e.rmono) / 1e6 if e.rmono is not None else float(e.ts)


def _bounds(entries: Iterable[Entry]) -> int | None:
    bounds = [int(e.get("self_fence_ms")) for e in entries if e.ev == "heartbeat" and e.get("self_fence_ms")]
    return max(bounds) if bounds else None


def check_authorization(journals: Journals, slack_ms: int = DEFAULT_SLACK_MS) -> dict[str, Any]:
    histories = _acl_changes(journals)
    decisions = 0
    vs: list[Violation] = []
    shared = journals.shared_clock
    for nid, entries in journals.by_node.items():
        bound = _bounds(entries)
        heard: int | None = None  # the node's own clock (mono) at its last successful heartbeat or start
        for e in entries:
            if e.ev == "start" or (e.ev == "heartbeat" and e.get("ok")):
                heard = e.mono
                continue
            if e.ev != "authz":
                continue
            decisions += 1
            acl = e.get("acl")
            if not e.get("allowed") or not acl or not str(e.get("reason", "")).startswith("ALLOW"):
                continue
            value = tuple(acl)
            offset = int(e.get("offset", -1)) + 1  # the image's end: it holds every record up to `offset`
            history = histories.get(value, _AclHistory())
            if not history.live_below(offset):
                vs.append(Violation("AuthorizedByCommittedAcl", (
                    f"broker {nid} allowed {e.get('principal')} {e.get('operation')} on {e.get('resource_type')} "
                    f"{e.get('resource')!r} by the ACL {list(value)}, but the committed log held no such ACL at "
                    f"offset {offset - 1}, the last its image had applied"), [e, *(c[2] for c in history.changes)]))
                continue
            if not shared or bound is None or heard is None:
                continue
            silent = (e.mono - heard) / 1e6
            removal = _later_removal(history, offset, e)
            if silent <= bound + slack_ms or removal is None or _time(removal) >= _time(e):
                continue
            vs.append(Violation("StaleAuthorization", (
                f"broker {nid} allowed {e.get('principal')} {e.get('operation')} on {e.get('resource')!r} "
                f"with the ACL {list(value)}, whose removal was committed {_time(e) - _time(removal):.0f} ms "
                f"before (offset {removal.get('offset')}), {silent:.0f} ms after it last heard from the quorum, "
                f"past its self-fencing bound of {bound} + {slack_ms} ms: a broker cut from the quorum kept "
                f"authorizing with removed ACLs"), [removal, e]))
    if decisions == 0:
        return result([], [], {k: "no broker journalled `authz` events" for k in INVARIANTS})
    not_checked = {} if shared else {"StaleAuthorization": "the journals share no clock (rmono, one kernel)"}
    checked = [k for k in INVARIANTS if k not in not_checked]
    return result(vs, checked, not_checked, stats={"authorization_decisions": decisions})


def _later_removal(history: _AclHistory, offset: int, decision: Entry) -> Entry | None:
    """The committed removal, at or after the broker's image end, that left the ACL gone, if any."""
    for off, delta, e in sorted(history.changes, key=lambda c: c[0]):
        if off >= offset and delta < 0 and history.removed_before(off + 1) is not None:
            return e
    return None
