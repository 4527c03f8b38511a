"""A broker's log directories: their ids are registered, a directory that disappears or is
replaced is reported offline in every heartbeat (OfflineLogDirs) and journalled once."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from kraftlab.node.broker.lifecycle import BrokerConfig, BrokerEndpoint, BrokerLifecycle
from kraftlab.node.storage.log_dir_health import directory_ids, offline
from kraftlab.node.storage.meta_properties import format_dirs


def test_a_missing_or_replaced_directory_is_offline(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    format_dirs([a, b, c], "q1Sh-9_ISia_zwGINzRvyQ", 4)
    ids = directory_ids([a, b, c, tmp_path / "unformatted"])
    assert set(ids) == {a, b, c} and len(set(ids.values())) == 3
    assert offline(ids) == set()
    shutil.rmtree(a)
    shutil.rmtree(b)
    format_dirs([b], "q1Sh-9_ISia_zwGINzRvyQ", 4)  # another disk mounted in its place
    assert offline(ids) == {ids[a], ids[b]}


def test_offline_directories_go_in_every_heartbeat() -> None:
    dirs = (uuid.UUID(int=500), uuid.UUID(int=501))
    life = BrokerLifecycle(BrokerConfig(node_id=4, cluster_id="c", incarnation_id=uuid.UUID(int=9),
                                        listeners=(BrokerEndpoint("PLAINTEXT", "h", 1),), log_dirs=dirs))
    assert life._registration().log_dirs == dirs
    life.report_offline_log_dirs([dirs[1]])
    life.report_offline_log_dirs([dirs[1]])
    assert life._heartbeat(0).offline_log_dirs == (dirs[1],)
    events = [o for o in life.take_outputs() if getattr(o, "ev", None) == "log_dir_failed"]
    assert [e.fields["directory"] for e in events] == [str(dirs[1])]


def test_a_new_partition_log_goes_where_the_controller_placed_the_replica(tmp_path: Path) -> None:
    from kraftlab.node.storage.partition import LogConfig, LogManager

    a, b = tmp_path / "a", tmp_path / "b"
    format_dirs([a, b], "q1Sh-9_ISia_zwGINzRvyQ", 4)
    ids = directory_ids([a, b])
    mgr = LogManager([a, b], lambda topic: LogConfig.resolve({}))
    mgr.startup(0)
    for p in range(3):  # all in b, though a is emptier: the placement wins
        mgr.get_or_create("orders", p, uuid.uuid4(), 0, directory=ids[b])
    mgr.get_or_create("orders", 3, uuid.uuid4(), 0, directory=uuid.UUID(int=0))  # unassigned: least used
    assert [mgr.dir_of("orders", p) for p in range(4)] == [b, b, b, a]
    mgr.close()


def test_a_replica_on_a_failed_directory_is_offline_on_its_broker(tmp_path: Path) -> None:
    from replication_helpers import image_with, manager

    from kraftlab.node.metadata.image import BrokerInfo, PartitionInfo

    good, bad = uuid.UUID(int=601), uuid.UUID(int=602)
    image = image_with(partitions={
        0: PartitionInfo((1, 2), (2,), leader=2, leader_epoch=1, directories=(bad, good)),
        1: PartitionInfo((1, 2), (1, 2), leader=1, leader_epoch=0, directories=(good, good)),
    })
    image.brokers[1] = BrokerInfo(1, 5, uuid.UUID(int=1), (), (), None, False, False, log_dirs=(good,))
    m = manager(tmp_path)
    m.apply_image(image, 0)
    assert set(m.partitions) == {("t", 1)}  # partition 0's replica here is on the failed directory
