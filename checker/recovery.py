"""Recovery: after the final heal, the cluster must come back within its bound (docs/contracts.md,
`recovery.json`): a quorum leader, every broker registered, unfenced and answering, and every node
caught up with the metadata log as it stood at the heal.

Rules:
- Unrecovered: the runner's recovery watch ended at its bound without a healthy, caught-up
  cluster. The explanation names each node that did not come back — not running, journalled a
  fatal error, behind the goal offset, or a broker the controller still does not count as
  unfenced — with its last state from its journal (role and epoch, broker state, last events).
"""

from __future__ import annotations

import re
from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

RULES = ["Unrecovered"]
_STATE_EVENTS = ("role", "broker_state", "fatal", "start", "heartbeat", "truncate", "snapshot", "corruption")


def _last_state(entries: list[Entry]) -> tuple[str, list[Entry]]:
    """A node's last Raft role and broker state in words, and its last few telling journal lines."""
    role = next((e for e in reversed(entries) if e.ev == "role"), None)
    broker = next((e for e in reversed(entries) if e.ev == "broker_state"), None)
    words = []
    if role is not None:
        words.append(f"{role.get('role')} in epoch {role.get('epoch')} (leader {role.get('leader')})")
    if broker is not None:
        words.append(f"broker state {broker.get('state')}")
    tail = [e for e in entries if e.ev in _STATE_EVENTS][-4:]
    return ", ".join(words) or "no state journalled", tail


def _named_in(why: str) -> set[str]:
    """Node names a health status blames ('describe-cluster failed: n1: …; n3: …')."""
    return set(re.findall(r"(?:^|[:;] )(n\d+): ", why))


def _broker_ids(why: str) -> list[int]:
    """Broker ids named in the health status 'brokers not registered and unfenced: [4, 5]'."""
    m = re.search(r"not registered and unfenced: \[([0-9, ]*)\]", why)
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else []


def check_recovery(recovery: dict[str, Any], journals: Journals | None = None,
                   node_ids: dict[str, int] | None = None) -> dict[str, Any]:
    """Judge `recovery.json`; `journals` and `node_ids` (name → node id) add each node's last state."""
    stats = {k: recovery.get(k) for k in ("bound_s", "seconds_to_healthy", "seconds_to_caught_up", "goal_offset")}
    if recovery.get("recovered"):
        return result([], RULES, stats=stats)
    node_ids = node_ids or {}
    by_id = journals.by_node if journals is not None else {}
    why = str(recovery.get("why", ""))
    stuck_brokers = set(_broker_ids(why))
    blamed = _named_in(why)
    goal = recovery.get("goal_offset")
    lines: list[str] = []
    evidence: list[Entry] = []
    for name, info in sorted((recovery.get("nodes") or {}).items()):
        nid = node_ids.get(name)
        reasons = []
        if not info.get("running", True):
            reasons.append("not running")
        if info.get("fatal"):
            reasons.append(f"journalled a fatal error: {info['fatal']}")
        applied = info.get("applied_offset")
        if goal is not None and (applied is None or applied < goal):
            reasons.append(f"applied the metadata log up to {applied if applied is not None else 'nothing it reported'}"
                           f", short of {goal:g}")
        if nid is not None and nid in stuck_brokers:
            reasons.append("its broker is not registered and unfenced in the brokers' view")
        if name in blamed:
            reasons.append("it did not answer the health check")
        last_broker = next((e for e in reversed(by_id.get(nid, [])) if e.ev == "broker_state"), None) \
            if nid is not None else None
        if last_broker is not None and last_broker.get("state") not in ("RUNNING",):
            reasons.append(f"its broker never got back to RUNNING (last: {last_broker.get('state')})")
        if not reasons:
            continue
        state, tail = _last_state(by_id.get(nid, [])) if nid is not None else ("no journal", [])
        lines.append(f"{name} (node {nid}): {'; '.join(reasons)}; last state: {state}")
        evidence.extend(tail)
    if not lines:
        lines.append(f"the cluster as a whole: {recovery.get('why')}")
    healthy_in = recovery.get("seconds_to_healthy")
    how = f"healthy after {healthy_in} s but not caught up" if healthy_in is not None else "never healthy"
    head = (f"the cluster did not recover within {recovery.get('bound_s')} s of the final heal ({how}; "
            f"last status: {recovery.get('why')})")
    return result([Violation("Unrecovered", head + ". " + " | ".join(lines), evidence)], RULES, stats=stats)
