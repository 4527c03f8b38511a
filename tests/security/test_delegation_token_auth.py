"""Delegation tokens at the edges (pure): SCRAM login with Kafka's `tokenauth=true` extension against
the image's tokens, who may use the token APIs (allowTokenRequests, CREATE_TOKENS), which tokens
DescribeDelegationToken shows, and the Envelope that carries a client's principal to the controller."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenOwner, DescribeDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.response import RenewDelegationTokenResponse

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import DelegationTokenRecord
from kraftlab.node.protocol import envelope
from kraftlab.node.security.acl import AclOperation, ResourceType
from kraftlab.node.security.authenticator import SaslAuthenticator
from kraftlab.node.security.listeners import ImageCredentials
from kraftlab.node.security.scram import MECHANISMS, AuthenticationFailed, ScramClient
from kraftlab.node.security.token_apis import describe_delegation_token_response, screen_token_request
from kraftlab.node.security.tokens import TokenConfig, token_hmac, token_password

SECRET = "the-secret"
NOW = 1_700_000_000_000


def _image(*tokens: DelegationTokenRecord) -> MetadataImage:
    image = MetadataImage()
    for t in tokens:
        image.apply(t)
    return image


def _token(tid: str, owner: str = "User:alice", requester: str = "User:alice", renewers: tuple[str, ...] = (),
           expiry: int = NOW + 60_000) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner=owner, requester=requester, renewers=renewers, issue_timestamp=NOW - 1,
                                 max_timestamp=NOW + 3_600_000, expiration_timestamp=expiry, token_id=tid)


def _login(auth: SaslAuthenticator, mechanism: str, user: str, password: str, token: bool = True) -> tuple[str, bool]:
    exchange = auth.start(mechanism)
    assert exchange is not None
    client = ScramClient(MECHANISMS[mechanism], user, password, {"tokenauth": "true"} if token else None)
    client.verify(exchange.step(client.final(exchange.step(client.first()))))
    assert exchange.complete
    return exchange.principal, exchange.token_authenticated


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_as_its_owner(mechanism: str) -> None:
    image = _image(_token("tok1"))
    auth = SaslAuthenticator((mechanism,), ImageCredentials(lambda: image, TokenConfig(SECRET), lambda: NOW))
    password = token_password(token_hmac(SECRET, "tok1"))
    assert _login(auth, mechanism, "tok1", password) == ("User:alice", True)
    with pytest.raises(AuthenticationFailed):
        _login(auth, mechanism, "tok1", password, token=False)  # no such user: the extension is what says "token"
    with pytest.raises(AuthenticationFailed):
        _login(auth, mechanism, "tok1", token_password(token_hmac("another-secret", "tok1")))


def test_expired_unknown_or_disabled_tokens_do_not_log_in() -> None:
    image = _image(_token("old", expiry=NOW - 1), _token("tok1"))
    password = token_password(token_hmac(SECRET, "old"))
    auth = SaslAuthenticator(("SCRAM-SHA-512",), ImageCredentials(lambda: image, TokenConfig(SECRET), lambda: NOW))
    with pytest.raises(AuthenticationFailed):
        _login(auth, "SCRAM-SHA-512", "old", password)
    with pytest.raises(AuthenticationFailed):
        _login(auth, "SCRAM-SHA-512", "nope", password)
    disabled = SaslAuthenticator(("SCRAM-SHA-512",), ImageCredentials(lambda: image, TokenConfig(None), lambda: NOW))
    with pytest.raises(AuthenticationFailed):
        _login(disabled, "SCRAM-SHA-512", "tok1", token_password(token_hmac(SECRET, "tok1")))


def _create(owner: str | None = None) -> CreateDelegationTokenRequest:
    kind, _, name = owner.partition(":") if owner else (None, "", None)
    return CreateDelegationTokenRequest(owner_principal_type=kind, owner_principal_name=name or None, renewers=(),
                                        max_lifetime=datetime.timedelta(milliseconds=-1))


def test_who_may_use_the_token_apis() -> None:
    def allow(op: int, rtype: int, name: str) -> bool:
        return False

    refused = screen_token_request("CreateDelegationToken", _create(), "User:ANONYMOUS", "PLAINTEXT", False, allow)
    assert refused.error_code == ErrorCode.delegation_token_request_not_allowed
    renew = RenewDelegationTokenRequest(hmac=b"x", renew_period=datetime.timedelta(0))
    assert screen_token_request("RenewDelegationToken", renew, "User:alice", "SASL_SSL", True, allow).error_code == \
        ErrorCode.delegation_token_request_not_allowed  # a token cannot renew tokens
    assert screen_token_request("CreateDelegationToken", _create(), "User:ANONYMOUS", "SSL", False, allow) is not None
    own = _create()
    assert screen_token_request("CreateDelegationToken", own, "User:alice", "SASL_PLAINTEXT", False, allow) is None
    assert screen_token_request("CreateDelegationToken", _create("User:alice"), "User:alice", "SASL_PLAINTEXT",
                                False, allow) is None
    other = screen_token_request("CreateDelegationToken", _create("User:bob"), "User:alice", "SASL_PLAINTEXT",
                                 False, allow)
    assert other.error_code == ErrorCode.delegation_token_authorization_failed
    asked: list[tuple[int, int, str]] = []

    def create_tokens(op: int, rtype: int, name: str) -> bool:
        asked.append((op, rtype, name))
        return op == AclOperation.CREATE_TOKENS and rtype == ResourceType.USER and name == "User:bob"

    assert screen_token_request("CreateDelegationToken", _create("User:bob"), "User:alice", "SASL_PLAINTEXT",
                                False, create_tokens) is None
    assert asked == [(AclOperation.CREATE_TOKENS, ResourceType.USER, "User:bob")]


def test_describe_shows_own_renewable_or_permitted_tokens_with_their_hmac() -> None:
    image = _image(_token("a1"), _token("b1", owner="User:bob", renewers=("User:alice",)),
                   _token("c1", owner="User:carol"), _token("d1", owner="User:dave"))

    def check(op: int, rtype: int, name: str) -> bool:
        return (op, rtype, name) in {(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, "c1"),
                                     (AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:dave")}

    def ids(owners: tuple[str, ...] | None, principal: str = "User:alice") -> list[str]:
        req = DescribeDelegationTokenRequest(owners=None if owners is None else tuple(
            DescribeDelegationTokenOwner(principal_type="User", principal_name=o) for o in owners))
        response = describe_delegation_token_response(req, image, principal, check, SECRET)
        assert response.error_code == ErrorCode.none
        for t in response.tokens:
            assert bytes(t.hmac) == token_hmac(SECRET, t.token_id)
        return [t.token_id for t in response.tokens]

    assert ids(None) == ["a1", "b1", "c1", "d1"]
    assert ids(("bob",)) == ["b1"]
    assert ids(()) == []
    assert ids(None, "User:eve") == ["c1", "d1"]
    disabled = describe_delegation_token_response(DescribeDelegationTokenRequest(owners=None), image, "User:alice",
                                                  check, None)
    assert disabled.error_code == ErrorCode.delegation_token_auth_disabled


def test_an_envelope_carries_the_request_and_the_clients_principal() -> None:
    request = RenewDelegationTokenRequest(hmac=b"\x01\x02", renew_period=datetime.timedelta(milliseconds=5))
    wrapped = envelope.wrap(request, "User:alice", True, "10.0.0.7", "client-1", correlation_id=9)
    opened = envelope.open_envelope(wrapped)
    assert opened.request == request and opened.principal == "User:alice" and opened.token_authenticated
    assert (opened.correlation_id, opened.client_id, opened.host) == (9, "client-1", "10.0.0.7")
    answer = RenewDelegationTokenResponse(error_code=ErrorCode.none, expiry_timestamp=datetime.datetime(
        2026, 1, 1, tzinfo=datetime.UTC), throttle_time=datetime.timedelta(0))
    assert envelope.unseal(envelope.seal(answer, 9), request) == answer
    assert envelope.unseal(envelope.refuse(ErrorCode.cluster_authorization_failed), request) is None
