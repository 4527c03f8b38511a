"""One connection's authentication, as Kafka's SaslServerAuthenticator and SSL principal builder (pure).

`SaslSession` (SASL_PLAINTEXT / SASL_SSL listeners): ApiVersions may come first; then
SaslHandshake v1 names a mechanism (UNSUPPORTED_SASL_MECHANISM and a close if not enabled), and
SaslAuthenticate requests carry the mechanism's tokens until the login completes. A failed login
answers SASL_AUTHENTICATION_FAILED and closes the connection; any other request before the login
completes closes it too (ILLEGAL_SASL_STATE in Kafka's log). Once authenticated every request goes
through with the login's principal; a second handshake is ILLEGAL_SASL_STATE.

`TlsSession` (SSL listeners without SASL): the principal is the client certificate's subject
distinguished name (`User:CN=alice,OU=…`, Kafka's default principal builder) or ANONYMOUS.

`register_sasl_apis` makes SaslHandshake/SaslAuthenticate known on a registry (ApiVersions lists
them, as Kafka's brokers do); reaching their handlers means the listener has no SASL:
ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from kraftlab.node.controller.messages import respond
from kraftlab.node.protocol.guard import ANONYMOUS, Peer, Screened
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.security.authenticator import Authenticator, SaslExchange
from kraftlab.node.security.scram import AuthenticationFailed

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
SASL_HANDSHAKE_VERSIONS = (1, 1)
"""v0 (raw tokens after the handshake) is not served: every client here speaks v1."""
SASL_AUTHENTICATE_VERSIONS = (0, 2)


class _State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


def certificate_principal(certificate: dict[str, Any] | None) -> str:
    """`User:` + the subject DN in RFC 2253 order (most specific first), or ANONYMOUS."""
    if not certificate or "subject" not in certificate:
        return ANONYMOUS
    names = {
        "commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
        "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
    }
    parts = [f"{names.get(k, k)}={v}" for rdn in reversed(certificate["subject"]) for k, v in rdn]
    return "User:" + ",".join(parts)


class TlsSession:
    def __init__(self, peer: Peer) -> None:
        self.principal = certificate_principal(peer.certificate)
        self.token_authenticated = False

    def screen(self, api_key: int, api_version: int, request: RequestPayload) -> Screened | None:
        return None


class SaslSession:
    def __init__(self, authenticator: Authenticator, peer: Peer, listener: str = "") -> None:
        self._authenticator = authenticator
        self._peer = peer
        self._listener = listener
        self._state = _State.HANDSHAKE
        self._exchange: SaslExchange | None = None
        self._mechanism = ""
        self.principal = ANONYMOUS
        self.token_authenticated = False
        """Logged in with a delegation token (such a session may not use the token APIs)."""

    @property
    def authenticated(self) -> bool:
        return self._state == _State.COMPLETE

    def screen(self, api_key: int, api_version: int, request: RequestPayload) -> Screened | None:
        if self._state == _State.COMPLETE:
            if api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
                return Screened(respond(request, {"error_code": ErrorCode.illegal_sasl_state}), close=True)
            return None
        if api_key == API_VERSIONS_KEY and self._state == _State.HANDSHAKE:
            return None
        if api_key == SASL_HANDSHAKE_KEY and self._state == _State.HANDSHAKE:
            return self._handshake(request)
        if api_key == SASL_AUTHENTICATE_KEY and self._state == _State.AUTHENTICATE:
            return self._authenticate(request)
        log.info("connection from %s: api key %d before SASL authentication completed", self._peer.host, api_key)
        return Screened(None, close=True)

    def _handshake(self, request: Any) -> Screened:
        mechanisms = self._authenticator.mechanisms
        exchange = self._authenticator.start(request.mechanism)
        if exchange is None:
            self._state = _State.FAILED
            return Screened(
                respond(request, {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": mechanisms}),
                close=True,
            )
        self._exchange, self._mechanism = exchange, request.mechanism
        self._state = _State.AUTHENTICATE
        return Screened(respond(request, {"error_code": ErrorCode.none, "mechanisms": mechanisms}))

    def _authenticate(self, request: Any) -> Screened:
        assert self._exchange is not None
        try:
            token = self._exchange.step(bytes(request.auth_bytes))
        except AuthenticationFailed as exc:
            self._state = _State.FAILED
            log.info("failed %s login from %s%s: %s", self._mechanism, self._peer.host,
                     f" on {self._listener}" if self._listener else "", exc)
            message = (f"Authentication failed during authentication due to invalid credentials with "
                       f"SASL mechanism {self._mechanism}")
            return Screened(
                respond(request, {"error_code": ErrorCode.sasl_authentication_failed, "error_message": message,
                                  "auth_bytes": b""}),
                close=True,
            )
        if self._exchange.complete:
            self._state = _State.COMPLETE
            self.principal = self._exchange.principal
            self.token_authenticated = self._exchange.token_authenticated
        return Screened(respond(request, {"error_code": ErrorCode.none, "auth_bytes": token, "session_lifetime": 0}))


def register_sasl_apis(registry: ApiRegistry) -> None:
    """List SaslHandshake and SaslAuthenticate; answered here only where no SASL guard intercepts them."""

    def not_sasl(request: Any, context: RequestContext) -> Any:
        return respond(request, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": ()})

    registry.register(SASL_HANDSHAKE_KEY, *SASL_HANDSHAKE_VERSIONS, not_sasl)
    registry.register(SASL_AUTHENTICATE_KEY, *SASL_AUTHENTICATE_VERSIONS, not_sasl)
