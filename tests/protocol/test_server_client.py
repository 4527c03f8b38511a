"""The asyncio server and client together on loopback: dispatch, ordering, bad frames, timeouts, reconnects."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta

from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import (
    ClientClosed,
    ConnectFailed,
    ConnectionLost,
    InvalidRequest,
    RequestError,
    RequestTimedOut,
)
from kraftlab.node.protocol.framing import frame, read_frame
from kraftlab.node.protocol.headers import encode_request, parse_response
from kraftlab.node.protocol.negotiate import api_versions_request, fetch_api_versions, negotiate
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.protocol.server import ProtocolServer
from protocol.handlers import example_registry

HEARTBEAT = 12
METADATA_ALL = MetadataRequest(topics=None, include_topic_authorized_operations=False)


@dataclass
class Probe:
    """A Heartbeat handler steered by the request: sleep ``generation_id`` ms, act on ``member_id``."""

    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, request: Any, context: RequestContext) -> Any:
        label, action = request.group_id, request.member_id
        self.started.append(label)
        try:
            if action == "hang":
                await self.release.wait()
            await asyncio.sleep(request.generation_id / 1000)
        except asyncio.CancelledError:
            self.cancelled.append(label)
            raise
        self.finished.append(label)
        if action == "raise":
            raise RuntimeError("handler bug")
        if action == "wrong":
            return MetadataResponse(throttle_time=_zero(), brokers=(), topics=())
        if action == "silent":
            return None
        return HeartbeatResponse(throttle_time=_zero(), error_code=ErrorCode.none)


def _zero() -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(0))


def heartbeat(label: str, delay_ms: int = 0, action: str = "ok") -> HeartbeatRequest:
    return HeartbeatRequest(group_id=GroupId(label), generation_id=i32(delay_ms), member_id=action)


def registry_with(probe: Probe, **options: Any) -> ApiRegistry:
    registry = example_registry() if not options else ApiRegistry(**options)
    registry.register(HEARTBEAT, 4, 4, probe)
    return registry


@asynccontextmanager
async def serving(registry: ApiRegistry, **options: Any) -> AsyncIterator[ProtocolServer]:
    server = ProtocolServer(registry, "127.0.0.1", 0, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


async def read_all(reader: asyncio.StreamReader) -> list[bytes]:
    """Frames until the server closes the connection."""
    frames: list[bytes] = []
    async with asyncio.timeout(5):
        while (payload := await read_frame(reader)) is not None:
            frames.append(payload)
    return frames


def test_api_versions_of_every_version_and_negotiation() -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server, ProtocolClient("127.0.0.1", server.port) as client:
            for version in range(5):
                response = await client.send(api_versions_request(version))
                assert response.__version__ == version
                assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
                    3: (0, 12),
                    18: (0, 4),
                    19: (2, 7),
                }
            assert await negotiate(client, {3: (0, 20), 19: (0, 5)}) == {3: 12, 19: 5}

    run(scenario)


def test_negotiation_falls_back_when_the_server_knows_only_older_api_versions() -> None:
    async def scenario() -> None:
        registry = ApiRegistry(api_versions_range=(0, 2))
        async with serving(registry) as server, ProtocolClient("127.0.0.1", server.port) as client:
            first = await client.send(api_versions_request(4))
            assert first.__version__ == 0 and first.error_code == ErrorCode.unsupported_version
            assert [(k.api_key, k.min_version, k.max_version) for k in first.api_keys] == [(18, 0, 2)]
            assert await fetch_api_versions(client) == {18: (0, 2)}

    run(scenario)


def test_an_unknown_api_versions_version_is_answered_and_the_connection_stays_open() -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            header = struct.pack(">hhih", 18, 77, 41, -1) + b"\x00"
            writer.write(frame(header + b"garbage the server must not parse"))
            payload = await read_frame(reader)
            assert payload is not None
            correlation_id, response = parse_response(payload, type(api_versions_request(3)))
            assert correlation_id == 41 and response.error_code == ErrorCode.unsupported_version
            writer.write(encode_request(METADATA_ALL, 42, "raw"))
            payload = await read_frame(reader)
            assert payload is not None and parse_response(payload, MetadataRequest)[0] == 42
            writer.close()

    run(scenario)


def test_responses_leave_in_request_order_when_handlers_finish_out_of_order() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            delays = [60, 45, 30, 15, 0]
            writer.write(b"".join(encode_request(heartbeat(f"r{i}", d), 100 + i, None) for i, d in enumerate(delays)))
            writer.write(encode_request(METADATA_ALL, 200, None))  # a sync handler after the slow async ones
            seen = []
            for _ in range(len(delays) + 1):
                payload = await read_frame(reader)
                assert payload is not None
                seen.append(struct.unpack(">i", payload[:4])[0])
            assert seen == [100, 101, 102, 103, 104, 200]
            assert probe.started == ["r0", "r1", "r2", "r3", "r4"]
            assert probe.finished == ["r4", "r3", "r2", "r1", "r0"]  # the ordering above was not free
            writer.close()

    run(scenario)


def test_a_ready_response_is_not_held_back_by_a_later_unfinished_request() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(
                encode_request(heartbeat("quick"), 1, None) + encode_request(heartbeat("slow", 0, "hang"), 2, None)
            )
            async with asyncio.timeout(5):
                first = await read_frame(reader)
            assert first is not None and struct.unpack(">i", first[:4])[0] == 1
            assert probe.finished == ["quick"]
            probe.release.set()
            second = await read_frame(reader)
            assert second is not None and struct.unpack(">i", second[:4])[0] == 2
            writer.close()

    run(scenario)


def test_the_client_pipelines_many_requests_on_one_connection() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server, ProtocolClient("127.0.0.1", server.port) as client:
            requests = [heartbeat(f"p{i}", (7 * i) % 20) for i in range(40)]
            responses = await asyncio.gather(*(client.send(r) for r in requests))
            assert all(isinstance(r, HeartbeatResponse) and r.error_code == ErrorCode.none for r in responses)
            assert sorted(probe.finished) == sorted(r.group_id for r in requests)
            assert probe.finished != [r.group_id for r in requests]
            assert server.connection_count == 1

    run(scenario)


def test_bytes_after_a_request_body_are_ignored_like_kafka_does() -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            # what librdkafka 2.x sends for a full Metadata v12 request: three bytes more than the schema
            payload = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
            writer.write(frame(payload))
            answer = await read_frame(reader)
            assert answer is not None
            correlation_id, response = parse_response(answer, MetadataRequest)
            assert correlation_id == 3 and isinstance(response, MetadataResponse)
            writer.close()

    run(scenario)


def test_a_handler_returning_none_sends_nothing_and_keeps_the_order() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(
                encode_request(heartbeat("a", 10, "silent"), 1, None) + encode_request(heartbeat("b"), 2, None)
            )
            payload = await read_frame(reader)
            assert payload is not None and struct.unpack(">i", payload[:4])[0] == 2
            writer.close()

    run(scenario)


def _bad_frames() -> dict[str, tuple[bytes, str]]:
    metadata = encode_request(METADATA_ALL, 9, "c")[4:]
    return {
        "oversized": (struct.pack(">i", 1025) + b"x" * 1025, "larger than the maximum 1024"),
        "negative-size": (struct.pack(">i", -7), "negative frame size"),
        "unknown-api-key": (frame(struct.pack(">h", 999) + metadata[2:]), "unknown api key 999"),
        "unserved-api": (frame(struct.pack(">h", 60) + b"\x00\x00" + metadata[4:]), "not served"),
        "unsupported-version": (frame(struct.pack(">hh", 3, 13) + metadata[4:]), "version 13 is not served"),
        "unknown-version": (frame(struct.pack(">hh", 3, 99) + metadata[4:]), "unknown api key 3 version 99"),
        "malformed-body": (frame(metadata[:-3] + b"\xff\xff\xff"), "MetadataRequest"),
        "short-header": (frame(b"\x00\x03"), "shorter than a request header"),
    }


@pytest.mark.parametrize("kind", sorted(_bad_frames()))
def test_a_bad_frame_closes_only_its_connection_with_a_logged_reason(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    data, reason = _bad_frames()[kind]

    async def scenario() -> None:
        async with (
            serving(example_registry(), max_frame_bytes=1024) as server,
            ProtocolClient("127.0.0.1", server.port) as bystander,
        ):
            await bystander.send(METADATA_ALL)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(encode_request(METADATA_ALL, 1, "victim") + data)
            frames = await read_all(reader)
            assert [struct.unpack(">i", f[:4])[0] for f in frames] == [1]  # the request before it is answered
            writer.close()
            await bystander.send(METADATA_ALL)  # the other connection is untouched
            assert bystander.connected

    with caplog.at_level(logging.INFO, logger="kraftlab.node.protocol"):
        run(scenario)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and reason in warnings[0], warnings


@pytest.mark.parametrize("data", [b"\x00\x00", struct.pack(">i", 50) + b"partial"])
def test_a_truncated_frame_closes_the_connection(data: bytes, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(data)
            writer.write_eof()
            assert await read_all(reader) == []
            writer.close()
            for _ in range(50):
                if server.connection_count == 0:
                    break
                await asyncio.sleep(0.01)
            assert server.connection_count == 0

    with caplog.at_level(logging.INFO, logger="kraftlab.node.protocol"):
        run(scenario)
    assert any("stream ended" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("action", ["raise", "wrong"])
def test_a_failing_handler_closes_the_connection_after_earlier_answers(
    action: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(
                encode_request(heartbeat("first", 20), 1, None)
                + encode_request(heartbeat("bad", 0, action), 2, None)
                + encode_request(heartbeat("after", 0), 3, None)
            )
            frames = await read_all(reader)
            assert [struct.unpack(">i", f[:4])[0] for f in frames] == [1]
            writer.close()

    with caplog.at_level(logging.INFO, logger="kraftlab.node.protocol"):
        run(scenario)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "correlation id 2" in errors[0]


def test_an_idle_connection_is_closed() -> None:
    async def scenario() -> None:
        async with serving(example_registry(), idle_timeout=0.2) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            loop = asyncio.get_running_loop()
            start = loop.time()
            assert await read_all(reader) == []
            assert 0.15 <= loop.time() - start < 3
            writer.close()

    run(scenario)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connect_failure_is_definite() -> None:
    async def scenario() -> None:
        async with ProtocolClient("127.0.0.1", _free_port(), connect_timeout=2) as client:
            with pytest.raises(ConnectFailed) as failure:
                await client.send(METADATA_ALL)
            assert failure.value.definite and isinstance(failure.value, RequestError)

    run(scenario)


def test_an_unencodable_request_is_definite_and_opens_nothing() -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server, ProtocolClient("127.0.0.1", server.port) as client:
            bad = HeartbeatRequest(group_id="x", generation_id=2**40, member_id="ok")  # type: ignore[arg-type]
            with pytest.raises(InvalidRequest) as failure:
                await client.send(bad)
            assert failure.value.definite
            assert not client.connected and server.connection_count == 0

    run(scenario)


def test_a_timeout_is_indefinite_closes_the_connection_and_the_next_request_reconnects() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server, ProtocolClient("127.0.0.1", server.port) as client:
            slow = asyncio.create_task(client.send(heartbeat("behind", 0), timeout=5))
            with pytest.raises(RequestTimedOut) as failure:
                await client.send(heartbeat("stuck", 0, "hang"), timeout=0.2)
            assert not failure.value.definite
            # "behind" was sent after "stuck", so its answer was queued behind it: lost with the connection
            with pytest.raises(ConnectionLost):
                await slow
            assert not client.connected
            response = await client.send(heartbeat("again"))
            assert response.error_code == ErrorCode.none and client.connected
            probe.release.set()

    run(scenario)


def test_a_server_going_away_after_the_send_is_indefinite_and_a_restarted_one_is_reached() -> None:
    async def scenario() -> None:
        probe = Probe()
        server = ProtocolServer(registry_with(probe), "127.0.0.1", 0)
        await server.start()
        port = server.port
        async with ProtocolClient("127.0.0.1", port) as client:
            pending = asyncio.create_task(client.send(heartbeat("inflight", 0, "hang")))
            while not probe.started:
                await asyncio.sleep(0.01)
            await server.stop()
            with pytest.raises(ConnectionLost) as failure:
                await pending
            assert not failure.value.definite
            assert probe.cancelled == ["inflight"]  # stop() cancels the handler still running
            with pytest.raises(ConnectFailed):
                await client.send(heartbeat("nobody"))
            restarted = ProtocolServer(registry_with(Probe()), "127.0.0.1", port)
            await restarted.start()
            try:
                assert (await client.send(heartbeat("back"))).error_code == ErrorCode.none
            finally:
                await restarted.stop()

    run(scenario)


def test_closing_the_client_ends_requests_in_flight_and_refuses_new_ones() -> None:
    async def scenario() -> None:
        probe = Probe()
        async with serving(registry_with(probe)) as server:
            client = ProtocolClient("127.0.0.1", server.port)
            pending = asyncio.create_task(client.send(heartbeat("inflight", 0, "hang")))
            while not probe.started:
                await asyncio.sleep(0.01)
            await client.close()
            with pytest.raises(ConnectionLost):
                await pending
            with pytest.raises(ClientClosed):
                await client.send(METADATA_ALL)
            probe.release.set()

    run(scenario)


def test_correlation_ids_wrap_around_within_int32() -> None:
    async def scenario() -> None:
        async with serving(example_registry()) as server, ProtocolClient("127.0.0.1", server.port) as client:
            client._correlation_id = 2**31 - 2
            for _ in range(3):
                assert isinstance(await client.send(METADATA_ALL), MetadataResponse)
            assert client._correlation_id == 1

    run(scenario)


def test_stop_closes_every_connection() -> None:
    async def scenario() -> None:
        server = ProtocolServer(example_registry(), "127.0.0.1", 0)
        await server.start()
        connections = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
        for _ in range(100):
            if server.connection_count == 5:
                break
            await asyncio.sleep(0.01)
        assert server.connection_count == 5
        await server.stop()
        assert server.connection_count == 0
        for reader, writer in connections:
            assert await read_all(reader) == []
            writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", server.port)

    run(scenario)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (lambda cid: frame(struct.pack(">i", cid + 1) + b"\x00" * 8), "expected"),  # wrong correlation id
        (lambda cid: frame(struct.pack(">i", cid) + b"\xff\xff"), "undecodable"),  # not a MetadataResponse
        (lambda cid: struct.pack(">i", -5), "negative frame size"),  # a bad size prefix
        (lambda cid: b"", "closed by the server"),  # just hangs up
    ],
)
def test_a_misbehaving_server_costs_the_client_only_that_connection(reply: Callable[[int], bytes], reason: str) -> None:
    async def scenario() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            payload = await read_frame(reader)
            assert payload is not None
            writer.write(reply(struct.unpack(">i", payload[4:8])[0]))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with ProtocolClient("127.0.0.1", port) as client:
                with pytest.raises(ConnectionLost, match=reason) as failure:
                    await client.send(METADATA_ALL)
                assert not failure.value.definite and not client.connected
        finally:
            server.close()
            await server.wait_closed()

    run(scenario)


def test_abort_cuts_every_connection_at_once_and_reads_nothing_more() -> None:
    """A failed node's listener: no new connection, the open ones cut at once (a request sent after
    the abort is never read, a response owed is never sent), then stop() collects what is left."""
    async def scenario() -> None:
        probe = Probe()
        server = ProtocolServer(registry_with(probe), "127.0.0.1", 0)
        await server.start()
        async with ProtocolClient("127.0.0.1", server.port) as client:
            pending = asyncio.create_task(client.send(heartbeat("inflight", 0, "hang")))
            while not probe.started:
                await asyncio.sleep(0.01)
            server.abort()  # synchronous: nothing of the server runs in between
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", server.port)
            with pytest.raises(ConnectionLost):
                await pending
            probe.release.set()
            await asyncio.wait_for(server.stop(), 5)
            assert server.connection_count == 0 and probe.started == ["inflight"]

    run(scenario)
