"""A Kafka-protocol frame fuzzer: ``fuzz(host, port, count, seed)`` against any running endpoint.

It learns what the endpoint serves with ApiVersions, then opens many connections. Each connection
carries a batch of well-formed frames (valid requests of served apis and versions with absurd field
values, odd client ids and correlation ids, ApiVersions of unsupported versions) pipelined at once,
(some with bytes after the body, which Kafka ignores), usually followed by one bad frame:

- must close: oversized or negative size prefix, truncated prefix or body (the client half-closes),
  a valid request cut short (with a consistent prefix), an
  unknown api key, an unsupported version of a served api;
- may close: random bytes, bit flips and byte splices of valid requests.

For every connection it checks that each well-formed frame is answered, in order (a Produce asks with
acks 1 or all: Kafka answers no Produce with acks=0), with a response of
its correlation id that decodes as the response to that request; that a must-close frame closes the
connection (and is not answered); and that nothing hangs. Every few connections, and at the end, a
fresh connection must still answer ApiVersions exactly as at the start. With ``strict_answers=False``
(for endpoints whose handlers may legitimately refuse absurd values by closing), a well-formed frame
to a served api other than ApiVersions may also be answered by a close.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field, replace

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

from kraftlab.node.protocol.api_versions import ranges_from_response
from kraftlab.node.protocol.codec import encode_entity
from kraftlab.node.protocol.errors import FrameError, ProtocolError
from kraftlab.node.protocol.framing import DEFAULT_MAX_FRAME_BYTES, SIZE_PREFIX, frame, read_frame
from kraftlab.node.protocol.headers import (
    API_VERSIONS_KEY,
    encode_request,
    parse_response,
    peek_correlation_id,
    request_header_type,
    request_schema,
)
from kraftlab.node.protocol.negotiate import api_versions_request
from protocol.entities import EntityFactory

PRODUCE_KEY = 0  # Kafka's api key of Produce
MUST_CLOSE = "must-close"
MAY_CLOSE = "may-close"
EXPECTATIONS: dict[str, str] = {
    "negative-size": MUST_CLOSE,
    "oversized": MUST_CLOSE,
    "truncated-body": MUST_CLOSE,
    "truncated-prefix": MUST_CLOSE,
    "cut-request": MUST_CLOSE,
    "unknown-api-key": MUST_CLOSE,
    "unsupported-version": MUST_CLOSE,
    "bit-flip": MAY_CLOSE,
    "splice": MAY_CLOSE,
    "random-bytes": MAY_CLOSE,
}
_I32 = (-(2**31), 2**31 - 1)
_POOL_SIZE = 2000
_ODD_CLIENT_IDS = (None, "", "é日本", "x" * 1000, "\x00\x01", "kraftlab-fuzz")


@dataclass(frozen=True, slots=True)
class WellFormed:
    """A request the endpoint must answer (unless ``lenient``): its bytes, id and class."""

    data: bytes
    correlation_id: int
    request_type: type[RequestPayload]
    lenient: bool
    kind: str = "well-formed"


@dataclass(frozen=True, slots=True)
class BadFrame:
    """A frame that ends a connection: its bytes, whether to half-close after it, and its class."""

    kind: str
    data: bytes
    half_close: bool = False

    @property
    def expectation(self) -> str:
        """MUST_CLOSE or MAY_CLOSE."""
        return EXPECTATIONS[self.kind]


@dataclass(frozen=True, slots=True)
class Session:
    """What one connection sends."""

    frames: tuple[WellFormed, ...]
    bad: BadFrame | None


@dataclass
class FuzzReport:
    """What a fuzz run sent and saw; ``violations`` must be empty for the endpoint to pass."""

    frames: int = 0
    connections: int = 0
    answered: int = 0
    closed_by_server: int = 0
    health_checks: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.kinds.items()))
        return (
            f"{self.frames} frames on {self.connections} connections: {self.answered} answered, "
            f"{self.closed_by_server} closed by the server, {self.health_checks} health checks, "
            f"{len(self.violations)} violations [{kinds}]"
        )


class FrameGenerator:
    """Seeded sessions for an endpoint serving ``ranges`` (api key → (min, max) version)."""

    def __init__(
        self,
        rng: random.Random,
        ranges: dict[int, tuple[int, int]],
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        mean_batch: int = 3,
        strict_answers: bool = True,
        fresh: float = 0.2,
    ) -> None:
        self.rng = rng
        self.ranges = ranges
        self.max_frame_bytes = max_frame_bytes
        self.mean_batch = mean_batch
        self.strict_answers = strict_answers
        self.factory = EntityFactory(rng, absurd=True, max_items=3)
        self.served = [
            (key, version)
            for key, (lo, hi) in sorted(ranges.items())
            for version in range(lo, hi + 1)
            if _kio_knows(key, version)
        ]
        self.served_other = [(k, v) for k, v in self.served if k != API_VERSIONS_KEY]
        self.versions_by_key: dict[int, list[int]] = {}
        for key, version in self.served:
            self.versions_by_key.setdefault(key, []).append(version)
        self.keys = sorted(self.versions_by_key)
        self._next_id = 0
        self.fresh = fresh
        self._pool: list[tuple[type[RequestPayload], bytes]] = []

    def session(self) -> Session:
        rng = self.rng
        batch = tuple(self.well_formed() for _ in range(rng.randrange(2 * self.mean_batch + 1)))
        bad = self.bad_frame() if rng.random() < 0.95 else None
        return Session(batch, bad)

    def _correlation_id(self) -> int:
        if self.rng.random() < 0.2:
            return self.rng.choice((*_I32, 0, -1))
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return self._next_id

    def _client_id(self) -> str | None:
        return self.rng.choice(_ODD_CLIENT_IDS) if self.rng.random() < 0.3 else "fuzz"

    def valid_request(self) -> tuple[type[RequestPayload], int, bytes]:
        """A valid request of a served api/version with absurd values: its class, correlation id, frame.

        Requests are drawn fresh with probability ``fresh``, otherwise reused from a pool with a new
        correlation id: encoding absurd entities is most of the fuzzer's own cost.
        """
        correlation_id = self._correlation_id()
        if self._pool and self.rng.random() >= self.fresh:
            request_type, data = self.rng.choice(self._pool)
            patched = data[:8] + struct.pack(">i", correlation_id) + data[12:]
            return request_type, correlation_id, patched
        while True:
            key = self.rng.choice(self.keys)  # every api equally often, whatever its number of versions
            version = self.rng.choice(self.versions_by_key[key])
            request_type = request_schema(key, version)
            if key == API_VERSIONS_KEY and self.rng.random() < 0.5:
                request = api_versions_request(version)
            else:
                request = self.factory.entity(request_type)
            if key == PRODUCE_KEY and int(request.acks) == 0:
                # Kafka never answers a Produce with acks=0, and this fuzzer pairs each well-formed frame
                # with an answer: ask with acks=1 instead.
                request = replace(request, acks=i16(1))
            with contextlib.suppress(ProtocolError):  # a legacy string too long for its prefix, ...
                data = encode_request(request, correlation_id, self._client_id())
                if len(data) - SIZE_PREFIX.size <= self.max_frame_bytes:
                    if len(self._pool) < _POOL_SIZE:
                        self._pool.append((request_type, data))
                    else:
                        self._pool[self.rng.randrange(_POOL_SIZE)] = (request_type, data)
                    return request_type, correlation_id, data

    def well_formed(self) -> WellFormed:
        rng = self.rng
        if rng.random() < 0.1:  # an ApiVersions version the endpoint does not serve: answered with v0
            lo, hi = self.ranges[API_VERSIONS_KEY]
            version = rng.choice((hi + 1, hi + 2, 2**15 - 1, -1, -(2**15))) if lo == 0 else lo - 1
            correlation_id = self._correlation_id()
            payload = _raw_header(API_VERSIONS_KEY, version, correlation_id, self._client_id()) + rng.randbytes(
                rng.randrange(8)
            )
            return WellFormed(frame(payload), correlation_id, request_schema(API_VERSIONS_KEY, 0), False)
        request_type, correlation_id, data = self.valid_request()
        lenient = not self.strict_answers and request_type.__api_key__ != API_VERSIONS_KEY
        if rng.random() < 0.05:  # bytes after the body are ignored, as Kafka does
            data = frame(data[SIZE_PREFIX.size :] + rng.randbytes(rng.randint(1, 64)))
            return WellFormed(data, correlation_id, request_type, lenient, "trailing-bytes")
        return WellFormed(data, correlation_id, request_type, lenient)

    def bad_frame(self) -> BadFrame:
        rng = self.rng
        roll = rng.randrange(10)
        if roll == 0:
            size = rng.choice((-1, -(2**31), rng.randrange(-(2**31), 0)))
            return BadFrame("negative-size", SIZE_PREFIX.pack(size) + rng.randbytes(rng.randrange(16)))
        if roll == 1:
            size = rng.randint(self.max_frame_bytes + 1, 2**31 - 1)
            return BadFrame("oversized", SIZE_PREFIX.pack(size) + rng.randbytes(rng.randrange(64)))
        if roll == 2:
            size = rng.randint(1, min(self.max_frame_bytes, 2**20))
            body = rng.randbytes(rng.randrange(min(size, 256)))
            return BadFrame("truncated-body", SIZE_PREFIX.pack(size) + body, half_close=True)
        if roll == 3:
            return BadFrame("truncated-prefix", rng.randbytes(rng.randint(1, 3)), half_close=True)
        _, _, data = self.valid_request()
        payload = data[SIZE_PREFIX.size :]
        if roll == 4:
            cut = payload[: rng.randrange(len(payload))]
            return BadFrame("cut-request", frame(cut))
        if roll == 5:
            return BadFrame("unknown-api-key", frame(self._unknown_key_payload(payload)))
        if roll == 6 and self.served_other:
            return BadFrame("unsupported-version", frame(self._unsupported_version_payload()))
        if roll == 7:
            flipped = bytearray(payload)
            for _ in range(rng.randint(1, 4)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            return BadFrame("bit-flip", frame(bytes(flipped)))
        if roll == 8:
            at = rng.randrange(len(payload) + 1)
            spliced = payload[:at] + rng.randbytes(rng.randint(1, 8)) + payload[at + rng.randrange(8) :]
            return BadFrame("splice", frame(spliced))
        prefix = payload[: rng.randrange(min(len(payload), 16) + 1)]
        return BadFrame("random-bytes", frame(prefix + rng.randbytes(rng.randrange(200))))

    def _unknown_key_payload(self, payload: bytes) -> bytes:
        while True:
            key = self.rng.randint(-(2**15), 2**15 - 1)
            if key not in self.ranges:
                return struct.pack(">h", key) + payload[2:]

    def _unsupported_version_payload(self) -> bytes:
        key, _ = self.rng.choice(self.served_other)
        lo, hi = self.ranges[key]
        version = self.rng.choice([v for v in (lo - 1, hi + 1, 2**15 - 1, -(2**15)) if not lo <= v <= hi])
        return _raw_header(key, version, self._correlation_id(), "fuzz") + self.rng.randbytes(self.rng.randrange(32))


def _kio_knows(api_key: int, version: int) -> bool:
    try:
        request_schema(api_key, version)
    except ProtocolError:
        return False
    return True


def _raw_header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A request header for any api key and version (v2 layout when kio knows a flexible one)."""
    try:
        header_type = request_header_type(api_key, version)
    except ProtocolError:
        header_type = RequestHeaderV1
    return encode_entity(
        header_type(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        )
    )


