"""The fuzz run: 100,000 bad and absurd frames at a server in its own process; it survives and keeps answering."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlab.node.protocol.api_versions import ApiRange, build_api_versions_response
from kraftlab.node.protocol.framing import read_frame
from kraftlab.node.protocol.headers import encode_response, peek_correlation_id
from protocol.fuzzing import EXPECTATIONS, MUST_CLOSE, FrameGenerator, fuzz, fuzz_async

SERVER = Path(__file__).with_name("example_server.py")
MAX_FRAME_BYTES = 1 << 20
RANGES = {3: (0, 12), 18: (0, 4), 19: (2, 7)}
BAD_KINDS = set(EXPECTATIONS)


@pytest.fixture
def example_server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "protocol.example_server", "--max-frame-bytes", str(MAX_FRAME_BYTES)],
        cwd=SERVER.parent.parent,  # tests/: `-m` makes the `protocol` test package importable
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield process, int(line.split()[1])
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def stop(process: subprocess.Popen[str]) -> dict[str, object]:
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    summary = [line for line in out.splitlines() if line.startswith("SUMMARY ")]
    return dict(json.loads(summary[0].removeprefix("SUMMARY ")))


def test_the_generator_is_seeded_and_covers_every_kind_of_bad_frame() -> None:
    def sessions(seed: int) -> list[object]:
        generator = FrameGenerator(random.Random(seed), RANGES, max_frame_bytes=MAX_FRAME_BYTES)
        return [generator.session() for _ in range(600)]

    first = sessions(3)
    assert first == sessions(3)
    assert first != sessions(4)
    kinds = Counter(s.bad.kind for s in first if s.bad is not None)  # type: ignore[attr-defined]
    assert set(kinds) == BAD_KINDS


def test_a_server_that_answers_everything_fails_the_fuzz_run() -> None:
    """The fuzzer can fail: a server that never closes on a bad frame is caught."""

    async def careless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answer = build_api_versions_response(3, tuple(ApiRange(k, *v) for k, v in sorted(RANGES.items())))
        with contextlib.suppress(Exception):  # a careless server ignores every error
            while (payload := await read_frame(reader, 2**31 - 1)) is not None:
                if len(payload) >= 8:
                    writer.write(encode_response(answer, peek_correlation_id(payload[4:])))
        writer.close()

    async def scenario() -> list[str]:
        server = await asyncio.start_server(careless, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            report = await fuzz_async("127.0.0.1", port, 400, 1, max_frame_bytes=MAX_FRAME_BYTES, timeout=0.5)
        finally:
            server.close()
            await server.wait_closed()
        return report.violations

    violations = asyncio.run(scenario())
    assert any("answered instead of closing" in v for v in violations)
    assert any("does not decode" in v for v in violations)


def test_100k_bad_and_absurd_frames_never_crash_the_server(example_server: tuple[subprocess.Popen[str], int]) -> None:
    process, port = example_server
    report = fuzz("127.0.0.1", port, 100_000, 20261122, max_frame_bytes=MAX_FRAME_BYTES, strict_answers=True)
    assert process.poll() is None, "the server process died"
    summary = stop(process)
    print(report.summary())  # shown with -s: the run's figures
    assert report.violations == [], report.violations[:20]
    assert report.frames >= 100_000
    assert set(report.kinds) == BAD_KINDS | {"well-formed", "trailing-bytes"}
    assert all(report.kinds[kind] >= 500 for kind in BAD_KINDS), report.kinds
    assert report.answered >= report.kinds["well-formed"] + report.kinds["trailing-bytes"]
    assert report.health_checks >= 10
    levels = summary["levels"]
    assert isinstance(levels, dict)
    assert summary["errors"] == [] and "ERROR" not in levels, summary["errors"]
    # every connection the server closed has its reason logged (one INFO line is "listening on ...")
    assert levels.get("WARNING", 0) + levels.get("INFO", 0) - 1 == report.closed_by_server
    assert summary["open_connections"] == 0
    must_close = sum(report.kinds[k] for k in BAD_KINDS if EXPECTATIONS[k] == MUST_CLOSE)
    assert report.closed_by_server >= must_close
