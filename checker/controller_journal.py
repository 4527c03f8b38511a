"""The controller's and the broker's journal events held to their contract (docs/contracts.md,
"Controller and broker events"): what the fencing and metadata rules read must be there, with the
fields the contract names and in an order the node's lifecycle allows. A journal that breaks it is a
finding, never silently accepted: a `heartbeat` line without `ok`, or a broker that journals RUNNING
before it ever started, would otherwise be read as something else and pass.

- ControllerJournalFields: every `broker_state`, `heartbeat`, `fence`, `lease` and `decision` line
  carries the fields the contract names, of the right type and from the contract's set of values
  (a decision on a broker's request — registration, heartbeat, unregistration, AlterPartition,
  AllocateProducerIds — also names the broker and its epoch; a heartbeat decision its answer).
- BrokerStateOrder: within one process life a broker's `broker_state` lines follow the lifecycle
  of the heartbeat proposal (KIP-631): STARTING first, then only forward through RECOVERY →
  RUNNING → PENDING_CONTROLLED_SHUTDOWN → SHUTTING_DOWN (none repeated or left for an earlier one;
  only the shutdown states may be reached early: RECOVERY comes right after STARTING, RUNNING right
  after RECOVERY); RECOVERY and RUNNING only on an accepted heartbeat (the broker's last
  `heartbeat` line before it is `ok`); FENCED_SELF and UNFENCED_SELF alternate, FENCED_SELF first,
  and UNFENCED_SELF only on an accepted heartbeat too.
- LeaseBound: a `lease` line's `expires_ms` is the session timeout after the controller heard from
  the broker (KIP-631: a heartbeat or registration renews the lease for `broker.session.timeout.ms`):
  `expires_ms` − session timeout is the `at_ms` of a heartbeat or registration decision of that
  broker on that controller in that term of leadership — or the moment it became active, when it grants
  every broker of its image a fresh lease at once (the leases that open a term of leadership, all
  with one expiry), or when no later decision of that broker is journalled in that term (that
  request's answer may never have been written: a crash or a lost leadership before it committed);
  and each renewal of a broker's lease in a term expires later than the one
  before. Judged on journals whose heartbeat and registration decisions all carry `at_ms`.
- FenceAlternates: a controller fences only an unfenced broker and unfences only a fenced one
  (KIP-631; Kafka writes a FenceBrokerRecord / UnfenceBrokerRecord only on a change). Within one
  term of its leadership its `fence` and `unfence` lines for one registration (broker and epoch)
  alternate; and the first of a term must change the state the controller inherited: the committed
  state its own `apply` lines of that life show so far (a RegisterBrokerRecord at offset N is the
  registration of epoch N, with its `fenced`; fence, unfence, registration change and unregistration
  records after it; nothing is known after a snapshot load until a record says so). The `fence` an
  unregistration journals (reason `unregistered`) removes the registration whatever its state, and a
  `shutdown` changes no fencing.
- DecisionsFromLeader: only the active controller decides (Kafka's QuorumController answers
  NOT_CONTROLLER at once when it is not active, and journals nothing of it): a `decision` line with
  any error but NOT_CONTROLLER comes from a node whose last `role` line in its process life makes it
  leader; a NOT_CONTROLLER decision (a held request failed when its controller renounced) from one
  whose last `role` line no longer does. Judged on nodes that journal `role` lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import Entry, Journals, field_problems
from kraftlab.checker.registrations import Registrations

LIFECYCLE = ("STARTING", "RECOVERY", "RUNNING", "PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN")
"""A broker's states in the order it may pass them (BrokerState, without NOT_RUNNING, which is never
journalled: a process life begins at STARTING)."""
SELF_FENCING = ("FENCED_SELF", "UNFENCED_SELF")
FENCE_ACTIONS = ("fence", "unfence", "shutdown")
BROKER_APIS = ("BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "AlterPartition", "AllocateProducerIds")
"""Decisions on a request a broker sends about itself: they name the broker and its epoch."""
INVARIANTS = ["ControllerJournalFields", "BrokerStateOrder", "LeaseBound", "FenceAlternates", "DecisionsFromLeader"]

Test = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_int(v: Any) -> bool:
    return v is None or _int(v)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _one_of(*values: str) -> Test:
    return lambda v: v in values


FIELDS: dict[str, dict[str, Test]] = {
    "broker_state": {"broker": _int, "state": _one_of(*LIFECYCLE, *SELF_FENCING)},
    "heartbeat": {"broker": _int, "ok": _bool, "self_fence_ms": _int},
    "fence": {"broker": _int, "action": _one_of(*FENCE_ACTIONS), "reason": _str, "epoch": _int},
    "lease": {"broker": _int, "expires_ms": _int},
    "decision": {"api": _str, "error": _str},
}
"""Event kind → field → the test its value must pass."""

OPTIONAL: dict[str, dict[str, Test]] = {
    "fence": {"offset": _opt_int, "at_ms": _int, "metadata_offset": _int},
    "decision": {"offset": _int, "at_ms": _int},
}
"""Fields that some lines carry (a fence's offset once written, the clock on newer nodes): typed when there."""

API_FIELDS: dict[str, dict[str, Test]] = {
    **{api: {"broker": _int, "broker_epoch": _int} for api in BROKER_APIS},
    "BrokerRegistration": {"broker": _int, "broker_epoch": _int, "incarnation": _str},
    "BrokerHeartbeat": {"broker": _int, "broker_epoch": _int, "fenced": _bool, "shut_down": _bool,
                        "metadata_offset": _int},
}
"""A decision's api → the further fields it carries."""


def _problems(e: Entry) -> list[str]:
    wanted = dict(FIELDS.get(e.ev, {}))
    if e.ev == "decision":
        wanted.update(API_FIELDS.get(str(e.get("api")), {}))
    out = field_problems(e, wanted)
    out += field_problems(e, {k: ok for k, ok in OPTIONAL.get(e.ev, {}).items() if k in e.fields})
    return out


def check_fields(journals: Journals, vs: list[Violation]) -> None:
    """ControllerJournalFields (once per node and kind of line: one cause, one finding)."""
    for entries in journals.by_node.values():
        reported: set[tuple[str, str]] = set()
        for e in entries:
            problems = _problems(e)
            key = (e.ev, str(e.get("api", e.get("action", ""))))
            if problems and key not in reported:
                reported.add(key)
                vs.append(Violation("ControllerJournalFields", (
                    f"node {e.node}'s `{e.ev}` line breaks the journal contract ({'; '.join(problems)}): the "
                    "checker cannot judge what the fencing and metadata rules read from it"), [e]))


def _state_problem(state: str, prev: Entry | None, self_fenced: bool, last_heartbeat: Entry | None) -> str | None:
    """Why `state` may not follow the life's last lifecycle line `prev` (None: it may)."""
    accepted = last_heartbeat is not None and last_heartbeat.get("ok") is True
    if state in SELF_FENCING:
        if (state == "FENCED_SELF") == self_fenced:
            return "FENCED_SELF and UNFENCED_SELF must alternate, FENCED_SELF first"
        if state == "UNFENCED_SELF" and not accepted:
            return "a broker unfences itself only on an accepted heartbeat (its last `heartbeat` is not ok)"
        return None
    if prev is None:
        return None if state == "STARTING" else "a process life begins at STARTING"
    if LIFECYCLE.index(state) <= LIFECYCLE.index(prev["state"]):
        return f"after {prev['state']} (the lifecycle only goes forward: {' → '.join(LIFECYCLE)})"
    if state in ("RECOVERY", "RUNNING") and LIFECYCLE.index(state) != LIFECYCLE.index(prev["state"]) + 1:
        return f"after {prev['state']} ({state} comes only right after {LIFECYCLE[LIFECYCLE.index(state) - 1]})"
    if state in ("RECOVERY", "RUNNING") and not accepted:
        return "RECOVERY and RUNNING follow an accepted heartbeat (its last `heartbeat` is not ok)"
    return None


def check_broker_states(journals: Journals, vs: list[Violation]) -> None:
    """BrokerStateOrder: each broker's state lines, per process life (a `start` line, or a STARTING
    on a node whose journal has no `start` lines, begins one)."""
    for entries in journals.by_node.values():
        lives_by_start = any(e.ev == "start" for e in entries)
        prev: Entry | None = None
        self_fenced = False
        last_heartbeat: Entry | None = None
        for e in entries:
            if e.ev == "start" or (not lives_by_start and e.ev == "broker_state" and e.get("state") == "STARTING"):
                prev, self_fenced, last_heartbeat = None, False, None
            if e.ev == "heartbeat":
                last_heartbeat = e
            if e.ev != "broker_state" or e.get("state") not in (*LIFECYCLE, *SELF_FENCING):
                continue
            why = _state_problem(e["state"], prev, self_fenced, last_heartbeat)
            if why is not None:
                vs.append(Violation("BrokerStateOrder", (
                    f"broker {e.node} journals {e['state']} out of its lifecycle: {why}"),
                    [x for x in (prev, last_heartbeat, e) if x is not None]))
            if e["state"] in SELF_FENCING:
                self_fenced = e["state"] == "FENCED_SELF"
            else:
                prev = e


def _lease_terms(entries: list[Entry]) -> list[list[Entry]]:
    """One controller's journal cut into terms of activity (at each `start` and each `role` line that
    makes it leader): the `lease` and renewing decisions of each."""
    terms: list[list[Entry]] = [[]]
    for e in entries:
        if e.ev == "start" or (e.ev == "role" and e.get("role") == "leader"):
            terms.append([])
        if e.ev == "lease" or (e.ev == "decision" and e.get("api") in RENEWING):
            terms[-1].append(e)
    return terms


RENEWING = ("BrokerHeartbeat", "BrokerRegistration")
"""Decisions whose acceptance renews a broker's lease (at the decision's `at_ms`)."""


def check_leases(journals: Journals, vs: list[Violation], session_timeout_ms: float) -> None:
    """LeaseBound (a decision is journalled when answered, after the lease it granted: the whole
    term's decisions are its evidence)."""
    for entries in journals.by_node.values():
        renewing = [e for e in entries if e.ev == "decision" and e.get("api") in RENEWING]
        if not renewing or not all(_int(e.get("at_ms")) for e in renewing):
            continue  # a node that does not journal when it heard from a broker (older nodes)
        reported: set[int] = set()
        for term in _lease_terms(entries):
            heard = {(e.get("broker"), e.get("at_ms")) for e in term if e.ev == "decision"}
            last_heard: dict[Any, int] = {}
            for e in term:
                if e.ev == "decision":
                    last_heard[e.get("broker")] = max(last_heard.get(e.get("broker"), e["at_ms"]), e["at_ms"])
            leases = [e for e in term if e.ev == "lease"]
            opening = leases[0].get("expires_ms") if leases else None
            expiry: dict[Any, Entry] = {}
            for e in leases:
                since = e.get("expires_ms", 0) - session_timeout_ms
                before, expiry[e.get("broker")] = expiry.get(e.get("broker")), e
                if before is not None and e.get("expires_ms", 0) <= before.get("expires_ms", 0):
                    if e.get("broker") not in reported:
                        reported.add(e.get("broker"))
                        vs.append(Violation("LeaseBound", (
                            f"controller {e.node} renews broker {e.get('broker')}'s lease to expire at "
                            f"{e.get('expires_ms')} ms, no later than the lease it journalled before "
                            f"({before.get('expires_ms')} ms): a renewal is a session timeout after a later "
                            "heartbeat"), [before, e]))
                    continue
                if (e.get("expires_ms") == opening or (e.get("broker"), since) in heard or e.get("broker") in reported
                        or last_heard.get(e.get("broker"), since) <= since):
                    continue  # (no later answer to that broker in the term: the one at `since` may be unanswered)
                reported.add(e.get("broker"))
                vs.append(Violation("LeaseBound", (
                    f"controller {e.node} journals broker {e.get('broker')}'s lease expiring at {e.get('expires_ms')} "
                    f"ms, but no heartbeat or registration of it was decided {session_timeout_ms:g} ms (the session "
                    f"timeout) before, at {since:g} ms: a lease bound off the session lets a silent broker lead "
                    "too long or fences a live one"), [e]))


def check_fence_alternation(journals: Journals, vs: list[Violation]) -> None:
    """FenceAlternates (a registration's first line in a term is judged against the committed state
    the controller's `apply` lines show; a registration they do not show is judged by nothing)."""
    for entries in journals.by_node.values():
        last: dict[tuple[Any, Any], Entry] = {}
        committed = Registrations()
        for e in entries:
            if e.ev == "start" or (e.ev == "role" and e.get("role") == "leader"):
                last = {}
            if e.ev == "start" or (e.ev == "image" and e.get("reason") == "snapshot-load"):
                committed.forget()
            if e.ev == "apply":
                committed.apply(e)
            if e.ev != "fence" or e.get("action") not in ("fence", "unfence") or e.get("reason") == "unregistered":
                continue
            key = (e.get("broker"), e.get("epoch"))
            before, last[key] = last.get(key), e
            fencing = e.get("action") == "fence"
            state = "fenced" if fencing else "unfenced"
            if before is not None and before.get("action") == e.get("action"):
                vs.append(Violation("FenceAlternates", (
                    f"controller {e.node} {e.get('action')}s broker {key[0]} (broker epoch {key[1]}, reason "
                    f"{e.get('reason')!r}) that it had already {state} in this term of leadership ({before.where()}): "
                    "a fencing decision on a broker already in that state"), [before, e]))
            elif before is None and committed.state.get(key[0]) == (key[1], fencing):
                vs.append(Violation("FenceAlternates", (
                    f"controller {e.node} {e.get('action')}s broker {key[0]} (broker epoch {key[1]}, reason "
                    f"{e.get('reason')!r}) first in this term of leadership, but the committed state it took over "
                    f"has it {state} already ({committed.evidence[key[0]].where()}): a fencing decision on a broker "
                    "already in that state"), [committed.evidence[key[0]], e]))


def check_decisions_from_leader(journals: Journals, vs: list[Violation]) -> None:
    """DecisionsFromLeader (once per node and kind: one cause, one finding; judged on nodes that
    journal their `role` lines)."""
    for entries in journals.by_node.values():
        if not any(e.ev == "role" for e in entries):
            continue
        role: Entry | None = None
        reported: set[bool] = set()
        for e in entries:
            if e.ev == "start":
                role = None
            elif e.ev == "role":
                role = e
            elif e.ev == "decision":
                leading = role is not None and role.get("role") == "leader"
                failed = e.get("error") == "NOT_CONTROLLER"
                if leading == failed and failed not in reported:
                    reported.add(failed)
                    now = "no role yet in this process life" if role is None else \
                        f"role {role.get('role')} in epoch {role.get('epoch')}"
                    why = ("a request failed NOT_CONTROLLER by a controller still leading (a held request fails "
                           "only when its controller renounces)") if failed else \
                        ("a decision by a controller that is not the leader (only the active controller decides; "
                         "any other answers NOT_CONTROLLER and journals nothing)")
                    vs.append(Violation("DecisionsFromLeader", (
                        f"node {e.node} journals a {e.get('api')} decision ({e.get('error')}) with {now}: {why}"),
                        [x for x in (role, e) if x is not None]))
