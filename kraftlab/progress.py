"""Live progress of a run: elapsed/limit, ops ok/fail/info, faults in force.

On a terminal it is a `rich` live line; otherwise (CI logs, pipes) a plain line every few
seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text


@dataclass
class Snapshot:
    phase: str
    elapsed: float
    limit: float
    ok: int
    fail: int
    info: int
    faults: list[str]

    def line(self) -> str:
        faults = ", ".join(self.faults) if self.faults else "none"
        return (f"[{self.phase}] {self.elapsed:6.1f}/{self.limit:.0f}s  ok {self.ok}  fail {self.fail}  "
                f"info {self.info}  faults: {faults}")


class ProgressDisplay:
    """Call `refresh()` as often as you like; it renders at most every `interval` seconds."""

    def __init__(self, source: Callable[[], Snapshot], *, stream: TextIO | None = None,
                 plain_interval: float = 5.0) -> None:
        self._source = source
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._interval = 0.25 if self._tty else plain_interval
        self._last = float("-inf")
        self._live: Live | None = None

    def __enter__(self) -> ProgressDisplay:
        if self._tty:
            self._live = Live(Text(""), console=Console(file=self._stream), refresh_per_second=4,
                              transient=False)
            self._live.__enter__()
        return self

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        snap = self._source()
        if self._live is not None:
            self._live.update(Text(snap.line()))
        else:
            print(snap.line(), file=self._stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        self.refresh(force=True)
        if self._live is not None:
            self._live.__exit__(None, None, None)
