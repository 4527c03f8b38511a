"""The bootstrap checkpoint of a dynamic quorum (KIP-853): the snapshot 0-0 of `__cluster_metadata-0`.

`kraft-node format --standalone` or `--initial-controllers` writes it, as `kafka-storage format`
does: a snapshot with id 0-0 whose header batch carries the KRaftVersionRecord (kraft.version 1)
and the VotersRecord of the first voters, and no data records. It is how a controller of a
dynamic quorum learns the voter set before its log holds any VotersRecord;
`--no-initial-controllers` writes none (the node learns the set from the leader's log), and the
static mode (`controller.quorum.voters`) writes none either.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from kraftlab.node.kafka_uuid import parse_kafka_uuid
from kraftlab.node.raft.membership.log_voters import ControlRecordState
from kraftlab.node.raft.membership.records import KRAFT_VERSION_1, kraft_version_record, voters_record
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.storage.errors import CorruptSnapshot
from kraftlab.node.storage.snapshots import DiskSnapshotStore

BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """What a bootstrap checkpoint says: the kraft.version and the first voter set."""

    kraft_version: int
    voters: VoterSet


def bootstrap_path(metadata_log_dir: str | Path) -> Path:
    return DiskSnapshotStore.in_log_dir(metadata_log_dir).path(BOOTSTRAP_SNAPSHOT_ID)


def write_bootstrap_checkpoint(metadata_log_dir: str | Path, voters: VoterSet, append_time_ms: int) -> Path:
    """Write the 0-0 checkpoint for `voters` (each with a directory id) durably; returns its path."""
    store = DiskSnapshotStore.in_log_dir(metadata_log_dir)
    path = store.path(BOOTSTRAP_SNAPSHOT_ID)
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    store.write(
        BOOTSTRAP_SNAPSHOT_ID, [], append_time_ms, [kraft_version_record(KRAFT_VERSION_1), voters_record(voters)]
    )
    return path


def read_bootstrap_checkpoint(metadata_log_dir: str | Path) -> Bootstrap | None:
    """The bootstrap checkpoint's kraft.version and voters; None if there is none; CorruptSnapshot
    if it is damaged or carries no voter set."""
    store = DiskSnapshotStore.in_log_dir(metadata_log_dir)
    if not store.path(BOOTSTRAP_SNAPSHOT_ID).exists():
        return None
    state = ControlRecordState(VoterSet([]))
    path = str(store.path(BOOTSTRAP_SNAPSHOT_ID))
    records = store.read_control_records(BOOTSTRAP_SNAPSHOT_ID)
    try:
        state.reset_to_snapshot(records)
    except ValueError as e:
        raise CorruptSnapshot(path, str(e)) from None
    if len(state.latest_voters) == 0:
        raise CorruptSnapshot(path, "a bootstrap checkpoint without a VotersRecord")
    return Bootstrap(state.kraft_version, state.latest_voters)


_INITIAL_CONTROLLER = re.compile(
    r"^(?P<id>\d+)@(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:@\[\]]+)):(?P<port>\d+):(?P<dir>[^:]+)$"
)


def parse_initial_controllers(text: str, listener_name: str) -> VoterSet:
    """`--initial-controllers 'id@host:port:directory-id,...'` (Kafka's syntax, directory ids in
    Kafka's base64 form) as a voter set whose endpoints are named `listener_name` (the first of
    `controller.listener.names`); ValueError naming the first bad entry."""
    voters: list[Voter] = []
    for item in [part.strip() for part in text.split(",")]:
        m = _INITIAL_CONTROLLER.match(item)
        if m is None:
            raise ValueError(f"--initial-controllers: {item!r} is not id@host:port:directory-id")
        port = int(m.group("port"))
        if port > 65535:
            raise ValueError(f"--initial-controllers: port {port} out of range in {item!r}")
        directory_id = parse_kafka_uuid(m.group("dir"), f"directory id in {item!r}")
        if directory_id.int < 100:
            raise ValueError(f"--initial-controllers: {item!r} uses a reserved directory id")
        host = m.group("v6") or m.group("host")
        voters.append(Voter(int(m.group("id")), directory_id, (Endpoint(listener_name, host, port),)))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ValueError(f"--initial-controllers: a node id appears twice in {text!r}")
    dirs = [v.directory_id for v in voters]
    if len(set(dirs)) != len(dirs):
        raise ValueError(f"--initial-controllers: a directory id appears twice in {text!r}")
    return VoterSet(voters)


def standalone_voters(node_id: int, directory_id: uuid.UUID, endpoints: tuple[Endpoint, ...]) -> VoterSet:
    """`--standalone`: this controller alone, with its metadata directory's id and its controller endpoints."""
    if not endpoints:
        raise ValueError("--standalone: this node has no controller listener to advertise")
    return VoterSet([Voter(node_id, directory_id, endpoints)])
