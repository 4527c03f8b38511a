"""Partition logs of a broker, in Kafka's layout under `log.dirs`.

`<log dir>/<topic>-<partition>/` holds `<20-digit base offset>.log` segments of record batches v2
kept as bytes (CRC32C checked on append and on recovery), `.index` (offset index) and
`.timeindex` (time index) per segment, `leader-epoch-checkpoint` and `partition.metadata`; each
log dir holds `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint`.

Modules: `config` (LogConfig from Kafka's topic/broker keys), `layout` (names), `files` (the
checkpoint and partition.metadata file formats), `index` (offset and time indexes), `segment`
(one segment with its indexes), `log` (PartitionLog: append as leader/follower, read, truncate,
retention, flush policy, leader epochs), `manager` (LogManager over several log dirs).
"""

from kraftlab.node.storage.partition.config import LogConfig
from kraftlab.node.storage.partition.log import (
    AppendInfo,
    InvalidRecords,
    OffsetOutOfRange,
    PartitionLog,
    RecordTooLarge,
)
from kraftlab.node.storage.partition.manager import LogManager

__all__ = [
    "AppendInfo",
    "InvalidRecords",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordTooLarge",
]
