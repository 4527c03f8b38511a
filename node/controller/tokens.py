"""Delegation tokens on the active controller (Kafka's DelegationTokenControlManager).

- CreateDelegationToken: a token for the owner the request names (v3; else the requester), its
  renewers (User principals only: INVALID_PRINCIPAL_TYPE), issued now, renewable until
  now + min(`max_lifetime` of the request if > 0, `delegation.token.max.lifetime.ms`), expiring at
  the earlier of that and now + `delegation.token.expiry.time.ms`. The id is a random Kafka Uuid
  string; the answer carries the HMAC (node.security.tokens). One DelegationTokenRecord.
- RenewDelegationToken: the token the HMAC names (DELEGATION_TOKEN_NOT_FOUND), not past its expiry
  or max time (DELEGATION_TOKEN_EXPIRED), asked by its owner or a renewer
  (DELEGATION_TOKEN_OWNER_MISMATCH): expires at min(max time, now + renew period (if > 0, at most
  the expiry time key, else that key)). A DelegationTokenRecord with the new expiry.
- ExpireDelegationToken: the same checks; a negative period removes it at once
  (RemoveDelegationTokenRecord), else it expires at min(max time, now + period).
- `expire_tokens`: the active controller removes every token past its expiry or max time, every
  `delegation.token.expiry.check.interval.ms` (Kafka's token remover).

Without `delegation.token.secret.key` every API answers DELEGATION_TOKEN_AUTH_DISABLED. Times are
the wall clock's (`Write.wall_ms`), as Kafka's timestamps are; the principal is the request's
(`Write.principal`).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord
from kraftlab.node.protocol.durations import millis
from kraftlab.node.security.tokens import USER_TYPE, allowed_to_renew, token_hmac


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def create_delegation_token(w: Write, req: Any) -> Outcome:
    tokens = w.config.tokens
    now = w.wall_ms
    owner = w.principal
    if getattr(req, "owner_principal_name", None):
        owner = f"{req.owner_principal_type}:{req.owner_principal_name}"
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(w.principal)
    values: dict[str, Any] = {
        "error_code": ErrorCode.none, "principal_type": owner_type, "principal_name": owner_name,
        "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
        "issue_timestamp": 0, "expiry_timestamp": 0, "max_timestamp": 0, "token_id": "", "hmac": b"",
    }
    decision: dict[str, Any] = {"api": "CreateDelegationToken", "owner": owner, "requester": w.principal}
    if tokens.secret_key is None:
        values["error_code"] = ErrorCode.delegation_token_auth_disabled
    elif any(r.principal_type != USER_TYPE for r in req.renewers):
        values["error_code"] = ErrorCode.invalid_principal_type
    if values["error_code"] != ErrorCode.none:
        return Outcome(values, [{**decision, "error": error_name(values["error_code"])}])
    assert tokens.secret_key is not None
    requested = millis(req.max_lifetime)
    lifetime = min(tokens.max_lifetime_ms, requested) if requested > 0 else tokens.max_lifetime_ms
    max_ts = now + lifetime
    expiry = min(max_ts, now + tokens.expiry_time_ms)
    while True:
        token_id = uuid_to_kafka(uuid.UUID(int=w.rng.getrandbits(128), version=4))
        if token_id not in w.image.delegation_tokens:
            break
    renewers = tuple(f"{r.principal_type}:{r.principal_name}" for r in req.renewers)
    w.emit(DelegationTokenRecord(
        owner=owner, requester=w.principal, renewers=renewers, issue_timestamp=now, max_timestamp=max_ts,
        expiration_timestamp=expiry, token_id=token_id))
    values.update(issue_timestamp=now, expiry_timestamp=expiry, max_timestamp=max_ts, token_id=token_id,
                  hmac=token_hmac(tokens.secret_key, token_id))
    return Outcome(values, [{**decision, "token_id": token_id, "expiry_timestamp": expiry, "error": "NONE"}])


def _token_for(w: Write, mac: bytes) -> tuple[DelegationTokenRecord | None, ErrorCode]:
    """The token whose HMAC is `mac`, checked as Kafka checks it before a renewal or expiry."""
    secret = w.config.tokens.secret_key
    if secret is None:
        return None, ErrorCode.delegation_token_auth_disabled
    token = next((t for t in w.image.delegation_tokens.values() if token_hmac(secret, t.token_id) == bytes(mac)), None)
    if token is None:
        return None, ErrorCode.delegation_token_not_found
    if token.max_timestamp < w.wall_ms or token.expiration_timestamp < w.wall_ms:
        return token, ErrorCode.delegation_token_expired
    if not allowed_to_renew(w.principal, token.owner, token.renewers):
        return token, ErrorCode.delegation_token_owner_mismatch
    return token, ErrorCode.none


def _with_expiry(token: DelegationTokenRecord, expiry: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(
        owner=token.owner, requester=token.requester, renewers=token.renewers,
        issue_timestamp=token.issue_timestamp, max_timestamp=token.max_timestamp, expiration_timestamp=expiry,
        token_id=token.token_id)


def renew_delegation_token(w: Write, req: Any) -> Outcome:
    token, code = _token_for(w, req.hmac)
    decision: dict[str, Any] = {"api": "RenewDelegationToken", "principal": w.principal,
                                "token_id": token.token_id if token is not None else None}
    if token is None or code != ErrorCode.none:
        return Outcome({"error_code": code, "expiry_timestamp": 0}, [{**decision, "error": error_name(code)}])
    period = millis(req.renew_period)
    expiry_time = w.config.tokens.expiry_time_ms
    renew = min(expiry_time, period) if period > 0 else expiry_time
    expiry = min(token.max_timestamp, w.wall_ms + renew)
    w.emit(_with_expiry(token, expiry))
    return Outcome({"error_code": ErrorCode.none, "expiry_timestamp": expiry},
                   [{**decision, "expiry_timestamp": expiry, "error": "NONE"}])


def expire_delegation_token(w: Write, req: Any) -> Outcome:
    token, code = _token_for(w, req.hmac)
    decision: dict[str, Any] = {"api": "ExpireDelegationToken", "principal": w.principal,
                                "token_id": token.token_id if token is not None else None}
    if token is None or code != ErrorCode.none:
        return Outcome({"error_code": code, "expiry_timestamp": 0}, [{**decision, "error": error_name(code)}])
    period = millis(req.expiry_time_period)
    if period < 0:  # expire now: gone from the image
        w.emit(RemoveDelegationTokenRecord(token_id=token.token_id))
        expiry = w.wall_ms
    else:
        expiry = min(token.max_timestamp, w.wall_ms + period)
        w.emit(_with_expiry(token, expiry))
    return Outcome({"error_code": ErrorCode.none, "expiry_timestamp": expiry},
                   [{**decision, "expiry_timestamp": expiry, "error": "NONE"}])


def expire_tokens(w: Write) -> list[str]:
    """Remove every token past its expiry or max time (the token remover); the ids removed."""
    gone = [t.token_id for t in w.image.delegation_tokens.values()
            if t.expiration_timestamp < w.wall_ms or t.max_timestamp < w.wall_ms]
    for token_id in sorted(gone):
        w.emit(RemoveDelegationTokenRecord(token_id=token_id))
    return gone
