"""The client seam and its in-memory implementation: a ``RequestSender`` that calls a registry directly.

Code that sends requests (workloads, the node's own RPC drivers) should depend on ``RequestSender``;
``ProtocolClient`` is the network implementation and ``LocalSender`` the trivial one for tests. The
local one still round-trips every request and response through the wire encoding, so a test cannot
pass with an entity the real transport would refuse.
"""

from __future__ import annotations

import inspect
from typing import Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.api_versions import unsupported_api_versions_response
from kraftlab.node.protocol.errors import ConnectionLost, FrameError, InvalidRequest, ProtocolError
from kraftlab.node.protocol.headers import (
    API_VERSIONS_KEY,
    encode_request,
    encode_response,
    parse_request_body,
    parse_request_header,
    parse_response,
)
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext


class RequestSender(Protocol):
    """Sends one request and returns its response; raises ``node.protocol.errors.RequestError``."""

    async def send(self, request: RequestPayload, *, timeout: float | None = None) -> ResponsePayload: ...


class LocalSender:
    """A ``RequestSender`` served by a registry in the same process, through the wire encoding."""

    def __init__(self, registry: ApiRegistry, *, client_id: str | None = "kraftlab", peer: str = "local") -> None:
        self.registry = registry
        self.client_id = client_id
        self.peer = peer
        self._correlation_id = 0

    async def send(self, request: RequestPayload, *, timeout: float | None = None) -> ResponsePayload:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        try:
            wire = encode_request(request, self._correlation_id, self.client_id)
        except ProtocolError as exc:
            raise InvalidRequest(str(exc)) from exc
        try:
            parsed = parse_request_header(wire[4:])
            if parsed.api_key == API_VERSIONS_KEY and not self.registry.supports(API_VERSIONS_KEY, parsed.api_version):
                response: ResponsePayload | None = unsupported_api_versions_response(self.registry.ranges())
            else:
                request_type, handler = self.registry.lookup(parsed.api_key, parsed.api_version)
                context = RequestContext(
                    parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id, self.peer
                )
                body = parse_request_body(parsed, request_type)
                try:
                    result = handler(body, context)
                    response = await result if inspect.isawaitable(result) else result
                except Exception as exc:  # the server logs it and closes the connection
                    raise ConnectionLost(f"the handler failed: {type(exc).__name__}: {exc}") from exc
        except FrameError as exc:  # a real server would close the connection after the request was sent
            raise ConnectionLost(f"the server would close the connection: {exc}") from exc
        if response is None:
            raise ConnectionLost("the handler sent no response")
        try:
            return parse_response(encode_response(response, parsed.correlation_id)[4:], type(request))[1]
        except ProtocolError as exc:
            raise ConnectionLost(f"the response cannot cross the wire: {exc}") from exc
