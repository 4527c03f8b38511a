"""LogManager: the partition logs of a broker across `log.dirs`, as Kafka's LogManager keeps them.

On start every `<topic>-<partition>` directory of every log dir is opened and recovered (a
partition found in two dirs is an error); a new partition goes to the dir holding the fewest
partitions. Each dir's `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` (high-water marks) are written by `checkpoint` and read on start.
`tick` applies the flush policy (`flush.ms`) and retention; the owner calls it now and then.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kraftlab.node.storage.atomic import make_dirs_durably
from kraftlab.node.storage.log_dir_health import directory_ids
from kraftlab.node.storage.partition.config import LogConfig
from kraftlab.node.storage.partition.files import read_offset_checkpoint, write_offset_checkpoint
from kraftlab.node.storage.partition.layout import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_partition_dir,
    partition_dir_name,
)
from kraftlab.node.storage.partition.log import PartitionLog

TopicPartition = tuple[str, int]
ConfigFor = Callable[[str], LogConfig]


class LogManager:
    def __init__(self, log_dirs: Sequence[Path], config_for: ConfigFor) -> None:
        if not log_dirs:
            raise ValueError("log.dirs names no directory")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config_for = config_for
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._by_id: dict[uuid.UUID, Path] | None = None

    def startup(self, now_ms: int) -> list[PartitionLog]:
        """Open every partition found in the log dirs; the logs opened."""
        found: dict[TopicPartition, Path] = {}
        for d in self.log_dirs:
            make_dirs_durably(d)
            starts = read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            hws = read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
            for p in sorted(d.iterdir()):
                tp = parse_partition_dir(p.name) if p.is_dir() else None
                if tp is None:
                    continue
                if tp in found:
                    raise ValueError(f"partition {tp[0]}-{tp[1]} is in two log dirs: {found[tp]} and {d}")
                found[tp] = d
                self.logs[tp] = PartitionLog.open(
                    p, tp[0], tp[1], self.config_for(tp[0]), now_ms,
                    log_start_offset=starts.get(tp, 0), high_watermark=hws.get(tp, 0),
                )  # fmt: skip
                self._dir_of[tp] = d
        return list(self.logs.values())

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, topic_id: uuid.UUID | None, now_ms: int,
                      directory: uuid.UUID | None = None) -> PartitionLog:
        """An existing log stays where it is; a new one goes to the directory whose id is
        `directory` (the controller's placement) when it is one of log.dirs, else to the least used."""
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        if self._by_id is None:
            self._by_id = {i: p for p, i in directory_ids(self.log_dirs).items()}
        placed = self._by_id.get(directory) if directory is not None else None
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        home = placed or min(self.log_dirs, key=lambda d: counts[d])  # ties: the first listed
        log = PartitionLog.open(
            home / partition_dir_name(topic, partition),
            topic,
            partition,
            self.config_for(topic),
            now_ms,
            topic_id=topic_id,
        )
        self.logs[tp] = log
        self._dir_of[tp] = home
        return log

    def reconfigure(self, topic: str) -> None:
        """The topic's configs changed: its logs take the new LogConfig."""
        config = self.config_for(topic)
        for (t, _), log in self.logs.items():
            if t == topic:
                log.config = config

    def delete(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if log is not None:
            log.delete()

    def tick(self, now_ms: int) -> int:
        """The flush policy (`flush.ms`) and retention over every log; segments deleted."""
        deleted = 0
        for log in self.logs.values():
            log.maybe_flush(now_ms)
            deleted += log.delete_expired(now_ms)
        return deleted

    def checkpoint(self) -> None:
        """Write each dir's recovery points, log start offsets and high-water marks."""
        write_checkpoints(self.checkpoint_values())

    def checkpoint_values(self) -> list[tuple[Path, dict[TopicPartition, int], dict[TopicPartition, int],
                                              dict[TopicPartition, int]]]:
        """What `checkpoint` writes, taken now: (dir, recovery points, log starts, HWs) per log dir
        (the writing, with its fsyncs, can then run off the caller's thread)."""
        out = []
        for d in self.log_dirs:
            mine = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == d}
            out.append((d, {tp: lg.recovery_point for tp, lg in mine.items()},
                        {tp: lg.log_start_offset for tp, lg in mine.items()},
                        {tp: lg.high_watermark for tp, lg in mine.items()}))
        return out

    def flush_all(self, now_ms: int) -> None:
        for log in self.logs.values():
            log.flush(now_ms)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))


def broker_config_for(broker: Mapping[str, str], topic_configs: Callable[[str], Mapping[str, str]]) -> ConfigFor:
    """A ConfigFor resolving a topic's dynamic configs over the broker's properties."""
    return lambda topic: LogConfig.resolve(broker, topic_configs(topic))


def write_checkpoints(values: Sequence[tuple[Path, Mapping[TopicPartition, int], Mapping[TopicPartition, int],
                                             Mapping[TopicPartition, int]]]) -> None:
    """Write `LogManager.checkpoint_values()`: each dir's three offset checkpoint files."""
    for d, recovery, starts, hws in values:
        write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, dict(recovery))
        write_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT, dict(starts))
        write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, dict(hws))
