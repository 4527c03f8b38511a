"""The example registry served from its own process, so a fuzz run can show the server survives.

``python tests/protocol/example_server.py [--max-frame-bytes N]`` prints ``PORT <port>`` once it
listens on 127.0.0.1, serves until SIGTERM/SIGINT (or until its parent dies), then prints
``SUMMARY <json>``: log records by level, a few error messages, and the connections still open
(after waiting up to 2 s for clients to finish).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections import Counter

from kraftlab.node.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kraftlab.node.protocol.server import ProtocolServer
from protocol.handlers import example_registry


class _Tally(logging.Handler):
    """Counts log records by level and keeps the first error messages."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.levels: Counter[str] = Counter()
        self.errors: list[str] = []
        self.reasons: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.levels[record.levelname] += 1
        message = record.getMessage()
        if record.levelno >= logging.ERROR and len(self.errors) < 20:
            self.errors.append(message)
        if message.startswith("closing connection"):
            reason = message.split(": ", 1)[-1]
            self.reasons[" ".join(w for w in reason.split()[:3] if not any(c.isdigit() for c in w))] += 1


async def serve(max_frame_bytes: int) -> dict[str, object]:
    tally = _Tally()
    logger = logging.getLogger("kraftlab.node.protocol")
    logger.addHandler(tally)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    parent = os.getppid()
    server = ProtocolServer(example_registry(), "127.0.0.1", 0, max_frame_bytes=max_frame_bytes)
    await server.start()
    print(f"PORT {server.port}", flush=True)
    while not stop.is_set():
        if os.getppid() != parent:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
    for _ in range(20):
        if server.connection_count == 0:
            break
        await asyncio.sleep(0.1)
    still_open = server.connection_count
    await server.stop()
    return {
        "levels": dict(tally.levels),
        "errors": tally.errors,
        "reasons": dict(tally.reasons),
        "open_connections": still_open,
        "cpu_seconds": round(time.process_time(), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES)
    args = parser.parse_args()
    summary = asyncio.run(serve(args.max_frame_bytes))
    print("SUMMARY " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
