"""The cluster simulator's delegation-token client (node/sim/kraft_tokens.py): edge values of every
token API answered as Kafka's DelegationTokenControlManager answers them, and a controller that
handles an edge value wrong — a deliberately wrong handler put in for the test — caught in a run."""

from __future__ import annotations

import dataclasses
import datetime
import random
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.static.primitive import i64Timedelta

import kraftlab.node.controller.quorum_controller as quorum_controller
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import DelegationTokenRecord
from kraftlab.node.security.tokens import token_hmac
from kraftlab.node.sim.kraft import KraftSim, SimViolation
from kraftlab.node.sim.kraft_tokens import TOKENS, TokenClient, TokenFacts, overdue

assert TOKENS.secret_key is not None
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MAX, _EXPIRY = TOKENS.max_lifetime_ms, TOKENS.expiry_time_ms


def _at(ms: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=ms)


def _token(owner: str = "User:ANONYMOUS", max_ts: int = 50_000, expiry: int = 20_000) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner=owner, requester="User:ANONYMOUS", renewers=(), issue_timestamp=1_000,
                                 max_timestamp=max_ts, expiration_timestamp=expiry, token_id="tok")


def _image(*tokens: DelegationTokenRecord) -> MetadataImage:
    image = MetadataImage()
    image.delegation_tokens = {t.token_id: t for t in tokens}
    return image


def _client() -> TokenClient:
    client = TokenClient(random.Random(0))
    client.hmacs.append(token_hmac(str(TOKENS.secret_key), "tok"))
    return client


def _create(client: TokenClient, lifetime_ms: int, now: int, max_ts: int, expiry: int) -> str | None:
    request = CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None, renewers=(),
                                           max_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime_ms)))
    held = DelegationTokenRecord(owner="User:ANONYMOUS", requester="User:ANONYMOUS", renewers=(),
                                 issue_timestamp=now, max_timestamp=max_ts, expiration_timestamp=expiry, token_id="t2")
    response = type("R", (), dict(
        error_code=ErrorCode.none, issue_timestamp=_at(now), expiry_timestamp=_at(expiry), max_timestamp=_at(max_ts),
        principal_type="User", principal_name="ANONYMOUS", token_id="t2",
        hmac=token_hmac(str(TOKENS.secret_key), "t2")))
    return client.judge(request, TokenFacts(now, None, _image(held)), response)


@pytest.mark.parametrize("lifetime", [-1, 0])
def test_a_lifetime_of_zero_or_less_is_the_servers_maximum(lifetime: int) -> None:
    now = 1_000
    assert _create(_client(), lifetime, now, now + _MAX, now + _EXPIRY) is None
    assert _create(_client(), lifetime, now, now + lifetime, now + lifetime) is not None


def test_a_lifetime_above_the_maximum_is_capped_and_expiry_never_passes_max() -> None:
    now = 1_000
    assert _create(_client(), _MAX + 1, now, now + _MAX, now + _EXPIRY) is None
    assert _create(_client(), 1, now, now + 1, now + 1) is None
    assert _create(_client(), 1, now, now + 1, now + _EXPIRY) is not None


def _change(client: TokenClient, renew: bool, period: int, now: int, before: DelegationTokenRecord | None,
            after: DelegationTokenRecord | None, code: ErrorCode, expiry: int = 0) -> str | None:
    span = i64Timedelta.parse(datetime.timedelta(milliseconds=period))
    request: Any = RenewDelegationTokenRequest(hmac=client.hmacs[0], renew_period=span) if renew \
        else ExpireDelegationTokenRequest(hmac=client.hmacs[0], expiry_time_period=span)
    response = type("R", (), dict(error_code=code, expiry_timestamp=_at(expiry)))
    image = _image(after) if after is not None else _image()
    return client.judge(request, TokenFacts(now, before, image), response)


def test_renewals_and_expiries_over_their_edge_values() -> None:
    now, tok = 10_000, _token()
    for period, expiry in ((-1, now + _EXPIRY), (0, now + _EXPIRY), (1, now + 1), (10**9, now + _EXPIRY)):
        assert _change(_client(), True, period, now, tok, dataclasses.replace(tok, expiration_timestamp=expiry),
                       ErrorCode.none, expiry) is None
    assert _change(_client(), True, 0, now, tok, dataclasses.replace(tok, expiration_timestamp=now), ErrorCode.none,
                   now) is not None  # a renewal by 0 ms is the default renewal, not "now"
    for period, expiry in ((0, now), (1, now + 1), (10**9, tok.max_timestamp)):
        assert _change(_client(), False, period, now, tok, dataclasses.replace(tok, expiration_timestamp=expiry),
                       ErrorCode.none, expiry) is None
    assert _change(_client(), False, -1, now, tok, None, ErrorCode.none, now) is None
    assert _change(_client(), False, -1, now, tok, dataclasses.replace(tok, expiration_timestamp=now),
                   ErrorCode.none, now) is not None  # a negative period removes the token


