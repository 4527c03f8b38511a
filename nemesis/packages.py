"""The fault packages and fault kinds, listed once: everything else reads them from here.

A fault module declares its `FAULT` (the operations that apply it) and its `PACKAGE`(s) (windows,
modes, how a schedule draws a window); adding a fault kind means one module, its test, and a
line here. The order of `FAULT_KINDS` is the heal order: wake paused and killed processes first,
then the network, then clocks, then the disks' rules (a slow disk), then damaged disks, and last the
voter set of a dynamic quorum (every node runs again and reaches the others by then).
"""

from __future__ import annotations

from kraftlab.nemesis import clock, disk, diskrules, membership, packet, partition, process
from kraftlab.nemesis.package import FaultKind, Package

FAULT_KINDS: tuple[FaultKind, ...] = (process.FAULT, partition.FAULT, packet.FAULT, clock.FAULT, diskrules.FAULT,
                                      disk.FAULT, membership.FAULT)

PACKAGES: dict[str, Package] = {p.name: p for p in (partition.PACKAGE, process.KILL, process.PAUSE, clock.PACKAGE,
                                                     packet.PACKAGE, disk.PACKAGE, diskrules.SLOW,
                                                     diskrules.ERRORS, membership.PACKAGE)}

WINDOWS: dict[str, str] = {start: stop for p in PACKAGES.values()
                           for start, stop in {**p.windows, **p.extra_windows}.items()}
"""The history `f` that opens a fault window → the `f` that closes it (for reports and checkers)."""


class PackageError(ValueError):
    """A bad package list (says why)."""


def parse_packages(spec: str) -> list[str]:
    """`partition,kill` → ["partition", "kill"]; `none` → []; `all` → every package."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        raise PackageError(f"unknown nemesis {', '.join(unknown)}; known: none, all, {', '.join(PACKAGES)}")
    return list(dict.fromkeys(names))


def describe() -> str:
    """One line per package, for `--help` texts and the README."""
    return "\n".join(f"{p.name}: {p.doc}" for p in PACKAGES.values())
