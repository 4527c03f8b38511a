"""The node clock control file (docs/contracts.md): one shell command that writes it atomically.

The command runs on the node's host; when no anchor is given it takes the host's CLOCK_MONOTONIC
there, which is what the node compares against when a rate is in force.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

NEUTRAL_OFFSET_MS = 0.0
NEUTRAL_RATE = 1.0

_WRITER = (
    "import json,os,sys,time\n"
    "p,o,r,a=sys.argv[1],float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[4])\n"
    "a=a if a>=0 else time.monotonic_ns()\n"
    "os.makedirs(os.path.dirname(p) or '.',exist_ok=True)\n"
    "t=p+'.tmp'\n"
    "f=open(t,'w');json.dump({'offset_ms':o,'rate':r,'anchor_mono_ns':a},f);f.close()\n"
    "os.replace(t,p);print(a)\n"
)


@dataclass(frozen=True, slots=True)
class ClockSetting:
    offset_ms: float = NEUTRAL_OFFSET_MS
    rate: float = NEUTRAL_RATE
    anchor_mono_ns: int = -1  # -1: the host's monotonic clock when written

    @property
    def neutral(self) -> bool:
        return self.offset_ms == NEUTRAL_OFFSET_MS and self.rate == NEUTRAL_RATE


def write_command(path: str, setting: ClockSetting) -> str:
    """A shell command writing the file (tmp + rename) and printing the anchor it used."""
    args = [path, repr(float(setting.offset_ms)), repr(float(setting.rate)), str(int(setting.anchor_mono_ns))]
    return "python3 -c " + shlex.quote(_WRITER) + " " + " ".join(shlex.quote(a) for a in args)


def parse(text: str) -> ClockSetting:
    """Read a clock file's contents (tests and status)."""
    data = json.loads(text)
    return ClockSetting(float(data["offset_ms"]), float(data["rate"]), int(data["anchor_mono_ns"]))
