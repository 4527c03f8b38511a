"""A delegation-token client for the cluster simulator: Create, Renew and Expire with values drawn
from the whole range Kafka allows, each answer judged against Kafka's semantics
(DelegationTokenControlManager) given the deciding controller's image and clock, and the token the
decision left in that image.

- CreateDelegationToken (v3): max lifetime -1, 0, 1 ms, a few seconds, the server's maximum, above
  it; owner the requester (no owner named) or another user; renewers none, the requester, another
  user, or a non-User principal. A non-User renewer: INVALID_PRINCIPAL_TYPE. Otherwise NONE, issued
  now, max timestamp now + (the request's lifetime if > 0, at most `delegation.token.max.lifetime.ms`;
  else that maximum), expiring at the earlier of that and now + `delegation.token.expiry.time.ms`;
  the HMAC is the token id's under the secret key, and the image holds exactly that token.
- RenewDelegationToken / ExpireDelegationToken (v2) of a token it was given (maybe expired or removed
  since) or of an HMAC no token has, periods -1, 0, 1 ms, a few seconds, above the maximum:
  DELEGATION_TOKEN_NOT_FOUND (no token has it), DELEGATION_TOKEN_EXPIRED (its max or expiry
  timestamp is before now), DELEGATION_TOKEN_OWNER_MISMATCH (the requester neither owns nor may renew
  it), else NONE. A renewal expires it at min(max timestamp, now + (the period if > 0, at most the
  expiry time key; else that key)); an expiry with a negative period removes it at once, else
  expires it at min(max timestamp, now + period). The image after the decision holds that expiry
  (or no token). Kafka answers a removal's expiry timestamp with the negative period itself, this
  node with the time of removal: that number is not judged.

Requests go straight to a controller (as an operator's tool with `--bootstrap-controller`), so the
requester is User:ANONYMOUS. NOT_CONTROLLER is always an acceptable answer.
"""

from __future__ import annotations

import datetime
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.static.primitive import i64Timedelta

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import DelegationTokenRecord
from kraftlab.node.security.tokens import TokenConfig, token_hmac

TOKENS = TokenConfig(secret_key="kraftlab-simulated-token-key", max_lifetime_ms=5_000, expiry_time_ms=2_500,
                     expiry_check_interval_ms=1_000)
"""The simulated controllers' `delegation.token.*` settings: short, so tokens expire within a run (and
the client stops a max lifetime before the others, so the last removal is written before the end)."""
REQUESTER = "User:ANONYMOUS"
APIS = ("CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken")


def is_token_request(request: Any) -> bool:
    """Whether `request` (of any version) is one of the token client's."""
    return api_name(request) in APIS


def _period(ms: int) -> i64Timedelta:
    return i64Timedelta.parse(datetime.timedelta(milliseconds=ms))


