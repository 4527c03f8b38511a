"""Names and places of files in a metadata log directory, as Kafka lays them out.

`<metadata.log.dir>/meta.properties`, `<metadata.log.dir>/__cluster_metadata-0/` holding
`<20-digit base offset>.log` segments, `<20-digit offset>-<10-digit epoch>.checkpoint` snapshots
(`.checkpoint.part` while being written), `quorum-state` and `hw-checkpoint`.
"""

from __future__ import annotations

import re
from pathlib import Path

from kraftlab.node.raft.ports import OffsetAndEpoch

METADATA_PARTITION = "__cluster_metadata-0"
QUORUM_STATE_FILE = "quorum-state"
HW_CHECKPOINT_FILE = "hw-checkpoint"
META_PROPERTIES_FILE = "meta.properties"
SEGMENT_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def partition_dir(metadata_log_dir: str | Path) -> Path:
    """The directory of the metadata partition inside `metadata.log.dir`."""
    return Path(metadata_log_dir) / METADATA_PARTITION


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The base offset a segment file name encodes, or None if `name` is not a segment."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def snapshot_name(snapshot_id: OffsetAndEpoch, partial: bool = False) -> str:
    name = f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"
    return name + PARTIAL_SUFFIX if partial else name


def parse_snapshot_name(name: str) -> OffsetAndEpoch | None:
    """The snapshot id a frozen snapshot file name encodes, or None otherwise."""
    m = _SNAPSHOT_RE.match(name)
    return OffsetAndEpoch(int(m.group(1)), int(m.group(2))) if m else None


def is_partial_snapshot(name: str) -> bool:
    return name.endswith(SNAPSHOT_SUFFIX + PARTIAL_SUFFIX)
