"""The Authenticator seam: which SASL mechanisms a listener offers and one exchange per login (pure).

`Authenticator.start(mechanism)` opens a `SaslExchange`; `step(token)` returns the server's next
token and, once `complete`, `principal` names who logged in (`User:alice`). A bad login raises
`AuthenticationFailed`. `SaslAuthenticator` is the node's: PLAIN against the users of the
listener's JAAS config (`user_alice="…"`, as Kafka's PlainLoginModule), SCRAM-SHA-256/512 against
the credentials a `CredentialStore` holds (the committed metadata image on a node). A SCRAM
client-first message with Kafka's extension `tokenauth=true` logs in with a delegation token
instead (user = token id, password = the token's base64 HMAC; node.security.tokens): the
principal is the token's owner and the session is `token_authenticated`.
`InMemoryCredentials` is the trivial store for tests.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kraftlab.node.security.scram import (
    MECHANISMS,
    AuthenticationFailed,
    ClientFirst,
    ScramCredential,
    ScramServer,
)
from kraftlab.node.security.tokens import TOKEN_AUTH_EXTENSION

PLAIN = "PLAIN"


class CredentialStore(Protocol):
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def token_credential(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str] | None:
        """A live delegation token's credential and its owner's principal, or None."""
        ...


class SaslExchange(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str: ...

    @property
    def token_authenticated(self) -> bool: ...

    def step(self, token: bytes) -> bytes: ...


class Authenticator(Protocol):
    @property
    def mechanisms(self) -> tuple[str, ...]: ...

    def start(self, mechanism: str) -> SaslExchange | None:
        """A new exchange, or None if the mechanism is not enabled here."""
        ...


@dataclass
class InMemoryCredentials:
    """`scram[(user, mechanism name)]` → credential."""

    scram: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    tokens: dict[tuple[str, str], tuple[ScramCredential, str]] = field(default_factory=dict)
    """`tokens[(token id, mechanism name)]` → (credential, owner principal)."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram.get((user, mechanism))

    def token_credential(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str] | None:
        return self.tokens.get((token_id, mechanism))


class PlainExchange:
    """RFC 4616: one message `authzid NUL authcid NUL password`."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self._user = ""
        self.token_authenticated = False

    @property
    def principal(self) -> str:
        return f"User:{self._user}"

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed PLAIN message")
        authzid, user, password = (p.decode("utf-8", errors="replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: the authorization id differs from the user name")
        expected = self._users.get(user)
        if not user or expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self._user, self.complete = user, True
        return b""


class ScramExchange:
    """A SCRAM login whose principal is the user (or, for a delegation token, its owner)."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        self._store = store
        self._server = ScramServer(MECHANISMS[mechanism], self._lookup)
        self._owner: str | None = None

    def _lookup(self, mechanism: str, first: ClientFirst) -> ScramCredential | None:
        if first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            found = self._store.token_credential(first.user, mechanism)
            if found is None:
                return None  # unknown or expired token: refused like an unknown user
            credential, self._owner = found
            return credential
        return self._store.scram_credential(first.user, mechanism)

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def token_authenticated(self) -> bool:
        return self._owner is not None

    @property
    def principal(self) -> str:
        return self._owner if self._owner is not None else f"User:{self._server.user}"

    def step(self, token: bytes) -> bytes:
        return self._server.step(token)


@dataclass
class SaslAuthenticator:
    enabled: tuple[str, ...]
    store: CredentialStore
    plain_users: Mapping[str, str] = field(default_factory=dict)

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self.enabled

    def start(self, mechanism: str) -> SaslExchange | None:
        if mechanism not in self.enabled:
            return None
        if mechanism == PLAIN:
            return PlainExchange(self.plain_users)
        if mechanism in MECHANISMS:
            return ScramExchange(mechanism, self.store)
        return None
