"""Node metrics: a registry of named gauges/counters and a tiny Prometheus text-format HTTP endpoint.

The drivers of the cores report values through the `Metrics` protocol (`set` a gauge, `inc` a
counter, by name, with optional labels); `Registry` is both the in-memory implementation and what
`/metrics` renders (Prometheus text exposition format 0.0.4). The well-known names are below:
Raft's, and KIP-631's (MetadataLag, MetadataCommitLatencyMs, MetadataCommitRatePerSec,
MetadataSnapshotOffsetLag, fenced/unfenced broker counts). `WindowedRate` turns events into a
per-second rate over a trailing window, driven by `now` (no clock inside).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

log = logging.getLogger(__name__)

Kind = Literal["gauge", "counter"]

# Raft (KIP-595)
RAFT_EPOCH = "kraft_raft_current_epoch"
RAFT_LEADER = "kraft_raft_current_leader"
RAFT_HIGH_WATERMARK = "kraft_raft_high_watermark"
RAFT_LOG_END_OFFSET = "kraft_raft_log_end_offset"
RAFT_ELECTIONS = "kraft_raft_election_count_total"
RAFT_ROLE = "kraft_raft_role"
# KIP-631
METADATA_LAG = "kraft_metadata_lag"
METADATA_COMMIT_LATENCY_MS = "kraft_metadata_commit_latency_ms"
METADATA_COMMIT_RATE = "kraft_metadata_commit_rate_per_sec"
METADATA_SNAPSHOT_OFFSET_LAG = "kraft_metadata_snapshot_offset_lag"
FENCED_BROKERS = "kraft_controller_fenced_broker_count"
UNFENCED_BROKERS = "kraft_controller_active_broker_count"
PROCESS_RSS = "process_resident_memory_bytes"
PROCESS_CPU = "process_cpu_seconds_total"

WELL_KNOWN: dict[str, tuple[Kind, str]] = {
    RAFT_EPOCH: ("gauge", "Current Raft epoch known to this node"),
    RAFT_LEADER: ("gauge", "Current Raft leader id (-1 when unknown)"),
    RAFT_HIGH_WATERMARK: ("gauge", "Exclusive high-water mark of the metadata log"),
    RAFT_LOG_END_OFFSET: ("gauge", "Log end offset of the local metadata log"),
    RAFT_ELECTIONS: ("counter", "Elections this node started as candidate"),
    RAFT_ROLE: ("gauge", "1 for the node's current Raft role, 0 for the others"),
    METADATA_LAG: ("gauge", "High-water mark minus the last offset applied to the metadata image"),
    METADATA_COMMIT_LATENCY_MS: ("gauge", "Latency from leader append to commit of the last batch, ms"),
    METADATA_COMMIT_RATE: ("gauge", "Committed metadata batches per second (trailing window)"),
    METADATA_SNAPSHOT_OFFSET_LAG: ("gauge", "Committed offset minus the latest snapshot's end offset"),
    FENCED_BROKERS: ("gauge", "Registered brokers currently fenced"),
    UNFENCED_BROKERS: ("gauge", "Registered brokers currently unfenced"),
    PROCESS_RSS: ("gauge", "Resident memory size in bytes"),
    PROCESS_CPU: ("gauge", "Total user and system CPU time spent in seconds"),
}

RAFT_ROLES = ("unattached", "prospective", "candidate", "leader", "follower", "resigned", "observer")


class Metrics(Protocol):
    """What the cores' drivers report through."""

    def set(self, name: str, value: float, **labels: str) -> None: ...

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None: ...


LabelKey = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class _Family:
    kind: Kind
    help: str
    samples: dict[LabelKey, float] = field(default_factory=dict)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def _escape_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Registry:
    """In-memory metrics by name; renders the Prometheus text format."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def _family(self, name: str, kind: Kind) -> _Family:
        fam = self._families.get(name)
        if fam is None:
            known_kind, help_text = WELL_KNOWN.get(name, (kind, name))
            fam = self._families[name] = _Family(known_kind, help_text)
        if fam.kind != kind:
            raise ValueError(f"metric {name} is a {fam.kind}, not a {kind}")
        return fam

    def set(self, name: str, value: float, **labels: str) -> None:
        self._family(name, "gauge").samples[tuple(sorted(labels.items()))] = float(value)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease")
        samples = self._family(name, "counter").samples
        key = tuple(sorted(labels.items()))
        samples[key] = samples.get(key, 0.0) + amount

    def set_role(self, role: str) -> None:
        """Raft role as a one-hot gauge over every role (so a scrape sees the others at 0)."""
        for r in RAFT_ROLES:
            self.set(RAFT_ROLE, 1.0 if r == role else 0.0, role=r)

    def value(self, name: str, **labels: str) -> float | None:
        fam = self._families.get(name)
        return None if fam is None else fam.samples.get(tuple(sorted(labels.items())))

    def render(self) -> str:
        lines: list[str] = []
        for name in sorted(self._families):
            fam = self._families[name]
            lines.append(f"# HELP {name} {fam.help}")
            lines.append(f"# TYPE {name} {fam.kind}")
            for key, v in sorted(fam.samples.items()):
                labels = ",".join(f'{k}="{_escape_label(val)}"' for k, val in key)
                lines.append(f"{name}{{{labels}}} {_fmt(v)}" if labels else f"{name} {_fmt(v)}")
        return "\n".join(lines) + "\n"


def sample_process(registry: Registry) -> None:
    """The standard process metrics (Prometheus's names) of this process, read from /proc at scrape
    time: a long run's node memory can be seen to stay flat. Nothing where /proc is missing."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return
    registry.set(PROCESS_RSS, pages * os.sysconf("SC_PAGE_SIZE"))
    ticks = os.sysconf("SC_CLK_TCK")
    registry.set(PROCESS_CPU, (int(fields[11]) + int(fields[12])) / ticks)


class WindowedRate:
    """Events per second over the trailing `window_ms`, given `now_ms` by the caller (O(1) amortised)."""

    def __init__(self, window_ms: float = 10_000.0) -> None:
        self.window_ms = window_ms
        self._events: deque[tuple[float, float]] = deque()
        self._total = 0.0

    def record(self, now_ms: float, count: float = 1.0) -> None:
        self._events.append((now_ms, count))
        self._total += count
        self._expire(now_ms)

    def rate(self, now_ms: float) -> float:
        self._expire(now_ms)
        return max(0.0, self._total) * 1000.0 / self.window_ms

    def _expire(self, now_ms: float) -> None:
        while self._events and self._events[0][0] <= now_ms - self.window_ms:
            self._total -= self._events.popleft()[1]
        if not self._events:
            self._total = 0.0


_MAX_REQUEST = 8192


class MetricsServer:
    """`GET /metrics` over HTTP/1.x on an asyncio server; anything else is 404/405/400."""

    def __init__(self, registry: Registry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5.0)
            if len(head) > _MAX_REQUEST:
                raise ValueError("request too large")
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                status, body = "400 Bad Request", "bad request\n"
            elif parts[0] not in ("GET", "HEAD"):
                status, body = "405 Method Not Allowed", "only GET\n"
            elif parts[1].split("?", 1)[0] != "/metrics":
                status, body = "404 Not Found", "try /metrics\n"
            else:
                sample_process(self.registry)
                status, body = "200 OK", self.registry.render()
            data = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            )
            if parts[:1] != ["HEAD"]:
                writer.write(data)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError, OSError) as e:
            log.debug("metrics request dropped: %s", e)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
