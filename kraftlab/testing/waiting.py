"""Waiting in end-to-end tests: poll a condition of real processes until it holds or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll `check` (an exception counts as not yet) until it holds; AssertionError naming `what`
    and the last exception once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s (last error: {last})")
