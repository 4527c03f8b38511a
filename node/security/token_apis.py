"""Who may use the delegation token APIs, and DescribeDelegationToken from an image (pure).

As Kafka's KafkaApis:
- no token API on a PLAINTEXT listener, for an anonymous one-way TLS client, or for a session
  that logged in with a token: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (`allows_token_requests`);
- CreateDelegationToken for another owner (v3's owner fields) needs CREATE_TOKENS on that owner's
  USER resource, else DELEGATION_TOKEN_AUTHORIZATION_FAILED; everyone else may create their own;
- Renew / Expire: the owner or a renewer, decided by the controller (node.controller.tokens);
- DescribeDelegationToken (answered by brokers from their image): the tokens of the `owners`
  asked (null: all; empty: none) that the principal owns, requested or renews, or has DESCRIBE on
  (the DELEGATION_TOKEN resource of the token id) or DESCRIBE_TOKENS on (the owner's USER
  resource); each with its HMAC. Without `delegation.token.secret.key`: DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import respond
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.security.acl import AclOperation, ResourceType
from kraftlab.node.security.tokens import allows_token_requests, owner_or_renewer, token_hmac

TOKEN_APIS = frozenset({
    "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken",
})
Check = Callable[[int, int, str], bool]
"""(operation, resource type, resource name) → allowed for the request's principal."""


def _pair(principal: str) -> dict[str, str]:
    kind, _, name = principal.partition(":")
    return {"principal_type": kind, "principal_name": name}


def screen_token_request(api: str, request: Any, principal: str, security_protocol: str, token_authenticated: bool,
                         check: Check) -> Any | None:
    """The response refusing `request` (a token API), or None to serve it."""
    if not allows_token_requests(security_protocol, principal, token_authenticated):
        return respond(request, {"error_code": ErrorCode.delegation_token_request_not_allowed, **_pair(principal)})
    if api == "CreateDelegationToken" and getattr(request, "owner_principal_name", None):
        owner = f"{request.owner_principal_type}:{request.owner_principal_name}"
        if owner != principal and not check(AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
            return respond(request, {"error_code": ErrorCode.delegation_token_authorization_failed,
                                     **_pair(owner)})
    return None


def describe_delegation_token_response(request: Any, image: MetadataImage, principal: str, check: Check,
                                       secret_key: str | None) -> Any:
    if secret_key is None:
        return respond(request, {"error_code": ErrorCode.delegation_token_auth_disabled, "tokens": []})
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    tokens = []
    for tid, t in sorted(image.delegation_tokens.items()):
        if owners is not None and not any(owner_or_renewer(o, t.owner, t.requester, t.renewers) for o in owners):
            continue
        if not (owner_or_renewer(principal, t.owner, t.requester, t.renewers)
                or check(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, tid)
                or check(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, t.owner)):
            continue
        requester = _pair(t.requester)
        tokens.append({
            **_pair(t.owner), "token_requester_principal_type": requester["principal_type"],
            "token_requester_principal_name": requester["principal_name"],
            "issue_timestamp": t.issue_timestamp, "expiry_timestamp": t.expiration_timestamp,
            "max_timestamp": t.max_timestamp, "token_id": tid, "hmac": token_hmac(secret_key, tid),
            "renewers": [_pair(r) for r in t.renewers],
        })
    return respond(request, {"error_code": ErrorCode.none, "tokens": tokens})
