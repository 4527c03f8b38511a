"""meta.properties v1 (KIP-631): which cluster and node a log directory belongs to.

`version=1`, `cluster.id=<base64 UUID>`, `node.id=<int>` and `directory.id=<base64 UUID>` in Java
properties syntax, in every log directory (`metadata.log.dir` and each of `log.dirs`). The
directory id (KIP-858, used by KIP-853) names the disk: each directory gets a new random one when
formatted, so a replaced disk is told apart from the one it replaces; directories formatted before
it existed have none. `kraft-node format` writes it;
`kraft-node start` refuses directories that are missing, unformatted, or formatted for another
cluster or node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kraftlab.node.kafka_uuid import parse_kafka_uuid, random_kafka_uuid, uuid_to_kafka
from kraftlab.node.storage.atomic import make_dirs_durably, write_atomically
from kraftlab.node.storage.errors import CorruptStateFile, StorageError
from kraftlab.node.storage.layout import META_PROPERTIES_FILE

VERSION = 1


class NotFormatted(StorageError):
    """A log directory is missing or has no meta.properties: run `kraft-node format` first."""


class AlreadyFormatted(StorageError):
    """`format` found an existing meta.properties (pass --ignore-formatted to skip such directories)."""


class MetaPropertiesMismatch(StorageError):
    """Directories disagree with each other or with the configuration (cluster id or node id)."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    version: int = VERSION
    directory_id: uuid.UUID | None = None


def random_cluster_id() -> str:
    """A new cluster id: a random UUID in Kafka's URL-safe base64 without padding (22 characters)."""
    return random_kafka_uuid()


def random_directory_id() -> uuid.UUID:
    """A new directory id: random, never one of the ids Kafka reserves (the first 100 UUIDs)."""
    while True:
        value = uuid.uuid4()
        if value.int >= 100:
            return value


def validate_cluster_id(cluster_id: str) -> None:
    """Kafka's Uuid.fromString: 22 characters of URL-safe base64 encoding 16 bytes."""
    parse_kafka_uuid(cluster_id, "cluster id")


def encode_meta_properties(props: MetaProperties) -> bytes:
    directory = f"directory.id={uuid_to_kafka(props.directory_id)}\n" if props.directory_id is not None else ""
    return (
        f"#\n#Written by kraft-node format\nversion={props.version}\ncluster.id={props.cluster_id}\n"
        f"node.id={props.node_id}\n{directory}"
    ).encode()


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka writes: `key=value` or `key:value` lines, `#`/`!` comments."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def read_meta_properties(log_dir: str | Path) -> MetaProperties:
    """The directory's meta.properties; NotFormatted if absent, CorruptStateFile if invalid."""
    path = Path(log_dir) / META_PROPERTIES_FILE
    if not Path(log_dir).is_dir():
        raise NotFormatted(f"log directory {log_dir} does not exist: run `kraft-node format` first")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFormatted(f"{log_dir} is not formatted (no {META_PROPERTIES_FILE}): run `kraft-node format`") from None
    except UnicodeDecodeError:
        raise CorruptStateFile(str(path), "not UTF-8 text") from None
    props = parse_properties(text)
    if props.get("version") != str(VERSION):
        raise CorruptStateFile(str(path), f"unsupported version {props.get('version')!r} (expected {VERSION})")
    for key in ("cluster.id", "node.id"):
        if not props.get(key):
            raise CorruptStateFile(str(path), f"{key} is missing")
    try:
        node_id = int(props["node.id"])
        validate_cluster_id(props["cluster.id"])
        directory = props.get("directory.id")
        directory_id = parse_kafka_uuid(directory, "directory.id") if directory else None
    except ValueError as e:
        raise CorruptStateFile(str(path), str(e)) from None
    return MetaProperties(props["cluster.id"], node_id, directory_id=directory_id)


def write_meta_properties(log_dir: str | Path, props: MetaProperties) -> None:
    """Write meta.properties atomically, creating the directory if needed."""
    validate_cluster_id(props.cluster_id)
    make_dirs_durably(log_dir)
    write_atomically(Path(log_dir) / META_PROPERTIES_FILE, encode_meta_properties(props))


def format_dirs(
    log_dirs: Iterable[str | Path],
    cluster_id: str,
    node_id: int,
    ignore_formatted: bool = False,
    directory_ids: Mapping[Path, uuid.UUID] | None = None,
) -> list[Path]:
    """Format every directory (`kraft-node format`) with a new random directory id (or the one
    `directory_ids` gives it); returns the ones written. A directory that is already formatted is
    an error, or skipped with `ignore_formatted` (as Kafka's storage tool)."""
    validate_cluster_id(cluster_id)
    dirs = [Path(d) for d in dict.fromkeys(str(d) for d in log_dirs)]
    todo = []
    for d in dirs:
        if (d / META_PROPERTIES_FILE).exists():
            if not ignore_formatted:
                raise AlreadyFormatted(f"log directory {d} is already formatted (use --ignore-formatted to skip it)")
        else:
            todo.append(d)
    chosen = directory_ids or {}
    for d in todo:
        directory_id = chosen.get(d) or random_directory_id()
        write_meta_properties(d, MetaProperties(cluster_id, node_id, directory_id=directory_id))
    return todo


def load_and_validate(log_dirs: Iterable[str | Path], node_id: int, cluster_id: str | None = None) -> MetaProperties:
    """The common meta.properties of all `log_dirs` (`kraft-node start`): each must be formatted,
    all with one cluster id (equal to `cluster_id` if given) and with `node_id`."""
    found = {str(d): read_meta_properties(d) for d in dict.fromkeys(str(d) for d in log_dirs)}
    if not found:
        raise ValueError("no log directories given")
    for d, props in found.items():
        if props.node_id != node_id:
            raise MetaPropertiesMismatch(
                f"{d} belongs to node {props.node_id} but node.id is {node_id}: wrong directory or configuration"
            )
    clusters = {props.cluster_id for props in found.values()}
    if len(clusters) > 1:
        detail = ", ".join(f"{d}: {p.cluster_id}" for d, p in found.items())
        raise MetaPropertiesMismatch(f"log directories belong to different clusters ({detail})")
    (found_cluster,) = clusters
    if cluster_id is not None and found_cluster != cluster_id:
        raise MetaPropertiesMismatch(f"log directories belong to cluster {found_cluster}, expected {cluster_id}")
    return next(iter(found.values()))
