"""What a fault package declares about itself, in one place: its operations, its windows, the
modes swarm testing may switch off, and how it draws one fault window sized to the system.

A package is Jepsen's combined-nemesis package: a fault kind's start and stop operations, the
targets and parameters it chooses from, and a generator of windows. The fault module (partition,
process, clock, packet, disk) declares its package(s) beside the code that applies the fault;
`nemesis.packages` lists them; the schedule, the nemesis, the reports and the checkers read
everything from those declarations.

Windows are drawn relative to the node's own timeouts (`Timing`), so each window can cause what it
is for: a partition or pause of the active controller lasts past check-quorum plus an election
(a failover); an isolated broker stays cut past its session (a fence) or past its self-fence bound;
a short window tests that nothing happens when nothing should.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.nemesis.fault import Fault


@dataclass(frozen=True, slots=True)
class Timing:
    """The node's timeouts that decide what a fault window does, in seconds (from server.properties,
    with the node's defaults)."""

    election_s: float = 1.0
    fetch_s: float = 2.0
    request_s: float = 2.0
    session_s: float = 9.0
    heartbeat_s: float = 2.0
    self_fence_s: float = 18.0

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Timing:
        def seconds(key: str, default_ms: float) -> float:
            raw = props.get(key)
            try:
                return float(raw) / 1000.0 if raw is not None else default_ms / 1000.0
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not a number of milliseconds") from None

        session = seconds("broker.session.timeout.ms", 9000)
        return cls(
            election_s=seconds("controller.quorum.election.timeout.ms", 1000),
            fetch_s=seconds("controller.quorum.fetch.timeout.ms", 2000),
            request_s=seconds("controller.quorum.request.timeout.ms", 2000),
            session_s=session,
            heartbeat_s=seconds("broker.heartbeat.interval.ms", 2000),
            self_fence_s=seconds("kraftlab.broker.self.fence.timeout.ms", 2 * session * 1000),
        )

    @property
    def check_quorum_s(self) -> float:
        """A leader that heard from no majority for this long resigns (1.5 × fetch timeout)."""
        return 1.5 * self.fetch_s

    @property
    def failover_s(self) -> float:
        """Long enough for a cut-off leader to resign and a new one to be elected: check-quorum,
        then a follower's fetch timeout, a pre-vote and a vote (each within an election timeout)."""
        return max(self.check_quorum_s, self.fetch_s) + 2 * self.election_s + 0.5

    @property
    def election_wait_s(self) -> float:
        """How long an election in progress may leave the quorum without a leader: a follower's fetch
        timeout, then an election."""
        return self.fetch_s + self.election_s

    @property
    def fence_s(self) -> float:
        """Long enough for the active controller to fence a broker it no longer hears from."""
        return self.session_s + self.heartbeat_s + 0.5

    def to_json(self) -> dict[str, float]:
        return {"election_s": self.election_s, "fetch_s": self.fetch_s, "request_s": self.request_s,
                "session_s": self.session_s, "heartbeat_s": self.heartbeat_s, "self_fence_s": self.self_fence_s}


@dataclass(frozen=True, slots=True)
class Cluster:
    """The roles a schedule chooses targets from: voters (controllers) and broker-only nodes."""

    nodes: tuple[str, ...]
    controllers: tuple[str, ...]
    brokers: tuple[str, ...]  # every node with the broker role
    diskfs: bool = False
    """The nodes' data is on the disk-fault filesystem (its rules can fail or delay their I/O)."""
    dynamic: bool = False
    """The quorum is dynamic (KIP-853, controller.quorum.bootstrap.servers): its voters can change."""
    spares: tuple[str, ...] = ()
    """Controllers formatted `--no-initial-controllers`: observers of a dynamic quorum until added."""

    @property
    def observers(self) -> tuple[str, ...]:
        """Broker-only nodes (observers of the metadata quorum)."""
        return tuple(b for b in self.brokers if b not in self.controllers)

    @property
    def voters(self) -> tuple[str, ...]:
        """The controllers that are voters when the run starts (all but the spares)."""
        return tuple(c for c in self.controllers if c not in self.spares)