def _ms(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return round(value.total_seconds() * 1000)


@dataclass
class TokenFacts:
    """What a token request's answer depends on: the deciding controller's clock and the token the
    HMAC names (None for a creation or an unknown HMAC), and the image its decision left."""

    now: int
    token: DelegationTokenRecord | None
    after: MetadataImage | None = field(default=None)


def _named(image: MetadataImage, mac: bytes, config: TokenConfig) -> DelegationTokenRecord | None:
    assert config.secret_key is not None
    return next((t for t in image.delegation_tokens.values() if token_hmac(config.secret_key, t.token_id) == mac),
                None)


class TokenClient:
    def __init__(self, rng: random.Random, config: TokenConfig = TOKENS) -> None:
        self.rng = rng
        self.config = config
        self.hmacs: list[bytes] = []
        """The HMACs of the tokens it was given (it keeps asking about them after they expire)."""
        self.answered: Counter[tuple[str, str]] = Counter()
        """Answers judged right, by request type and error."""

    def _periods(self) -> list[int]:
        top = self.config.max_lifetime_ms
        return [-1, 0, 1, 1_500, 4_000, top, top + 5_000]

    def request(self) -> Any:
        """The next request, in its newest form (the simulator sends it at a version it draws)."""
        rng = self.rng
        if not self.hmacs or rng.random() < 0.4:
            owner = rng.choice([None, None, "alice"])
            renewers = rng.choice([(), (), (("User", "ANONYMOUS"),), (("User", "bob"),), (("Group", "ops"),)])
            return CreateDelegationTokenRequest(
                owner_principal_type="User" if owner else None, owner_principal_name=owner,
                renewers=tuple(CreatableRenewers(principal_type=t, principal_name=n) for t, n in renewers),
                max_lifetime=_period(rng.choice(self._periods())))
        mac = rng.choice(self.hmacs[-2:] if rng.random() < 0.8 else self.hmacs) if rng.random() < 0.9 \
            else b"no-such-token-hmac"
        period = _period(rng.choice(self._periods()))
        if rng.random() < 0.5:
            return RenewDelegationTokenRequest(hmac=mac, renew_period=period)
        return ExpireDelegationTokenRequest(hmac=mac, expiry_time_period=period)

    def facts(self, request: Any, image: MetadataImage, now: int) -> TokenFacts:
        creates = api_name(request) == "CreateDelegationToken"
        token = None if creates else _named(image, bytes(request.hmac), self.config)
        return TokenFacts(now, token)

    def judge(self, request: Any, facts: TokenFacts, response: Any) -> str | None:
        """Why `response` is not Kafka's answer to `request` given `facts`, or None when it is;
        the HMAC of a token created is kept for later requests."""
        if response.error_code == ErrorCode.not_controller:
            verdict = None
        elif api_name(request) == "CreateDelegationToken":
            verdict = self._judge_create(request, facts, response)
            if verdict is None and response.error_code == ErrorCode.none:
                self.hmacs.append(bytes(response.hmac))
        else:
            verdict = self._judge_change(request, facts, response)
        if verdict is None:
            self.answered[(api_name(request), response.error_code.name)] += 1
        return verdict

    def _judge_create(self, request: Any, facts: TokenFacts, response: Any) -> str | None:
        what = f"CreateDelegationToken v{request.__version__} (max lifetime {_ms(request.max_lifetime)} ms)"
        if any(r.principal_type != "User" for r in request.renewers):
            if response.error_code != ErrorCode.invalid_principal_type:
                return (f"{what} with a non-User renewer answered {response.error_code.name}, "
                        "Kafka INVALID_PRINCIPAL_TYPE")
            return None
        asked, top = _ms(request.max_lifetime), self.config.max_lifetime_ms
        max_ts = facts.now + (min(top, asked) if asked > 0 else top)
        expiry = min(max_ts, facts.now + self.config.expiry_time_ms)
        named = getattr(request, "owner_principal_name", None)  # v3 on; before, the requester owns it
        owner = f"User:{named}" if named else REQUESTER
        want = (ErrorCode.none, facts.now, expiry, max_ts, owner)
        got = (response.error_code, _ms(response.issue_timestamp), _ms(response.expiry_timestamp),
               _ms(response.max_timestamp), f"{response.principal_type}:{response.principal_name}")
        if got != want:
            return f"{what} at {facts.now} answered (error, issued, expiry, max, owner) {got}, Kafka {want}"
        assert self.config.secret_key is not None
        if bytes(response.hmac) != token_hmac(self.config.secret_key, response.token_id):
            return f"{what}: the HMAC answered is not token {response.token_id}'s under the secret key"
        held = facts.after.delegation_tokens.get(response.token_id) if facts.after is not None else None
        renewers = tuple(f"{r.principal_type}:{r.principal_name}" for r in request.renewers)
        if held is None or (held.owner, held.renewers, held.issue_timestamp, held.max_timestamp,
                            held.expiration_timestamp) != (owner, renewers, facts.now, max_ts, expiry):
            return f"{what}: the image after the decision holds {held}, not the token answered"
        return None

    def _judge_change(self, request: Any, facts: TokenFacts, response: Any) -> str | None:
        renew = api_name(request) == "RenewDelegationToken"
        period = _ms(request.renew_period if renew else request.expiry_time_period)
        what = f"{api_name(request)} v{request.__version__} (period {period} ms)"
        token, now = facts.token, facts.now
        if token is None:
            want = ErrorCode.delegation_token_not_found
        elif token.max_timestamp < now or token.expiration_timestamp < now:
            want = ErrorCode.delegation_token_expired
        elif token.owner != REQUESTER and REQUESTER not in token.renewers:
            want = ErrorCode.delegation_token_owner_mismatch
        else:
            want = ErrorCode.none
        if response.error_code != want:
            return f"{what} of {token} at {now} answered {response.error_code.name}, Kafka {want.name}"
        if want != ErrorCode.none:
            return None
        assert token is not None and facts.after is not None
        held = facts.after.delegation_tokens.get(token.token_id)
        if not renew and period < 0:
            return None if held is None else f"{what}: the token is still in the image after a removal"
        expiry_time = self.config.expiry_time_ms
        step = (min(expiry_time, period) if period > 0 else expiry_time) if renew else period
        expiry = min(token.max_timestamp, now + step)
        if _ms(response.expiry_timestamp) != expiry:
            return f"{what} at {now} of {token} answered expiry {_ms(response.expiry_timestamp)}, Kafka {expiry}"
        if held is None or held.expiration_timestamp != expiry or held.max_timestamp != token.max_timestamp:
            return f"{what}: the image after the decision holds {held}, expiring at {expiry} expected"
        return None


def overdue(image: MetadataImage, now: int, active_since: int, config: TokenConfig = TOKENS,
            slack_ms: int = 0) -> list[DelegationTokenRecord]:
    """The tokens an active controller (active since `active_since`) still holds at `now` although
    they expired more than an expiry check interval (+ `slack_ms`, the controller's tick) ago: Kafka's
    token remover runs every `delegation.token.expiry.check.interval.ms` on the active controller and
    removes each token past its expiry or max timestamp (RemoveDelegationTokenRecord)."""
    late = now - config.expiry_check_interval_ms - slack_ms
    if active_since > late:
        return []
    return [t for t in image.delegation_tokens.values() if min(t.expiration_timestamp, t.max_timestamp) < late]

