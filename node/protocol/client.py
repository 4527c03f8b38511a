"""An asyncio Kafka-protocol client for one server address: correlation ids, pipelining, timeouts.

- ``send(request)`` encodes the entity with the version of its kio class and returns the decoded
  response; any number of sends may be in flight on the one connection (responses come back in
  request order and are matched by correlation id).
- The connection is opened lazily, and re-opened by the next ``send`` after any failure.
- What a failure means for the request's effect (see ``node.protocol.errors``):
  ``ConnectFailed``/``ClientClosed``/``InvalidRequest`` — never sent, did not take effect (Jepsen
  ``fail``); ``RequestTimedOut``/``ConnectionLost`` — sent, may have taken effect (Jepsen ``info``).
- ``login`` (a SASL login, node.security.client_login) runs on every new connection before any
  request; a failed login is ``ConnectFailed``. ``ssl_context`` makes the connection TLS.
- A request timeout closes the connection (as Kafka's NetworkClient does): later responses on it
  would be stuck behind the missing one. Other requests in flight on it fail with ``ConnectionLost``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.errors import (
    ClientClosed,
    ConnectFailed,
    ConnectionLost,
    EncodingError,
    FrameError,
    InvalidRequest,
    RequestError,
    RequestTimedOut,
    UnsupportedApi,
)
from kraftlab.node.protocol.framing import DEFAULT_MAX_FRAME_BYTES, read_frame
from kraftlab.node.protocol.headers import encode_request, parse_response, peek_correlation_id

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms
DEFAULT_CONNECT_TIMEOUT_S = 10.0
_MAX_CORRELATION_ID = 0x7FFFFFFF
Login = Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[None]]
"""Given a function that sends a request on the new connection and returns its response, log in
(raise to refuse the connection)."""

R = TypeVar("R", bound=ResponsePayload)


@dataclass(frozen=True, slots=True)
class _Pending:
    correlation_id: int
    request_type: type[RequestPayload]
    future: asyncio.Future[ResponsePayload]


class _Link:
    """One open connection and the requests written on it that still await a response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame_bytes: int) -> None:
        self.reader = reader
        self.writer = writer
        self.max_frame_bytes = max_frame_bytes
        self.pending: collections.deque[_Pending] = collections.deque()
        self.failure: str | None = None
        self.read_task = asyncio.create_task(self._read_loop())

    @property
    def alive(self) -> bool:
        return self.failure is None

    async def _read_loop(self) -> None:
        try:
            while True:
                payload = await read_frame(self.reader, self.max_frame_bytes)
                if payload is None:
                    self.fail("connection closed by the server")
                    return
                self._deliver(payload)
                if not self.alive:
                    return
        except (FrameError, OSError) as exc:
            self.fail(f"{type(exc).__name__}: {exc}")

    def _deliver(self, payload: bytes) -> None:
        correlation_id = peek_correlation_id(payload)
        if not self.pending:
            self.fail(f"response with correlation id {correlation_id} to no request")
            return
        head = self.pending[0]
        if head.correlation_id != correlation_id:
            self.fail(f"response with correlation id {correlation_id}, expected {head.correlation_id}")
            return
        try:
            _, response = parse_response(payload, head.request_type)
        except FrameError as exc:
            self.fail(f"undecodable response to correlation id {correlation_id}: {exc}")
            return
        self.pending.popleft()
        if not head.future.done():
            head.future.set_result(response)

    def fail(self, reason: str) -> None:
        """Close the connection; every request still pending on it ends with ``ConnectionLost``."""
        if self.failure is not None:
            return
        self.failure = reason
        log.debug("connection to %s lost: %s", self.writer.get_extra_info("peername"), reason)
        while self.pending:
            pending = self.pending.popleft()
            if not pending.future.done():
                pending.future.set_exception(ConnectionLost(reason))
        if asyncio.current_task() is not self.read_task:
            self.read_task.cancel()
        self.writer.close()


class ProtocolClient:
    """A client of one Kafka-protocol endpoint."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "kraftlab",
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        login: Login | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.login = login
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.max_frame_bytes = max_frame_bytes
        self._link: _Link | None = None
        self._connect_lock = asyncio.Lock()
        self._correlation_id = 0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.alive

    async def send(self, request: RequestPayload, *, timeout: float | None = None) -> ResponsePayload:
        """Send ``request`` and return its response; see the module docstring for the errors."""
        if self._closed:
            raise ClientClosed("the client is closed")
        correlation_id = self._next_correlation_id()
        try:
            data = encode_request(request, correlation_id, self.client_id)
        except (EncodingError, UnsupportedApi) as exc:
            raise InvalidRequest(str(exc)) from exc
        link = await self._connected_link()
        return await self._send_on(link, request, data, correlation_id, timeout)

    async def _send_on(
        self, link: _Link, request: RequestPayload, data: bytes, correlation_id: int, timeout: float | None
    ) -> ResponsePayload:
        future: asyncio.Future[ResponsePayload] = asyncio.get_running_loop().create_future()
        link.pending.append(_Pending(correlation_id, type(request), future))
        try:
            async with asyncio.timeout(self.request_timeout if timeout is None else timeout):
                link.writer.write(data)
                await link.writer.drain()
                return await future
        except TimeoutError:
            link.fail(f"request with correlation id {correlation_id} timed out")
            raise RequestTimedOut(
                f"no response to {type(request).__name__} v{request.__version__} from {self.host}:{self.port}"
            ) from None
        except OSError as exc:
            link.fail(f"{type(exc).__name__}: {exc}")
            raise ConnectionLost(f"{self.host}:{self.port}: {exc}") from exc

    async def send_typed(self, request: RequestPayload, response_type: type[R], *, timeout: float | None = None) -> R:
        """``send`` for callers that know the response class; ``ConnectionLost`` if another arrives."""
        response = await self.send(request, timeout=timeout)
        if not isinstance(response, response_type):
            raise ConnectionLost(f"expected {response_type.__name__}, got {type(response).__name__}")
        return response

    def _next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & _MAX_CORRELATION_ID
        return self._correlation_id

    async def _connected_link(self) -> _Link:
        async with self._connect_lock:
            if self._closed:
                raise ClientClosed("the client is closed")
            if self._link is not None and self._link.alive:
                return self._link
            try:
                async with asyncio.timeout(self.connect_timeout):
                    reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl_context)
            except (OSError, TimeoutError) as exc:
                raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {exc or type(exc).__name__}") from exc
            link = _Link(reader, writer, self.max_frame_bytes)
            if self.login is not None:
                await self._log_in(link, self.login)
            self._link = link
            return self._link

    async def _log_in(self, link: _Link, login: Login) -> None:
        async def exchange(request: Any) -> Any:
            correlation_id = self._next_correlation_id()
            data = encode_request(request, correlation_id, self.client_id)
            return await self._send_on(link, request, data, correlation_id, self.connect_timeout)

        try:
            await login(exchange)
        except Exception as exc:
            link.fail(f"login failed: {exc}")
            raise ConnectFailed(f"cannot log in to {self.host}:{self.port}: {exc}") from exc

    async def close(self) -> None:
        """Close the connection; requests in flight end with ``ConnectionLost``, later sends ``ClientClosed``."""
        self._closed = True
        link, self._link = self._link, None
        if link is not None:
            link.fail("the client was closed")
            await asyncio.gather(link.read_task, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(link.writer.wait_closed(), 1.0)

    async def __aenter__(self) -> ProtocolClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


__all__ = ["ProtocolClient", "RequestError"]
