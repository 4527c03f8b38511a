"""Benchmarks stopped from outside still clean up: SIGTERM (a `timeout`, a CI runner, `kill`) raises
KeyboardInterrupt in the main thread, as Ctrl-C does, so the `finally` blocks that kill the node
processes a benchmark started run instead of leaving them behind."""

from __future__ import annotations

import signal
from types import FrameType


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def interrupt_on_sigterm() -> None:
    """From now on SIGTERM interrupts the main thread like SIGINT (call from the main thread)."""
    signal.signal(signal.SIGTERM, _interrupted)