def test_refusals_in_kafkas_order() -> None:
    now = 30_000
    expired, foreign = _token(expiry=now - 1), _token(owner="User:alice", expiry=now + 1)
    assert _change(_client(), True, 5, now, expired, expired, ErrorCode.delegation_token_expired) is None
    assert _change(_client(), True, 5, now, expired, expired, ErrorCode.delegation_token_owner_mismatch) is not None
    assert _change(_client(), False, 5, now, foreign, foreign, ErrorCode.delegation_token_owner_mismatch) is None
    assert _change(_client(), False, 5, now, None, None, ErrorCode.delegation_token_not_found) is None
    assert _change(_client(), False, 5, now, None, None, ErrorCode.none) is not None


def _literal_lifetime(original: Callable[[Write, Any], Outcome]) -> Callable[[Write, Any], Outcome]:
    """CreateDelegationToken taking a lifetime of 0 or less literally (1 ms) instead of as the maximum."""
    def wrong(w: Write, req: Any) -> Outcome:
        if req.max_lifetime <= datetime.timedelta(0):
            req = dataclasses.replace(req, max_lifetime=datetime.timedelta(milliseconds=1))
        return original(w, req)
    return wrong


def _expire_keeps_token(original: Callable[[Write, Any], Outcome]) -> Callable[[Write, Any], Outcome]:
    """ExpireDelegationToken treating a negative period as 0 (expiring now, not removing the token)."""
    def wrong(w: Write, req: Any) -> Outcome:
        if req.expiry_time_period < datetime.timedelta(0):
            req = dataclasses.replace(req, expiry_time_period=datetime.timedelta(0))
        return original(w, req)
    return wrong


class _CreateThenExpireNow(TokenClient):
    """Creates a token with the server's maximum lifetime (asked as -1 or 0), then expires it at once
    (period -1), again and again: the edge values, every time."""

    def request(self) -> Any:
        if len(self.hmacs) <= self.expiries:
            lifetime = i64Timedelta.parse(datetime.timedelta(milliseconds=self.rng.choice([-1, 0])))
            return CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None, renewers=(),
                                                max_lifetime=lifetime)
        self.expiries += 1
        period = i64Timedelta.parse(datetime.timedelta(milliseconds=-1))
        return ExpireDelegationTokenRequest(hmac=self.hmacs[-1], expiry_time_period=period)

    expiries = 0


def test_the_edge_values_are_answered_right_every_time() -> None:
    sim = KraftSim(seed=1)
    sim.tokens = _CreateThenExpireNow(random.Random(1))
    sim.run(fault_ms=15_000, settle_ms=15_000)
    assert sim.tokens.answered[("ExpireDelegationToken", "none")] >= 3


@pytest.mark.parametrize(("handler", "wrong"), [("create_delegation_token", _literal_lifetime),
                                                ("expire_delegation_token", _expire_keeps_token)])
def test_a_controller_handling_an_edge_value_wrong_is_caught(handler: str, wrong: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_controller, handler, wrong(getattr(quorum_controller, handler)))
    sim = KraftSim(seed=1)
    sim.tokens = _CreateThenExpireNow(random.Random(1))
    with pytest.raises(SimViolation, match="DelegationToken"):
        sim.run(fault_ms=15_000, settle_ms=15_000)


def test_every_token_api_is_answered_both_ways_in_a_run() -> None:
    sim = KraftSim(seed=2)
    sim.run(fault_ms=15_000, settle_ms=15_000)
    sim.check_converged()
    seen = {(api, code) for api, code in sim.tokens.answered}
    for api in ("CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken"):
        assert (api, "none") in seen and any(a == api and c not in ("none", "not_controller") for a, c in seen)


def test_a_controller_whose_token_remover_never_runs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Expired tokens must leave the active controller's image within an expiry check interval
    (Kafka's token remover); a remover that removes nothing is caught once a token outlives it."""
    monkeypatch.setattr(quorum_controller, "expire_tokens", lambda w: [])
    sim = KraftSim(seed=1)
    with pytest.raises(SimViolation, match="still holds tokens expired"):
        sim.run(fault_ms=15_000, settle_ms=15_000)


def test_overdue_counts_from_activation_and_the_check_interval() -> None:
    tok = _token(max_ts=50_000, expiry=10_000)
    late = 10_000 + TOKENS.expiry_check_interval_ms + 1
    assert overdue(_image(tok), late, active_since=0) == [tok]
    assert overdue(_image(tok), late - 2, active_since=0) == []
    assert overdue(_image(tok), late, active_since=late - 10) == []  # its remover has not had an interval yet
    assert overdue(_image(_token(max_ts=9_000, expiry=9_000)), late, active_since=0) != []
