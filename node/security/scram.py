"""SCRAM (RFC 5802, RFC 7677): credentials as Kafka stores them and both sides of the exchange (pure).

A credential is (salt, StoredKey, ServerKey, iterations): SaltedPassword = PBKDF2-HMAC(password,
salt, i); ClientKey = HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey); ServerKey =
HMAC(SaltedPassword, "Server Key"). The server never sees or keeps the password.

`ScramServer` runs the server's side: client-first (`n,,n=user,r=nonce[,ext=value…]`, Kafka's
extensions such as `tokenauth=true` after the nonce) → server-first (`r=…,s=…,i=…`) →
client-final (`c=…,r=…,p=proof`) → server-final (`v=signature`). Any mismatch raises
`AuthenticationFailed` (the caller answers SASL_AUTHENTICATION_FAILED). `ScramClient` is the
client's side (brokers logging in to controllers, and tests).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
"""Kafka's bounds on a SCRAM credential's iteration count."""


class AuthenticationFailed(Exception):
    """A login that must be refused; the message is safe to send to the client."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    code: int
    """Kafka's ScramMechanism code in records and the SCRAM admin APIs."""
    hash_name: str


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_CODE = {m.code: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mech: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mech.hash_name).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mech: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(mech, salted, b"Client Key")
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    return ScramCredential(salt, stored_key, _hmac(mech, salted, b"Server Key"), iterations)


def make_credential(
    mech: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mech, salt, salted_password(mech, password, salt, iterations), iterations)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or (len(key) != 1 and not key.isidentifier()):
            raise AuthenticationFailed(f"malformed SCRAM message attribute {part!r}")
        out.append((key, value))
    return out


def _saslname(value: str) -> str:
    """RFC 5802's escaping of `,` and `=` in a user name (`=2C`, `=3D`)."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("malformed user name")
    return value.replace("=2C", ",").replace("=3D", "=")


def _escape(value: str) -> str:
    return value.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str
    bare: str
    user: str
    nonce: str
    extensions: dict[str, str]


def parse_client_first(message: str) -> ClientFirst:
    if not message.startswith(("n,", "y,")):
        raise AuthenticationFailed("channel binding is not supported")
    _, sep, rest = message[2:].partition(",")
    if not sep:
        raise AuthenticationFailed("malformed SCRAM client-first message")
    gs2 = message[: len(message) - len(rest)]
    attrs = _attributes(rest)
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
        raise AuthenticationFailed("malformed SCRAM client-first message")
    return ClientFirst(gs2, rest, _saslname(attrs[0][1]), attrs[1][1], dict(attrs[2:]))


CredentialLookup = Callable[[str, ClientFirst], ScramCredential | None]
"""(mechanism name, client-first) → the credential to check against, or None (unknown user)."""


class ScramServer:
    """One server-side SCRAM exchange; `step(token)` returns the next server message."""

    def __init__(self, mech: ScramMechanism, lookup: CredentialLookup, nonce: str | None = None) -> None:
        self.mech = mech
        self._lookup = lookup
        self._server_nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self.complete = False

    @property
    def user(self) -> str:
        return self._first.user if self._first is not None else ""

    @property
    def extensions(self) -> dict[str, str]:
        return self._first.extensions if self._first is not None else {}

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self.complete:
            raise AuthenticationFailed("SCRAM exchange already complete")
        if self._first is None:
            return self._on_client_first(message)
        return self._on_client_final(message)

    def _on_client_first(self, message: str) -> bytes:
        first = parse_client_first(message)
        credential = self._lookup(self.mech.name, first)
        if credential is None:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        self._first, self._credential = first, credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={first.nonce}{self._server_nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _on_client_final(self, message: str) -> bytes:
        assert self._first is not None and self._credential is not None
        attrs = _attributes(message)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise AuthenticationFailed("malformed SCRAM client-final message")
        if base64.b64decode(attrs[0][1] + "==") != self._first.gs2_header.encode():
            raise AuthenticationFailed("SCRAM channel binding does not match")
        if attrs[1][1] != self._first.nonce + self._server_nonce:
            raise AuthenticationFailed("SCRAM nonce does not match")
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{self._first.bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM proof") from None
        signature = _hmac(self.mech, self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.mech.hash_name, client_key).digest(), self._credential.stored_key):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        self.complete = True
        server_signature = _hmac(self.mech, self._credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client's side: `first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(
        self, mech: ScramMechanism, user: str, password: str, extensions: dict[str, str] | None = None
    ) -> None:
        self.mech = mech
        self.password = password
        self.nonce = base64.b64encode(os.urandom(24)).decode()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self.bare = f"n={_escape(user)},r={self.nonce}{ext}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = dict(_attributes(text))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), int(attrs.get("i", "0"))
        if not nonce.startswith(self.nonce) or iterations <= 0:
            raise AuthenticationFailed("bad SCRAM server-first message")
        self._salted = salted_password(self.mech, self.password, base64.b64decode(salt), iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self._auth_message = f"{self.bare},{text},{without_proof}".encode()
        client_key = _hmac(self.mech, self._salted, b"Client Key")
        stored = hashlib.new(self.mech.hash_name, client_key).digest()
        signature = _hmac(self.mech, stored, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = _hmac(self.mech, _hmac(self.mech, self._salted, b"Server Key"), self._auth_message)
        if server_final.decode() != "v=" + base64.b64encode(expected).decode():
            raise AuthenticationFailed("the server's SCRAM signature does not verify")
