"""Opening a node's storage at start-up: meta.properties checked in every log dir, the metadata log
recovered (recovery events journalled; corruption below the high-water mark stops the node), the
quorum-state file and the snapshot store."""

import logging
from dataclasses import dataclass

from kraftlab.node.config import NodeConfig
from kraftlab.node.journal import Journal
from kraftlab.node.process.seam import StartupError
from kraftlab.node.raft.ports import LogCorruption
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.meta_properties import MetaProperties, NotFormatted, load_and_validate
from kraftlab.node.storage.quorum_state import FileQuorumStateStore
from kraftlab.node.storage.snapshots import DiskSnapshotStore

log = logging.getLogger("kraft-node")

# ---------------------------------------------------------------------------------------------
# Storage


@dataclass(slots=True)
class Storage:
    meta: MetaProperties
    log: DiskLog
    quorum: FileQuorumStateStore
    snapshots: DiskSnapshotStore

    def close(self) -> None:
        self.log.close()


def journal_corruption(journal: Journal, error: LogCorruption, path: str) -> None:
    """The `corruption` event for damage the node refuses to serve (always below the high-water mark)."""
    journal.write(
        "corruption",
        path=getattr(error, "path", path),
        offset=getattr(error, "offset", -1),
        reason=getattr(error, "reason", str(error)),
        below_hw=True,
    )


FORMAT_HINT = "format them with `kraft-node format --config ... --cluster-id ...`"


def open_storage(config: NodeConfig, journal: Journal) -> Storage:
    """Check meta.properties in every log dir, then open and recover the metadata log."""
    try:
        meta = load_and_validate(config.all_log_dirs, config.node_id)
    except NotFormatted as e:
        if config.is_controller and config.voter(config.node_id) is not None:
            raise StartupError(
                f"{e}. Node {config.node_id} is a voter of the metadata quorum (controller.quorum.voters): format "
                "it only for a new cluster. A voter that lost its metadata directory must not be formatted anew "
                "in place: it would rejoin as an empty voter that may vote twice in an epoch or help elect a "
                "leader that lacks committed records; replace its disk as KIP-853 does (remove the voter, "
                "format the new directory with a new directory.id, add it back as a new voter)") from e
        raise StartupError(f"{e} ({FORMAT_HINT})") from e
    except (StorageError, ValueError) as e:
        raise StartupError(f"{e} ({FORMAT_HINT})") from e
    snapshots = DiskSnapshotStore.in_log_dir(config.metadata_log_dir)
    try:
        disk_log = DiskLog.open(
            config.metadata_log_dir,
            segment_bytes=config.metadata_log_segment_bytes,
            snapshot_id=snapshots.latest(),
        )
    except LogCorruption as e:
        journal_corruption(journal, e, str(config.metadata_log_dir))
        raise StartupError(f"metadata log corrupt: {e}") from e
    for event in disk_log.recovery.journal_events():
        fields = dict(event)
        journal.write(str(fields.pop("ev")), **fields)
    quorum = FileQuorumStateStore.in_log_dir(
        config.metadata_log_dir, config.bugs
    )
    return Storage(meta, disk_log, quorum, snapshots)
