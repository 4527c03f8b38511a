"""Raft configuration: the KIP-595/631 `controller.quorum.*` keys with Kafka's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kraftlab.node.raft.retention import RetentionPolicy


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timeouts in milliseconds; names follow Kafka's `controller.quorum.<name>.ms` keys."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25
    # How long the leader may park a Fetch that has nothing new to return (Kafka's fetch max wait).
    fetch_max_wait_ms: int = 500
    # Bytes per Fetch response and per FetchSnapshot chunk.
    fetch_max_bytes: int = 1 << 20
    fetch_snapshot_max_bytes: int = 1 << 20
    # Records per leader batch before the linger is cut short.
    max_batch_records: int = 1000
    # metadata.max.retention.bytes / .ms: how much log the node keeps behind its latest snapshot.
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard a Fetch from a majority within this resigns (1.5 × fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2

    def with_(self, **changes: Any) -> RaftConfig:
        return replace(self, **changes)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RaftConfig:
        """Read the `controller.quorum.*.ms` keys of a server.properties mapping; others keep defaults."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if not f.name.endswith("_ms"):
                continue
            key = "controller.quorum." + f.name[: -len("_ms")].replace("_", ".") + ".ms"
            if key in props:
                values[f.name] = int(props[key])
        return cls(**values)
