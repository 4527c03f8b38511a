"""The node's own storage on the disk-fault filesystem: what it acknowledged as durable survives a
power loss, what it never fsynced does not, and the zoo's fsync bugs show through the filesystem
(no switch in the node)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.ports import Batch, QuorumStateData, Record
from kraftlab.node.storage.log import DiskLog
from kraftlab.node.storage.quorum_state import FileQuorumStateStore
from kraftlab.testing.diskfs_mounts import mounted

from . import needs_fuse

pytestmark = needs_fuse

VOTE_1 = QuorumStateData(3, None, 1, (1, 2, 3))
VOTE_2 = QuorumStateData(4, None, 2, (1, 2, 3))


def _batch(base: int, epoch: int) -> Batch:
    return Batch(base, epoch, (Record(f"k{base}".encode(), bytes([base % 251]) * 40),), False, 1_700_000_000_000)


def test_a_vote_in_a_fresh_metadata_directory_survives_a_power_loss(tmp_path: Path) -> None:
    """Found by a generic `kraftlab test --diskfs` run (DurableVote): the partition directory was
    created without an fsync of metadata.log.dir, so a power loss took every vote and the log."""
    with mounted(tmp_path) as m:
        FileQuorumStateStore.in_log_dir(m.mountpoint).write(VOTE_1)
        m.ctl(cmd="crash")
        assert FileQuorumStateStore.in_log_dir(m.mountpoint).read() == VOTE_1


@pytest.mark.parametrize("bugs, survivor", [(NO_BUGS, VOTE_2), (BugSet.of("quorum-state-no-fsync"), VOTE_1)])
def test_quorum_state_no_fsync_forgets_the_last_vote_through_the_filesystem(
        tmp_path: Path, bugs: BugSet, survivor: QuorumStateData) -> None:
    with mounted(tmp_path) as m:
        store = FileQuorumStateStore.in_log_dir(m.mountpoint, bugs)
        store.write(VOTE_1)
        m.ctl(cmd="status")
        FileQuorumStateStore.in_log_dir(m.mountpoint).write(VOTE_1)  # made durable by a correct writer
        store.write(VOTE_2)
        assert store.read() == VOTE_2  # the running process sees its vote either way
        m.ctl(cmd="crash")
        assert FileQuorumStateStore.in_log_dir(m.mountpoint).read() == survivor


def test_the_log_keeps_exactly_its_flushed_batches(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        log = DiskLog.open(m.mountpoint, segment_bytes=300)
        log.append([_batch(0, 1), _batch(1, 1), _batch(2, 1)])
        log.flush()
        log.append([_batch(3, 1), _batch(4, 2), _batch(5, 2), _batch(6, 2)])  # rolls a segment, never flushed
        assert log.end_offset() == 7
        log.close()
        lost = m.ctl(cmd="crash")
        assert lost["bytes_dropped"] > 0
        again = DiskLog.open(m.mountpoint, segment_bytes=300)
        try:
            assert again.end_offset() == 3
            assert [b.base_offset for b in again.read(0, 10_000)] == [0, 1, 2]
        finally:
            again.close()
