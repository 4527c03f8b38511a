"""Delegation tokens on the controller (Kafka's DelegationTokenControlManager): Create / Renew /
Expire with Kafka's lifetimes and errors, the HMAC as Kafka computes it, DelegationTokenRecord and
RemoveDelegationTokenRecord in the log, the image and its snapshot, and the expired-token sweep."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json

import pytest
from controller_harness import Harness
from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest

from kraftlab.node.metadata.image import ImageError, MetadataImage
from kraftlab.node.metadata.records import (
    DelegationTokenRecord,
    RemoveDelegationTokenRecord,
    decode,
    encode,
    to_json,
)
from kraftlab.node.metadata.shell import MetadataShell, image_tree
from kraftlab.node.security.tokens import TokenConfig, TokenConfigError, token_hmac

SECRET = "s3cr3t-key"
DAY = 24 * 3600 * 1000
TOKENS = TokenConfig(SECRET, max_lifetime_ms=7 * DAY, expiry_time_ms=DAY, expiry_check_interval_ms=60_000)


def ms(ts: datetime.datetime) -> int:
    return round(ts.timestamp() * 1000)


def td(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def create(h: Harness, principal: str = "User:alice", owner: str | None = None, renewers: tuple[str, ...] = (),
           max_lifetime: int = -1) -> object:
    kind, _, name = owner.partition(":") if owner else (None, "", None)
    return h.run(CreateDelegationTokenRequest(
        owner_principal_type=kind, owner_principal_name=name or None,
        renewers=tuple(CreatableRenewers(principal_type=r.split(":")[0], principal_name=r.split(":")[1])
                       for r in renewers),
        max_lifetime=td(max_lifetime)), principal=principal)


@pytest.fixture
def th() -> Harness:
    return Harness(tokens=TOKENS)


def test_hmac_is_kafkas_hmac_sha512_of_the_token_id() -> None:
    assert token_hmac("key", "tid") == hmac.new(b"key", b"tid", hashlib.sha512).digest()
    assert len(token_hmac("key", "tid")) == 64


def test_create_records_the_token_and_answers_its_hmac(th: Harness) -> None:
    r = create(th, renewers=("User:bob",))
    assert r.error_code == ErrorCode.none
    assert (r.principal_type, r.principal_name) == ("User", "alice")
    assert (r.token_requester_principal_type, r.token_requester_principal_name) == ("User", "alice")
    assert bytes(r.hmac) == token_hmac(SECRET, r.token_id)
    assert ms(r.issue_timestamp) == th.now
    assert ms(r.expiry_timestamp) == th.now + DAY and ms(r.max_timestamp) == th.now + 7 * DAY
    token = th.image().delegation_tokens[r.token_id]
    assert token == DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=("User:bob",),
                                          issue_timestamp=th.now, max_timestamp=th.now + 7 * DAY,
                                          expiration_timestamp=th.now + DAY, token_id=r.token_id)
    assert len(base64.urlsafe_b64decode(r.token_id + "==")) == 16  # a Kafka Uuid string
    shell = MetadataShell(image_tree(th.active().committed_image))
    assert json.loads(shell.run(f"cat /delegationTokens/{r.token_id}/renewers")) == ["User:bob"]
    assert json.loads(shell.run(f"cat /delegationTokens/{r.token_id}/expirationTimestamp")) == th.now + DAY


def test_create_for_another_owner_a_short_lifetime_and_refusals(th: Harness) -> None:
    r = create(th, principal="User:admin", owner="User:carol", max_lifetime=3_600_000)
    assert (r.principal_name, r.token_requester_principal_name) == ("carol", "admin")
    assert ms(r.max_timestamp) == ms(r.expiry_timestamp) == th.now + 3_600_000  # min(max, expiry)
    before = th.active().committed_offset
    assert create(th, renewers=("Group:ops",)).error_code == ErrorCode.invalid_principal_type
    assert th.active().committed_offset == before


def test_tokens_disabled_without_a_secret_key(h: Harness) -> None:
    assert create(h).error_code == ErrorCode.delegation_token_auth_disabled
    assert h.run(RenewDelegationTokenRequest(hmac=b"x", renew_period=td(-1))).error_code == \
        ErrorCode.delegation_token_auth_disabled
    assert h.image().delegation_tokens == {}


def test_renew_by_owner_or_renewer_only_and_never_past_max(th: Harness) -> None:
    r = create(th, renewers=("User:bob",), max_lifetime=3 * DAY)
    mac = bytes(r.hmac)
    th.now += DAY // 2
    assert th.run(RenewDelegationTokenRequest(hmac=mac, renew_period=td(-1)), principal="User:eve").error_code == \
        ErrorCode.delegation_token_owner_mismatch
    renewed = th.run(RenewDelegationTokenRequest(hmac=mac, renew_period=td(-1)), principal="User:bob")
    assert renewed.error_code == ErrorCode.none and ms(renewed.expiry_timestamp) == th.now + DAY
    for _ in range(2):  # renewed before each expiry, up to 18 h before the max time (issue + 3 days)
        th.now += DAY * 9 // 10
        assert th.run(RenewDelegationTokenRequest(hmac=mac, renew_period=td(-1)), principal="User:bob").error_code == \
            ErrorCode.none
    capped = th.run(RenewDelegationTokenRequest(hmac=mac, renew_period=td(DAY)), principal="User:alice")
    assert ms(capped.expiry_timestamp) == ms(r.max_timestamp)
    assert th.image().delegation_tokens[r.token_id].expiration_timestamp == ms(r.max_timestamp)
    assert th.run(RenewDelegationTokenRequest(hmac=b"\x00" * 64, renew_period=td(-1)),
                  principal="User:alice").error_code == ErrorCode.delegation_token_not_found
    th.now = ms(r.max_timestamp) + 1
    assert th.run(RenewDelegationTokenRequest(hmac=mac, renew_period=td(-1)), principal="User:alice").error_code == \
        ErrorCode.delegation_token_expired


def test_expire_later_or_now(th: Harness) -> None:
    r = create(th)
    mac = bytes(r.hmac)
    later = th.run(ExpireDelegationTokenRequest(hmac=mac, expiry_time_period=td(60_000)), principal="User:alice")
    assert later.error_code == ErrorCode.none and ms(later.expiry_timestamp) == th.now + 60_000
    assert th.run(ExpireDelegationTokenRequest(hmac=mac, expiry_time_period=td(-1)),
                  principal="User:bob").error_code == ErrorCode.delegation_token_owner_mismatch
    now = th.run(ExpireDelegationTokenRequest(hmac=mac, expiry_time_period=td(-1)), principal="User:alice")
    assert now.error_code == ErrorCode.none and r.token_id not in th.image().delegation_tokens


def test_the_active_controller_removes_expired_tokens_every_check_interval(th: Harness) -> None:
    keep = create(th, max_lifetime=-1)
    short = create(th, max_lifetime=1_000)
    th.tick(0)  # the sweep's interval starts
    th.tick(30_000)
    assert short.token_id in th.image().delegation_tokens  # expired, but not yet swept
    th.tick(30_000)
    assert set(th.image().delegation_tokens) == {keep.token_id}
    assert th.active().committed_image.delegation_tokens.keys() == {keep.token_id}


def test_records_wire_form_snapshot_and_image() -> None:
    t = DelegationTokenRecord(owner="User:a", requester="User:b", renewers=("User:c",), issue_timestamp=1,
                              max_timestamp=3, expiration_timestamp=2, token_id="tid")
    assert encode(t)[:3] == bytes([1, 10, 0]) and decode(encode(t)) == t
    gone = RemoveDelegationTokenRecord(token_id="tid")
    assert encode(gone)[:3] == bytes([1, 26, 0]) and decode(encode(gone)) == gone
    assert to_json(t)["data"] == {"owner": "User:a", "requester": "User:b", "renewers": ["User:c"],
                                  "issueTimestamp": 1, "maxTimestamp": 3, "expirationTimestamp": 2, "tokenId": "tid"}
    image = MetadataImage()
    assert "delegation_tokens" not in image.semantic_form()  # digests of images without tokens unchanged
    image.apply(t)
    assert MetadataImage.from_records(image.to_records()) == image
    assert image.semantic_form()["delegation_tokens"]["tid"]["owner"] == "User:a"
    image.apply(gone)
    assert image.delegation_tokens == {}
    with pytest.raises(ImageError, match="unknown token"):
        image.apply(gone)


def test_token_keys() -> None:
    c = TokenConfig.from_properties({"delegation.token.secret.key": "k", "delegation.token.expiry.time.ms": "5"})
    assert c.enabled and c.expiry_time_ms == 5 and c.max_lifetime_ms == 7 * DAY
    assert TokenConfig.from_properties({"delegation.token.master.key": "old"}).secret_key == "old"
    assert not TokenConfig.from_properties({}).enabled
    with pytest.raises(TokenConfigError, match=r"delegation\.token\.max\.lifetime\.ms"):
        TokenConfig.from_properties({"delegation.token.max.lifetime.ms": "soon"})