class _Runner:
    """Drives sessions against one endpoint and fills a report."""

    def __init__(self, host: str, port: int, report: FuzzReport, timeout: float, max_frame_bytes: int) -> None:
        self.host = host
        self.port = port
        self.report = report
        self.timeout = timeout
        self.max_frame_bytes = max_frame_bytes
        self.baseline: dict[int, tuple[int, int]] = {}

    def violation(self, text: str) -> None:
        if len(self.report.violations) < 1000:
            self.report.violations.append(text)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            request = api_versions_request(3)
            writer.write(encode_request(request, 1, "fuzz-probe"))
            async with asyncio.timeout(self.timeout):
                payload = await read_frame(reader, 2**31 - 1)
            if payload is None:
                raise FrameError("connection closed before the ApiVersions response")
            _, response = parse_response(payload, type(request))
            return ranges_from_response(response)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def health_check(self) -> None:
        try:
            ranges = await self.api_versions()
        except (OSError, TimeoutError, ProtocolError) as exc:
            self.violation(f"health check: {type(exc).__name__}: {exc}")
            return
        if ranges != self.baseline:
            self.violation(f"health check: ApiVersions changed from {self.baseline} to {ranges}")
        self.report.health_checks += 1

    async def run_session(self, number: int, session: Session) -> None:
        report = self.report
        report.connections += 1
        report.frames += len(session.frames) + (session.bad is not None)
        report.kinds.update(f.kind for f in session.frames)
        if session.bad is not None:
            report.kinds[session.bad.kind] += 1
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            self.violation(f"connection {number}: cannot connect: {exc}")
            return
        try:
            writer.write(b"".join(f.data for f in session.frames) + (session.bad.data if session.bad else b""))
            if session.bad is not None and session.bad.half_close:
                writer.write_eof()
            async with asyncio.timeout(self.timeout):
                await self._check_answers(number, session, reader)
        except TimeoutError:
            self.violation(f"connection {number}: no answer and no close within {self.timeout} s")
        except (OSError, FrameError) as exc:
            self.violation(f"connection {number}: {type(exc).__name__}: {exc}")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _check_answers(self, number: int, session: Session, reader: asyncio.StreamReader) -> None:
        for index, sent in enumerate(session.frames):
            payload = await self._read(reader)
            if payload is None:
                if not sent.lenient:
                    self.violation(f"connection {number}: closed instead of answering well-formed frame {index}")
                self.report.closed_by_server += 1
                return
            self._check_response(number, index, sent, payload)
        bad = session.bad
        if bad is None:
            return  # the server keeps an idle connection open; the client closes it
        payload = await self._read(reader)
        if payload is None:
            self.report.closed_by_server += 1
        elif bad.expectation == MUST_CLOSE:
            self.violation(f"connection {number}: {bad.kind} frame was answered instead of closing")
        else:  # a damaged frame that still decodes as a request: its answer must carry its id
            self.report.answered += 1
            if peek_correlation_id(payload) != peek_correlation_id(bad.data[SIZE_PREFIX.size + 4 :]):
                self.violation(f"connection {number}: answer to a {bad.kind} frame has a foreign correlation id")

    async def _read(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            return await read_frame(reader, 2**31 - 1)
        except (FrameError, ConnectionResetError):
            return None

    def _check_response(self, number: int, index: int, sent: WellFormed, payload: bytes) -> None:
        self.report.answered += 1
        try:
            correlation_id, _ = parse_response(payload, sent.request_type)
        except ProtocolError as exc:
            self.violation(f"connection {number}: response {index} does not decode: {exc}")
            return
        if correlation_id != sent.correlation_id:
            self.violation(f"connection {number}: response {index} has correlation id {correlation_id}")


async def fuzz_async(
    host: str,
    port: int,
    count: int,
    seed: int,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    strict_answers: bool = False,
    concurrency: int = 8,
    timeout: float = 10.0,
    health_every: int = 500,
    mean_batch: int = 8,
) -> FuzzReport:
    """``fuzz`` inside a running event loop."""
    report = FuzzReport()
    runner = _Runner(host, port, report, timeout, max_frame_bytes)
    runner.baseline = await runner.api_versions()
    generator = FrameGenerator(
        random.Random(seed),
        runner.baseline,
        max_frame_bytes=max_frame_bytes,
        strict_answers=strict_answers,
        mean_batch=mean_batch,
    )
    number = 0

    async def worker() -> None:
        nonlocal number
        while report.frames < count:
            number += 1
            mine = number
            if mine % health_every == 0:
                await runner.health_check()
            await runner.run_session(mine, generator.session())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await runner.health_check()
    return report


def fuzz(host: str, port: int, count: int, seed: int, **options: object) -> FuzzReport:
    """Throw at least ``count`` frames at ``host:port`` (see the module docstring); blocking."""
    return asyncio.run(fuzz_async(host, port, count, seed, **options))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz a Kafka-protocol endpoint with bad and absurd frames.")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES)
    parser.add_argument("--strict-answers", action="store_true")
    args = parser.parse_args(argv)
    report = fuzz(
        args.host,
        args.port,
        args.count,
        args.seed,
        max_frame_bytes=args.max_frame_bytes,
        strict_answers=args.strict_answers,
    )
    print(report.summary())
    for line in report.violations[:50]:
        print("  " + line)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
