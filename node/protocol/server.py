"""An asyncio Kafka-protocol server: reads frames, dispatches them to registry handlers, writes responses.

Per connection:
- handlers are *started* in request order (a sync handler runs to completion before the next frame is
  read); async handlers may finish out of order, but responses are written strictly in request order,
  as Kafka guarantees; at most ``max_in_flight`` requests are outstanding before reading pauses;
- a frame that cannot be served (oversized, truncated, malformed, unknown api key or unsupported
  version) closes that connection with a logged reason, after the responses to the requests before it
  have been written; a handler that raises or returns a wrong entity does the same (logged as an error);
- an ApiVersions request of a version the registry does not serve gets Kafka's v0 UNSUPPORTED_VERSION
  answer instead of a close;
- with a `GuardFactory` (node.protocol.guard), each connection's guard screens every request first:
  it may answer it itself, close the connection after a refusal, or let it through with its
  principal; with an `ssl.SSLContext` the listener speaks TLS;
- a connection idle for ``idle_timeout`` seconds (Kafka's connections.max.idle.ms, 10 minutes) is closed.

``stop()`` closes the listener and every connection and waits until they are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import ssl
from dataclasses import dataclass
from types import TracebackType

from kio.static.protocol import ResponsePayload

from kraftlab.node.protocol.api_versions import unsupported_api_versions_response
from kraftlab.node.protocol.errors import EncodingError, FrameError, TruncatedFrame
from kraftlab.node.protocol.framing import DEFAULT_MAX_FRAME_BYTES, read_frame
from kraftlab.node.protocol.guard import ANONYMOUS, ConnectionGuard, GuardFactory, Peer
from kraftlab.node.protocol.headers import API_VERSIONS_KEY, encode_response, parse_request_body, parse_request_header
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_MAX_IN_FLIGHT = 64
_WRITE_BATCH_FRAMES = 64


class HandlerFailed(Exception):
    """A handler raised, or returned something that is not the response to its request."""


@dataclass(frozen=True, slots=True)
class _InFlight:
    context: RequestContext
    result: asyncio.Future[ResponsePayload | None]
    close_after: bool = False


def _settled(
    value: ResponsePayload | None = None, error: Exception | None = None
) -> asyncio.Future[ResponsePayload | None]:
    future: asyncio.Future[ResponsePayload | None] = asyncio.get_running_loop().create_future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


class _Connection:
    """One accepted connection: a read loop (this task) and a write loop (a child task)."""

    def __init__(self, server: ProtocolServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.queue: asyncio.Queue[_InFlight | None] = asyncio.Queue(maxsize=server.max_in_flight)
        self.read_task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        self.last_read = self.loop.time()
        self.idle_timer: asyncio.TimerHandle | None = None
        self.guard: ConnectionGuard | None = None
        if server.guard_factory is not None:
            ssl_object = writer.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert() if ssl_object is not None else None
            host = peer[0] if isinstance(peer, tuple) else str(peer)
            self.guard = server.guard_factory(Peer(host, cert or None))

    def _check_idle(self) -> None:
        """One timer per connection (not one per frame): re-armed until nothing was read for a whole period."""
        quiet = self.loop.time() - self.last_read
        if quiet < self.server.idle_timeout:
            self.idle_timer = self.loop.call_later(self.server.idle_timeout - quiet, self._check_idle)
            return
        log.info("closing connection from %s: idle for %.1f s", self.peer, quiet)
        self._stop_reading()

    async def run(self) -> None:
        self.read_task = asyncio.current_task()
        self.idle_timer = self.loop.call_later(self.server.idle_timeout, self._check_idle)
        write_task = asyncio.create_task(self._write_loop())
        try:
            await self._read_loop()
            async with asyncio.timeout(self.server.flush_timeout):  # flush the responses already owed
                await self.queue.put(None)
                await write_task
        except (asyncio.CancelledError, TimeoutError):
            pass
        finally:
            if self.idle_timer is not None:
                self.idle_timer.cancel()
            write_task.cancel()
            await asyncio.gather(write_task, return_exceptions=True)
            self._abandon_queue()
            self.writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self.writer.wait_closed()

    async def _read_loop(self) -> None:
        server = self.server
        while True:
            try:
                payload = await read_frame(self.reader, server.max_frame_bytes)
            except TruncatedFrame as exc:
                log.info("closing connection from %s: %s", self.peer, exc)
                return
            except FrameError as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                return
            except OSError as exc:
                log.info("connection from %s failed: %s", self.peer, exc)
                return
            if payload is None:
                log.debug("connection from %s closed by the peer", self.peer)
                return
            self.last_read = self.loop.time()
            try:
                in_flight = self._dispatch(payload)
            except FrameError as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                return
            await self.queue.put(in_flight)
            if in_flight.close_after:
                return

    def _dispatch(self, payload: bytes) -> _InFlight:
        registry = self.server.registry
        request = parse_request_header(payload)
        context = RequestContext(
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            peer=self.peer,
            listener=self.server.listener,
            principal=self.guard.principal if self.guard is not None else ANONYMOUS,
            token_authenticated=self.guard.token_authenticated if self.guard is not None else False,
        )
        if request.api_key == API_VERSIONS_KEY and not registry.supports(API_VERSIONS_KEY, request.api_version):
            return _InFlight(context, _settled(unsupported_api_versions_response(registry.ranges())))
        request_type, handler = registry.lookup(request.api_key, request.api_version)
        body = parse_request_body(request, request_type)
        if self.guard is not None:
            screened = self.guard.screen(request.api_key, request.api_version, body)
            if screened is not None:
                if screened.close:
                    log.info("closing connection from %s after api key %d: refused by the listener's security",
                             self.peer, request.api_key)
                return _InFlight(context, _settled(screened.response), screened.close)
        try:
            result = handler(body, context)
        except Exception as exc:
            return _InFlight(context, _settled(error=exc))
        if inspect.isawaitable(result):
            return _InFlight(context, asyncio.ensure_future(result))
        return _InFlight(context, _settled(result))

    async def _write_loop(self) -> None:
        """Write responses in request order; consecutive responses already available go out in one send,
        and a response never waits behind a later request's unfinished handler."""
        finished = False
        while not finished:
            in_flight = await self.queue.get()
            chunks: list[bytes] = []
            while True:
                if in_flight is None:
                    finished = True
                    break
                if chunks and not in_flight.result.done():
                    if not await self._send(chunks):
                        return
                    chunks = []
                try:
                    data = await self._response_bytes(in_flight)
                except HandlerFailed as exc:
                    log.error("closing connection from %s: %s", self.peer, exc, exc_info=exc.__cause__)
                    finished = True
                    self._stop_reading()
                    break
                if data is not None:
                    chunks.append(data)
                if in_flight.close_after:
                    finished = True
                    break
                if self.queue.empty() or len(chunks) >= _WRITE_BATCH_FRAMES:
                    break
                in_flight = self.queue.get_nowait()
            if chunks and not await self._send(chunks):
                return

    async def _send(self, chunks: list[bytes]) -> bool:
        self.writer.write(b"".join(chunks))
        try:
            await self.writer.drain()
        except OSError as exc:
            log.info("connection from %s failed while writing: %s", self.peer, exc)
            self._stop_reading()
            return False
        return True

    async def _response_bytes(self, in_flight: _InFlight) -> bytes | None:
        ctx = in_flight.context
        what = f"api key {ctx.api_key} v{ctx.api_version} (correlation id {ctx.correlation_id})"
        try:
            response = await in_flight.result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise HandlerFailed(f"handler for {what} raised {type(exc).__name__}: {exc}") from exc
        if response is None:
            return None
        if int(getattr(response, "__api_key__", -1)) != ctx.api_key or (
            ctx.api_key != API_VERSIONS_KEY and int(response.__version__) != ctx.api_version
        ):
            raise HandlerFailed(f"handler for {what} returned {type(response).__name__} v{response.__version__}")
        try:
            return encode_response(response, ctx.correlation_id)
        except EncodingError as exc:
            raise HandlerFailed(f"response to {what}: {exc}") from exc

    def _stop_reading(self) -> None:
        if self.read_task is not None:
            self.read_task.cancel()

    def _abandon_queue(self) -> None:
        while not self.queue.empty():
            in_flight = self.queue.get_nowait()
            if in_flight is None:
                continue
            future = in_flight.result
            if not future.done():
                future.cancel()
            elif not future.cancelled() and future.exception() is not None:
                log.debug("dropped the failure of an abandoned request from %s", self.peer)


