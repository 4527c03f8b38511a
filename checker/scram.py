"""The scram workload's logins judged against its credential upserts and deletions (docs/workload-ops.md).

A credential is (user, mechanism); its password is the one the last upsert set. Rules over the
`scram` ops of a history, on the runner's one clock:
- LoginWithUnsetPassword: a login authenticated with a password that no upsert of that credential
  (acknowledged or of unknown outcome) invoked before the login completed ever set.
- LoginAfterDeletion: a login authenticated although a deletion of the credential was acknowledged
  longer than the propagation bound before the login was invoked, and no upsert of that password
  could have taken effect after the deletion began (none was still open, or of unknown outcome,
  when the deletion was invoked, and none was invoked after it). The bound is the brokers'
  self-fencing timeout (journalled with their heartbeats; without journals, the session timeout
  plus two heartbeat intervals) plus `slack_ms`: a broker that answers the request after the login
  has heard from the quorum within its self-fencing timeout, so it has applied every record
  committed before that, the deletion included. A broker fences itself by its own clock: for a
  broker whose clock the nemesis slowed (`clock-rate` below 1) or moved back (`clock-bump`,
  `clock-strobe`) before the login, the timeout is stretched by the slowest rate and the largest
  step back the history records for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kraftlab.checker.history import History, Op, pair_ops
from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Journals

RULES = ["LoginWithUnsetPassword", "LoginAfterDeletion"]
DEFAULT_SLACK_MS = 2000
HEARTBEAT_INTERVALS_MS = 2 * 2000  # without journals: Kafka's self-fencing default beyond the session


def _key(op: Op) -> tuple[str, str]:
    v = op.value if isinstance(op.value, dict) else {}
    return str(v.get("user")), str(v.get("mechanism"))


def _bound_ms(journals: Journals | None, session_timeout_ms: float) -> float:
    bounds = [int(e.get("self_fence_ms")) for e in (journals.all() if journals is not None else ())
              if e.ev == "heartbeat" and e.get("self_fence_ms")]
    return float(max(bounds)) if bounds else session_timeout_ms + HEARTBEAT_INTERVALS_MS


def _clock_allowance(history: History | Iterable[Any]) -> list[tuple[int, str, float, float]]:
    """The nemesis's clock changes: (time ns, node, rate, ms its clock could step back)."""
    out = []
    for e in history.events if isinstance(history, History) else history:
        if e.process != "nemesis" or e.type == "invoke" or not str(e.f).startswith("clock-") or not isinstance(
                e.value, dict):
            continue
        v = e.value
        rate = float(v.get("rate", 1.0)) if e.f == "clock-rate" else 1.0
        back = 0.0
        if e.f == "clock-bump":
            back = max(0.0, -float(v.get("delta_ms", 0.0)))
        elif e.f == "clock-strobe":
            back = abs(float(v.get("high_ms", 0.0)) - float(v.get("low_ms", 0.0)))
        for n in v.get("nodes") or ():
            out.append((int(e.time or 0), str(n), rate, back))
    return out


def _stretched(bound_ms: float, clocks: list[tuple[int, str, float, float]], node: Any, before_ns: int) -> float:
    """`bound_ms` of a broker's own clock in real time, given what the nemesis did to that clock."""
    mine = [(r, b) for t, n, r, b in clocks if n == node and t <= before_ns]
    if not mine:
        return bound_ms
    slowest = min(1.0, *(r for r, _ in mine))
    return bound_ms / max(slowest, 1e-3) + max(b for _, b in mine)


def _ms(ns: int | None) -> float:
    return (ns or 0) / 1e6


def scram_ops(history: History | Iterable[Any]) -> list[Op]:
    events = [e for e in (history.events if isinstance(history, History) else history)
              if e.process != "nemesis" and e.extra.get("workload") == "scram"]
    return pair_ops(events)


def check_scram(history: History, journals: Journals | None = None, session_timeout_ms: float = 9000.0,
                slack_ms: float = DEFAULT_SLACK_MS, bound_ms: float | None = None) -> dict[str, Any]:
    """The rules of the module docstring; `bound_ms` replaces the propagation bound when given."""
    ops = scram_ops(history)
    own = _bound_ms(journals, session_timeout_ms)
    clocks = _clock_allowance(history)
    upserts: dict[tuple[str, str], list[Op]] = {}
    deletes: dict[tuple[str, str], list[Op]] = {}
    for op in ops:
        if op.f == "upsert" and op.status != "fail":
            upserts.setdefault(_key(op), []).append(op)
        elif op.f == "delete" and op.status == "ok":
            deletes.setdefault(_key(op), []).append(op)
    logins = [op for op in ops if op.f == "login" and op.status == "ok"
              and isinstance(op.output, dict) and op.output.get("authenticated")]
    vs: list[Violation] = []
    for login in logins:
        key, password = _key(login), login.value.get("password")
        done = login.ret_time if login.ret_time is not None else login.start
        setting = [u for u in upserts.get(key, []) if u.value.get("password") == password and u.start <= done]
        if not setting:
            vs.append(Violation("LoginWithUnsetPassword", (
                f"line {login.ret_line}: broker {login.value.get('node')} authenticated {key[0]!r} with {key[1]} and a "
                f"password that no upsert of that credential set")))
            continue
        node = login.value.get("node")
        bound = bound_ms if bound_ms is not None else _stretched(own, clocks, node, login.start) + slack_ms
        for d in deletes.get(key, []):
            age = _ms(login.start) - _ms(d.ret_time)
            if age <= bound:
                continue
            recreated = [u for u in setting if u.crashed or (u.ret_time or 0) >= d.start]
            if recreated:
                continue
            vs.append(Violation("LoginAfterDeletion", (
                f"line {login.call_line}: broker {login.value.get('node')} authenticated {key[0]!r} with {key[1]} "
                f"{age:.0f} ms after the deletion of that credential was acknowledged (line {d.ret_line}), past "
                f"the propagation bound of {bound:.0f} ms, and no upsert of that password could have taken "
                f"effect after the deletion (last set at line {max(u.ret_line for u in setting)})")))
            break
    stats = {"logins": sum(1 for o in ops if o.f == "login"), "authenticated": len(logins),
             "acknowledged_deletions": sum(len(v) for v in deletes.values()),
             "bound_ms": bound_ms if bound_ms is not None else own + slack_ms}
    if not logins:
        return result([], [], {k: "no login authenticated" for k in RULES}, stats=stats)
    return result(vs, list(RULES), stats=stats)
