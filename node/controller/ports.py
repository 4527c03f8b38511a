"""The controller's seams: its configuration, the Raft write port, and its outputs.

`MetadataWriter` is what the controller needs from Raft: `append(records, now_ms)` appends the
records as ONE batch (the controller decides what must be atomic) and returns the base offset,
or raises `NotLeader` when this node is not (or no longer) the leader. The Raft core's driver
adapts its own append to it (translating its not-leader exception into this one).
`InMemoryLog` is the trivial implementation used by tests (a single log, no replication).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.security.tokens import TokenConfig

METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION = 1
"""The only metadata.version this node speaks; brokers must support it to register."""


class NotLeader(Exception):
    """The Raft core refused an append: this node is not the leader of the current epoch."""


class MetadataWriter(Protocol):
    def append(self, records: Sequence[Record], now_ms: int) -> int:
        """Append `records` as one batch at the current leader epoch; return its base offset."""
        ...

    def next_offset(self) -> int:
        """The offset the next append's first record would get. Raft appends control records of its
        own (KIP-853's voter changes), so the controller asks before it writes offsets into records."""
        ...


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    node_id: int
    cluster_id: str
    session_timeout_ms: int = 9000
    """broker.session.timeout.ms: a broker silent this long is fenced."""
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election: bool = False
    snapshot_max_new_record_bytes: int = 20 * 1024 * 1024
    """metadata.snapshot.max.new.record.bytes: `snapshot_due()` once this much was applied."""
    lease_journal_interval_ms: int = 1000
    fence_changes_per_tick: int = 500
    """At most this many partitions leave a fenced broker's ISRs per tick (the rest on the next
    ticks, the FenceBrokerRecord after the last): a broker of 100,000 partitions must not stall the
    active controller's event loop past the followers' fetch timeout (500 changes: ~50 ms of CPU,
    2,000 stalled a leader for 2 s on a loaded machine)."""
    seed: int = 0
    """Seeds topic ids and placement (the core is deterministic; the process passes a random seed)."""
    bugs: BugSet = NO_BUGS
    """Test-only planted bugs (node.bugs, the bug zoo); none by default."""
    bootstrap_records: tuple[Any, ...] = ()
    """Metadata records the first active controller of an empty log writes with the bootstrap
    metadata.version (`kraft-node format --add-scram`: KIP-900's SCRAM credentials)."""
    tokens: TokenConfig = field(default_factory=TokenConfig)
    """Delegation tokens (`delegation.token.*`); without a secret key they are disabled."""


@dataclass(frozen=True, slots=True)
class Reply:
    """Send `response` (a kio entity of the request's version) to the request `token` came with."""

    token: Any
    response: Any


class InMemoryLog:
    """A leader-only log for tests: appends batches at `epoch`; `leader=False` makes it refuse."""

    def __init__(self, epoch: int = 1, start: int = 0) -> None:
        self.epoch = epoch
        self.leader = True
        self.batches: list[Batch] = []
        self.end = start

    def append(self, records: Sequence[Record], now_ms: int) -> int:
        if not self.leader:
            raise NotLeader()
        base = self.end
        self.batches.append(Batch(base, self.epoch, tuple(records), append_time_ms=now_ms))
        self.end += len(records)
        return base

    def next_offset(self) -> int:
        return self.end
