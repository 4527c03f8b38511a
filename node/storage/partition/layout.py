"""Names of a partition's directory and files, and of a log dir's checkpoints, as Kafka lays them out."""

from __future__ import annotations

import re
from pathlib import Path

from kraftlab.node.storage.layout import parse_segment_name, segment_name

INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

_DIR_RE = re.compile(r"^(.+)-(\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name; None for anything else (Kafka's
    `-delete`/`-future` directories, the metadata partition's, stray files)."""
    m = _DIR_RE.match(name)
    if m is None or m.group(1) == "__cluster_metadata":
        return None
    return m.group(1), int(m.group(2))


def log_path(directory: Path, base_offset: int) -> Path:
    return directory / segment_name(base_offset)


def index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{INDEX_SUFFIX}"


def time_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TIME_INDEX_SUFFIX}"


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of the `.log` files in a partition directory, sorted."""
    return sorted(b for p in directory.iterdir() if (b := parse_segment_name(p.name)) is not None)
