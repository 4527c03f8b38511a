"""Delegation tokens as Kafka defines them: the keys, the HMAC, who may see or renew a token, and
the SCRAM credential a token logs in with (pure).

Keys (Kafka's): `delegation.token.secret.key` (its older name `delegation.token.master.key` is read
too; unset: tokens are disabled and the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED),
`delegation.token.max.lifetime.ms` (7 days), `delegation.token.expiry.time.ms` (1 day: a token's
renewal period), `delegation.token.expiry.check.interval.ms` (1 hour: how often the active
controller removes expired tokens). Every node that serves clients needs the same secret: a
token's HMAC is never in the log, each node derives it.

The HMAC is Kafka's: HmacSHA512 keyed by the secret's UTF-8 bytes over the token id's UTF-8 bytes.
A token logs in with SASL/SCRAM as user = token id, password = base64(HMAC) and the client-first
extension `tokenauth=true`; the session's principal is the token's owner.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from kraftlab.node.security.scram import MIN_ITERATIONS, ScramCredential, ScramMechanism, make_credential

SECRET_KEY = "delegation.token.secret.key"
LEGACY_SECRET_KEY = "delegation.token.master.key"
MAX_LIFETIME_KEY = "delegation.token.max.lifetime.ms"
EXPIRY_TIME_KEY = "delegation.token.expiry.time.ms"
EXPIRY_CHECK_INTERVAL_KEY = "delegation.token.expiry.check.interval.ms"
TOKEN_AUTH_EXTENSION = "tokenauth"
USER_TYPE = "User"


class TokenConfigError(ValueError):
    """A delegation token key with a value Kafka would refuse."""


@dataclass(frozen=True, slots=True)
class TokenConfig:
    secret_key: str | None = None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    expiry_check_interval_ms: int = 3600 * 1000

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    @classmethod
    def from_properties(cls, raw: Mapping[str, str]) -> TokenConfig:
        secret = (raw.get(SECRET_KEY) or raw.get(LEGACY_SECRET_KEY) or "").strip() or None
        defaults = cls()

        def positive(key: str, default: int) -> int:
            text = (raw.get(key) or "").strip()
            if not text:
                return default
            try:
                value = int(text)
            except ValueError:
                raise TokenConfigError(f"{key}: {text!r} is not a number of milliseconds") from None
            if value < 1:
                raise TokenConfigError(f"{key}: {value} must be at least 1")
            return value

        return cls(
            secret,
            positive(MAX_LIFETIME_KEY, defaults.max_lifetime_ms),
            positive(EXPIRY_TIME_KEY, defaults.expiry_time_ms),
            positive(EXPIRY_CHECK_INTERVAL_KEY, defaults.expiry_check_interval_ms),
        )


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """Kafka's createHmac: HmacSHA512(key = secret, message = token id)."""
    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def token_password(mac: bytes) -> str:
    """What a client logs in with as its SCRAM password: the HMAC in standard base64."""
    return base64.b64encode(mac).decode()


def token_credential(secret_key: str, token_id: str, mech: ScramMechanism) -> ScramCredential:
    """The SCRAM credential a token logs in against (Kafka's DelegationTokenCache: the base64 HMAC
    as the password, the mechanism's minimum iterations)."""
    return make_credential(mech, token_password(token_hmac(secret_key, token_id)), MIN_ITERATIONS)


def principal_type(principal: str) -> str:
    return principal.split(":", 1)[0] if ":" in principal else ""


def owner_or_renewer(principal: str, owner: str, requester: str, renewers: tuple[str, ...]) -> bool:
    """Kafka's TokenInformation.ownerOrRenewer: the owner, the requester or a renewer."""
    return principal in (owner, requester) or principal in renewers


def allowed_to_renew(principal: str, owner: str, renewers: tuple[str, ...]) -> bool:
    """Renew and expire: the owner or a renewer (Kafka's allowedToRenew)."""
    return principal == owner or principal in renewers


def allows_token_requests(security_protocol: str, principal: str, token_authenticated: bool) -> bool:
    """Kafka's allowTokenRequests: no token APIs on PLAINTEXT, for anonymous one-way TLS, or for a
    session that itself logged in with a token."""
    if token_authenticated or security_protocol == "PLAINTEXT":
        return False
    return not (security_protocol == "SSL" and principal == "User:ANONYMOUS")
