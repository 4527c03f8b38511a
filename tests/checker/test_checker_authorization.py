"""The authorization checker: brokers' `authz` decisions against the committed ACLs."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from kraftlab.checker.authorization import check_authorization
from kraftlab.checker.journal import journals_from
from kraftlab.node.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord, encode

ACL = [2, "orders", 3, "User:alice", "*", 3, 3]
AID = uuid.UUID(int=7)


def _apply(node: int, offset: int, record: Any, ms: int) -> dict[str, Any]:
    return {"node": node, "ev": "apply", "ts": ms, "mono": ms * 1_000_000, "rmono": ms * 1_000_000,
            "offset": offset, "type": type(record).__name__, "value": base64.b64encode(encode(record)).decode()}


def _authz(node: int, offset: int, ms: int, acl: list[Any] | None = ACL, allowed: bool = True) -> dict[str, Any]:
    return {"node": node, "ev": "authz", "ts": ms, "mono": ms * 1_000_000, "rmono": ms * 1_000_000,
            "principal": "User:alice", "operation": "READ", "resource_type": "TOPIC", "resource": "orders",
            "allowed": allowed, "reason": "ALLOW (…)" if allowed else "no ALLOW ACL matches", "acl": acl,
            "offset": offset}


def _heartbeat(node: int, ms: int) -> dict[str, Any]:
    return {"node": node, "ev": "heartbeat", "ts": ms, "mono": ms * 1_000_000, "rmono": ms * 1_000_000, "ok": True,
            "self_fence_ms": 4000}


def _journals(*decisions: dict[str, Any], removed_at: int | None = 3_000, heard_until: int = 10_000) -> Any:
    created = AccessControlEntryRecord(id=AID, resource_type=2, resource_name="orders", pattern_type=3,
                                       principal="User:alice", host="*", operation=3, permission_type=3)
    entries = [{"node": n, "ev": "start", "ts": 0, "mono": 0, "rmono": 0, "boot_id": "b"} for n in (1, 2)]
    entries += [_heartbeat(2, ms) for ms in range(0, heard_until + 1, 1000)]  # broker 2 hears the quorum
    entries.append(_apply(1, 10, created, 1_000))
    if removed_at is not None:
        entries.append(_apply(1, 20, RemoveAccessControlEntryRecord(id=AID), removed_at))
    return journals_from(sorted([*entries, *decisions], key=lambda e: e["ts"]))  # each journal in time order


def test_decisions_within_the_bound_and_after_a_lag_are_valid() -> None:
    r = check_authorization(_journals(_authz(2, 11, 2_000), _authz(2, 15, 6_000), _authz(2, 21, 9_000, None, False)))
    assert r["valid"], r


def test_an_acl_honoured_long_after_its_removal_is_stale() -> None:
    r = check_authorization(_journals(_authz(2, 15, 9_000), heard_until=2_000))
    assert not r["valid"] and r["anomalies"][0]["type"] == "StaleAuthorization"
    assert "past its self-fencing bound of 4000" in r["anomalies"][0]["explanation"]
    # a broker that still hears the quorum may trail (a slow disk): not judged by this rule
    assert check_authorization(_journals(_authz(2, 15, 9_000)))["valid"]


def test_an_acl_the_image_could_not_hold_is_flagged() -> None:
    before_creation = check_authorization(_journals(_authz(2, 5, 1_500)))
    after_removal = check_authorization(_journals(_authz(2, 25, 3_500)))
    never = check_authorization(_journals(_authz(2, 15, 1_500, acl=[2, "other", 3, "User:bob", "*", 3, 3])))
    for r in (before_creation, after_removal, never):
        assert not r["valid"] and r["anomalies"][0]["type"] == "AuthorizedByCommittedAcl"


def test_without_decisions_or_a_shared_clock_it_says_what_it_could_not_check() -> None:
    assert check_authorization(_journals())["checked"] == []
    no_clock = [{**e, "rmono": None} for e in ([_authz(2, 15, 9_000)])]
    r = check_authorization(_journals(*no_clock))
    assert r["valid"] and "StaleAuthorization" not in r["checked"]


def test_a_run_whose_brokers_journalled_decisions_is_judged_by_the_authorization_checker() -> None:
    from kraftlab.checker.run import journal_checks

    assert "authorization" not in journal_checks(_journals(), None)  # no authorizer configured: nothing to judge
    checks = journal_checks(_journals(_authz(2, 15, 9_000), heard_until=2_000), None)
    assert checks["authorization"]()["anomalies"][0]["type"] == "StaleAuthorization"


def test_the_decision_offset_is_the_last_record_the_image_applied() -> None:
    # the broker journals its highest applied offset: the creation at 10 is in an image at 10, the
    # removal at 20 in an image at 20
    assert check_authorization(_journals(_authz(2, 10, 1_200)))["valid"]
    r = check_authorization(_journals(_authz(2, 20, 3_100)))
    assert not r["valid"] and r["anomalies"][0]["type"] == "AuthorizedByCommittedAcl"


def test_a_broker_silent_past_its_bound_allowing_by_a_removed_acl_is_stale() -> None:
    # removed at 3 s; broker 2 last heard the quorum at 2 s: at 7.5 s (4.5 s after the removal) it is
    # 5.5 s past its last heartbeat, beyond 4 s + 1 s
    r = check_authorization(_journals(_authz(2, 15, 7_500), heard_until=2_000))
    assert not r["valid"] and r["anomalies"][0]["type"] == "StaleAuthorization"
    assert "after it last heard from the quorum" in r["anomalies"][0]["explanation"]
    # within the bound of its last heartbeat, or before the removal was committed: a lag, allowed
    assert check_authorization(_journals(_authz(2, 15, 6_500), heard_until=2_000))["valid"]
    assert check_authorization(_journals(_authz(2, 15, 7_500), removed_at=7_600, heard_until=2_000))["valid"]
