"""A partition log's settings under Kafka's names: topic keys (`segment.bytes`, `retention.ms`, …)
over the broker's `log.*` defaults, as Kafka's LogConfig resolves them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

# topic key -> (broker key(s), Kafka's default); the first broker key present wins
_KEYS: dict[str, tuple[tuple[str, ...], int | str]] = {
    "segment.bytes": (("log.segment.bytes",), 1 << 30),
    "segment.ms": (("log.roll.ms", "log.roll.hours"), 7 * 24 * 3600 * 1000),
    "retention.ms": (("log.retention.ms", "log.retention.minutes", "log.retention.hours"), 7 * 24 * 3600 * 1000),
    "retention.bytes": (("log.retention.bytes",), -1),
    "flush.messages": (("log.flush.interval.messages",), (1 << 63) - 1),
    "flush.ms": (("log.flush.interval.ms",), (1 << 63) - 1),
    "index.interval.bytes": (("log.index.interval.bytes",), 4096),
    "max.message.bytes": (("message.max.bytes",), 1048588),
    "min.insync.replicas": (("min.insync.replicas",), 1),
    "message.timestamp.type": (("log.message.timestamp.type",), "CreateTime"),
    "unclean.leader.election.enable": (("unclean.leader.election.enable",), "false"),
}
_SCALE = {"log.roll.hours": 3600 * 1000, "log.retention.minutes": 60 * 1000, "log.retention.hours": 3600 * 1000}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: no time limit
    retention_bytes: int = -1  # -1: no size limit
    flush_messages: int = (1 << 63) - 1
    flush_ms: int = (1 << 63) - 1
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    min_insync_replicas: int = 1
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    unclean_leader_election: bool = False

    @classmethod
    def resolve(cls, broker: Mapping[str, str], topic: Mapping[str, str] | None = None) -> LogConfig:
        """The topic's dynamic configs over the broker's properties over Kafka's defaults.
        Raises ValueError naming the key whose value is not valid."""
        topic = topic or {}
        values: dict[str, int | str] = {}
        for key, (broker_keys, default) in _KEYS.items():
            value: int | str = default
            source = key
            if key in topic:
                value = topic[key]
            else:
                for bk in broker_keys:
                    if bk in broker:
                        source = bk
                        text = broker[bk]
                        value = int(_int(text, bk)) * _SCALE[bk] if bk in _SCALE else text
                        break
            values[key] = value if isinstance(default, str) else _int(str(value), source)
        ts_type = str(values["message.timestamp.type"])
        if ts_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, not {ts_type!r}")
        unclean = str(values["unclean.leader.election.enable"]).lower()
        config = cls(
            segment_bytes=int(values["segment.bytes"]),
            segment_ms=int(values["segment.ms"]),
            retention_ms=int(values["retention.ms"]),
            retention_bytes=int(values["retention.bytes"]),
            flush_messages=int(values["flush.messages"]),
            flush_ms=int(values["flush.ms"]),
            index_interval_bytes=int(values["index.interval.bytes"]),
            max_message_bytes=int(values["max.message.bytes"]),
            min_insync_replicas=int(values["min.insync.replicas"]),
            log_append_time=ts_type == "LogAppendTime",
            unclean_leader_election=unclean == "true",
        )
        for name, low in (
            ("segment_bytes", 14),
            ("segment_ms", 1),
            ("flush_messages", 1),
            ("flush_ms", 0),
            ("index_interval_bytes", 0),
            ("max_message_bytes", 0),
            ("min_insync_replicas", 1),
        ):
            if getattr(config, name) < low:
                raise ValueError(f"{name.replace('_', '.')} must be at least {low}, not {getattr(config, name)}")
        return config

    def with_(self, **changes: object) -> LogConfig:
        return replace(self, **changes)  # type: ignore[arg-type]  # field names checked by dataclasses


def _int(text: str, key: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{key} must be an integer, not {text!r}") from None
