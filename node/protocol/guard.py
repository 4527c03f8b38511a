"""The seam through which a listener's security screens each connection's requests.

A `ProtocolServer` given a `GuardFactory` opens one `ConnectionGuard` per accepted connection
(with what TLS said about the peer). Before a request is dispatched, the guard may answer it
itself (SaslHandshake, SaslAuthenticate), refuse it and close the connection (any other request
before a SASL login completes, or after a failed one), or let it through; requests let through
carry the guard's `principal` in their `RequestContext`. Without a guard every connection is
`User:ANONYMOUS`, as on Kafka's PLAINTEXT listeners.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class Peer:
    """An accepted connection as its guard sees it."""

    host: str
    certificate: dict[str, Any] | None = None
    """The verified client certificate (`ssl.SSLSocket.getpeercert()`), on TLS listeners with client auth."""


@dataclass(frozen=True, slots=True)
class Screened:
    """The guard's own answer to a request (None: answer nothing) and whether to close afterwards."""

    response: ResponsePayload | None
    close: bool = False


class ConnectionGuard(Protocol):
    @property
    def principal(self) -> str: ...

    @property
    def token_authenticated(self) -> bool:
        """The principal logged in with a delegation token."""
        ...

    def screen(self, api_key: int, api_version: int, request: RequestPayload) -> Screened | None:
        """None lets the request through to its handler."""
        ...


GuardFactory = Callable[[Peer], ConnectionGuard]