@dataclass(frozen=True, slots=True)
class Draw:
    """One fault window drawn by a package: what starts it, how long it lasts and why."""

    f: str
    value: dict[str, Any]
    duration: float
    purpose: str
    mode: str
    then: tuple[Draw, ...] = ()
    """Windows that follow this one back to back, each opened `FLAP_GAP_S` after the previous one
    closes (Jepsen's flapping: the fault changes shape faster than the system settles)."""


FLAP_GAP_S = 0.05
"""Seconds between one window of a flapping series and the next: the heal, then the next shape."""


DrawFn = Callable[[random.Random, Cluster, Timing, Sequence[str]], Draw]
AroundFn = Callable[[random.Random, Cluster, Timing, Sequence[str], Mapping[str, Any]], Draw]


@dataclass(frozen=True, slots=True)
class Around:
    """A package's windows that enclose another package's: for each window of `package`, `draw`
    (given the enclosed window's opening value) draws one that opens `Draw.duration` seconds before
    it and closes when it closes — a slow disk around a kill, so the power loss catches what the
    node has not fsynced yet."""

    package: str
    draw: AroundFn


def keep_nodes(done: Mapping[str, Any]) -> dict[str, Any]:
    """A stop that undoes exactly the nodes its start resolved (the active controller is only
    known when the start fires)."""
    nodes = done.get("nodes")
    return {"nodes": list(nodes)} if nodes else {}


def nothing(done: Mapping[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Package:
    """A fault package: the fault kind that applies it, its windows (start f → stop f), the modes
    swarm testing chooses among, how it draws a window, and its mean gap between windows."""

    name: str
    kind: str
    """The `Fault.kind` whose operations apply this package's faults."""
    windows: Mapping[str, str]
    """Each start `f` → the `f` that ends its window."""
    modes: Callable[[Cluster], list[tuple[str, float]]]
    """The (mode, weight) this cluster allows: what swarm testing keeps or leaves out per seed."""
    draw: DrawFn
    """One window, given the enabled modes and flags (at least one mode)."""
    gap_s: Callable[[Timing], float]
    """Mean seconds between the end of one window and the start of the next."""
    stop_value: Callable[[Mapping[str, Any]], dict[str, Any]] = nothing
    """The stop op's value, from the start op's completion value."""
    leader_modes: tuple[str, ...] = ()
    """Its modes aimed at the active controller (each window a failover). Swarm testing keeps at least
    one package that has them in every run, and one of them in every such package it keeps, so every
    run exercises elections and changes of the active controller."""
    flags: tuple[str, ...] = ()
    """Options swarm testing switches on or off per seed (e.g. graceful stops beside kills)."""
    doc: str = ""
    extra_windows: Mapping[str, str] = field(default_factory=dict)
    """Windows of by-hand operations the schedule never generates (for reports)."""
    around: Around | None = None
    """Windows placed around another package's windows when both are kept in a run (without that
    package, this one draws a lane of its own)."""

    @property
    def moves_leadership(self) -> bool:
        """Its windows can move the quorum's leadership (a failover)."""
        return bool(self.leader_modes)


@dataclass(frozen=True)
class FaultKind:
    """A fault module's operations: `make(ctx, rng, **options)` builds the `Fault` that applies them;
    `options` names the Nemesis options it takes (e.g. the clock's `local_boot_id`)."""

    kind: str
    make: Callable[..., Fault]
    options: tuple[str, ...] = ()


def pick(rng: random.Random, choices: Sequence[tuple[str, float]], enabled: Sequence[str] | None = None) -> str:
    """A weighted choice among (name, weight), restricted to `enabled` names when given."""
    if enabled is not None:
        choices = [(n, w) for n, w in choices if n in enabled]
    if not choices:
        raise ValueError("no mode enabled to draw from")
    total = sum(w for _, w in choices)
    x = rng.uniform(0, total)
    for name, w in choices:
        x -= w
        if x <= 0:
            return name
    return choices[-1][0]


def span(rng: random.Random, low: float, high: float) -> float:
    """A duration in [low, high] seconds, rounded to milliseconds."""
    return round(rng.uniform(low, max(low, high)), 3)
