"""The node clock control file (docs/contracts.md): one shell command that writes it atomically
(tmp + rename), and one that reads a host's CLOCK_MONOTONIC for the rate anchor.

The anchor must be the *host's* monotonic clock: on hosts sharing this machine's kernel
(namespaces, containers) that is ours, read here; on a VM it is read there (`monotonic_command`).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

NEUTRAL_OFFSET_MS = 0.0
NEUTRAL_RATE = 1.0


@dataclass(frozen=True, slots=True)
class ClockSetting:
    offset_ms: float = NEUTRAL_OFFSET_MS
    rate: float = NEUTRAL_RATE
    anchor_mono_ns: int = 0

    @property
    def neutral(self) -> bool:
        return self.offset_ms == NEUTRAL_OFFSET_MS and self.rate == NEUTRAL_RATE

    def to_json(self) -> str:
        return json.dumps({"offset_ms": float(self.offset_ms), "rate": float(self.rate),
                           "anchor_mono_ns": int(self.anchor_mono_ns)})


def write_command(path: str, setting: ClockSetting) -> str:
    """A POSIX shell command writing the file atomically (a reader never sees it half-written)."""
    p = shlex.quote(path)
    tmp = shlex.quote(path + ".tmp.") + "$$"
    directory = shlex.quote(path.rsplit("/", 1)[0] or "/")
    return f"mkdir -p {directory} && printf '%s\\n' {shlex.quote(setting.to_json())} > {tmp} && mv -f {tmp} {p}"


def monotonic_command() -> str:
    """Prints the host's CLOCK_MONOTONIC in ns."""
    return "python3 -c 'import time; print(time.monotonic_ns())'"


def parse(text: str) -> ClockSetting:
    """Read a clock file's contents (tests and status)."""
    data = json.loads(text)
    return ClockSetting(float(data["offset_ms"]), float(data["rate"]), int(data["anchor_mono_ns"]))
