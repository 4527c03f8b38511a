"""Kafka's small partition files: offset checkpoints (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `replication-offset-checkpoint`), `leader-epoch-checkpoint` and
`partition.metadata`, each replaced atomically; an unparsable file raises CorruptStateFile."""

from __future__ import annotations

import uuid
from pathlib import Path

from kraftlab.node.kafka_uuid import parse_kafka_uuid, uuid_to_kafka
from kraftlab.node.storage.atomic import write_atomically
from kraftlab.node.storage.errors import CorruptStateFile

VERSION = 0


def _read_lines(path: Path) -> list[str] | None:
    """The entry lines of a `version / count / entries` checkpoint; None if the file is absent."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptStateFile(str(path), "not ASCII text") from None
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "":
        raise CorruptStateFile(str(path), f"truncated checkpoint {text[:80]!r}")
    if lines[0] != str(VERSION):
        raise CorruptStateFile(str(path), f"unsupported version {lines[0]!r}")
    if not lines[1].isdigit() or int(lines[1]) != len(lines) - 3:
        raise CorruptStateFile(str(path), f"entry count {lines[1]!r} disagrees with {len(lines) - 3} entries")
    return lines[2:-1]


def _write_lines(path: Path, entries: list[str]) -> None:
    write_atomically(path, "".join(f"{line}\n" for line in [str(VERSION), str(len(entries)), *entries]).encode())


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`topic partition offset` entries of a log dir's offset checkpoint ({} if absent)."""
    out: dict[tuple[str, int], int] = {}
    for line in _read_lines(path) or []:
        fields = line.split(" ")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].lstrip("-").isdigit():
            raise CorruptStateFile(str(path), f"bad entry {line!r}")
        out[(fields[0], int(fields[1]))] = int(fields[2])
    return out


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    _write_lines(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """`epoch start-offset` entries of a leader-epoch-checkpoint (None if absent)."""
    lines = _read_lines(path)
    if lines is None:
        return None
    out = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise CorruptStateFile(str(path), f"bad entry {line!r}")
        out.append((int(fields[0]), int(fields[1])))
    return out


def write_leader_epoch_checkpoint(path: Path, entries: list[tuple[int, int]]) -> None:
    _write_lines(path, [f"{e} {o}" for e, o in entries])


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    """The topic id of a `partition.metadata` file (None if absent)."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptStateFile(str(path), "not ASCII text") from None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if fields.get("version") != str(VERSION) or "topic_id" not in fields:
        raise CorruptStateFile(str(path), f"expected version 0 and a topic_id, got {text[:80]!r}")
    try:
        return parse_kafka_uuid(fields["topic_id"], "topic_id")
    except ValueError as e:
        raise CorruptStateFile(str(path), str(e)) from None


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    write_atomically(path, f"version: {VERSION}\ntopic_id: {uuid_to_kafka(topic_id)}\n".encode())