class ProtocolServer:
    """Serves a registry on one listener (host, port); ``port=0`` picks a free port."""

    def __init__(
        self,
        registry: ApiRegistry,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        listener: str = "",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        flush_timeout: float = 5.0,
        guard_factory: GuardFactory | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.registry = registry
        self.host = host
        self.port = port
        self.listener = listener
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout = idle_timeout
        self.max_in_flight = max_in_flight
        self.flush_timeout = flush_timeout
        self.guard_factory = guard_factory
        self.ssl_context = ssl_context
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._open: set[_Connection] = set()
        self._stopping = False

    @property
    def connection_count(self) -> int:
        """Connections currently open."""
        return len(self._connections)

    async def start(self) -> None:
        """Bind and listen; ``self.port`` is the bound port afterwards."""
        self._stopping = False
        self._server = await asyncio.start_server(self._accept, self.host, self.port, ssl=self.ssl_context)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("listening on %s:%d%s", self.host, self.port, f" ({self.listener})" if self.listener else "")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:  # accepted just before stop() closed the listener
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        connection = _Connection(self, reader, writer)
        self._open.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(task)
            self._open.discard(connection)

    def abort(self) -> None:
        """Stop serving at once (a node that failed): the listener closes and every connection is cut
        without flushing what it owes, so nothing more is read, let alone answered; `stop` then
        collects what is left."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for connection in list(self._open):
            connection.writer.transport.abort()

    async def stop(self) -> None:
        """Stop listening, close every connection, and wait for them."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> ProtocolServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
