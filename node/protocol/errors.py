"""Exceptions of the Kafka protocol layer: wire errors (a frame that closes its connection) and client errors.

Client errors are split by what the caller may conclude about the request's effect, which is what a
Jepsen-style workload needs to record an operation's completion type:

- ``RequestNotSent`` (and subclasses ``ConnectFailed``, ``ClientClosed``, ``InvalidRequest``): the request
  was never written to a connection, so it **did not take effect** → record ``fail``.
- ``RequestOutcomeUnknown`` (and subclasses ``RequestTimedOut``, ``ConnectionLost``): the request was
  written and no response was decoded, so it **may have taken effect, now or later** → record ``info``.

``RequestError.definite`` carries the same distinction as a boolean.
"""

from __future__ import annotations

from typing import ClassVar


class ProtocolError(Exception):
    """Base class of every error raised by ``node.protocol``."""


class FrameError(ProtocolError):
    """A received frame cannot be served; the connection that carried it must be closed."""


class FrameTooLarge(FrameError):
    """The size prefix is negative or above the configured maximum frame size."""


class TruncatedFrame(FrameError):
    """The peer closed the connection in the middle of a frame."""


class MalformedFrame(FrameError):
    """The frame's bytes do not decode as the header/body their api key and version announce."""


class UnsupportedApi(FrameError):
    """The api key is unknown or the version is not served by this endpoint."""


class UnsupportedVersion(ProtocolError):
    """Version negotiation found no version both sides support."""


class RequestError(ProtocolError):
    """A client request failed; ``definite`` says whether it certainly did not take effect."""

    definite: ClassVar[bool]


class RequestNotSent(RequestError):
    """The request was never written to a connection: it did not take effect (Jepsen ``fail``)."""

    definite = True


class ConnectFailed(RequestNotSent):
    """No connection could be established (refused, unreachable, or connect timeout)."""


class ClientClosed(RequestNotSent):
    """The client was closed before the request could be sent."""


class InvalidRequest(RequestNotSent):
    """The request entity could not be encoded (a value out of its field's range, ...)."""


class RequestOutcomeUnknown(RequestError):
    """The request was sent but no response was received: it may have taken effect (Jepsen ``info``)."""

    definite = False


class RequestTimedOut(RequestOutcomeUnknown):
    """No response within the request timeout; the connection is closed, as Kafka's NetworkClient does."""


class ConnectionLost(RequestOutcomeUnknown):
    """The connection broke (or the server answered out of protocol) after the request was written."""


class EncodingError(ProtocolError):
    """An entity could not be serialised (a value outside its field's range, a wrong type, ...)."""
