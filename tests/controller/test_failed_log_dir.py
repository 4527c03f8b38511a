"""A failed log directory (KIP-858's OfflineLogDirs): brokers register their log directories, new
replicas are placed on them (PartitionRecord's Directories), and when a broker's heartbeat reports
one offline the controller records it and moves leadership and ISR places off the replicas there,
and only there; they stay ineligible until the broker registers with the directory back."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterable

import pytest
from controller_harness import Harness
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.errors import ErrorCode

import kraftlab.node.controller.cluster as cluster
from kraftlab.checker.metadata.decode import decode as checker_decode
from kraftlab.checker.metadata.model import Breach, ImageModel
from kraftlab.node.controller import ControllerConfig
from kraftlab.node.controller.log_dirs import handle_offline_dirs, lost_replicas, place_replicas, rehome
from kraftlab.node.controller.write import Write
from kraftlab.node.metadata.image import UNASSIGNED_DIR, MetadataImage
from kraftlab.node.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode,
    encode,
)

DIRS = {b: (uuid.UUID(int=1000 + 10 * b), uuid.UUID(int=1001 + 10 * b)) for b in (1, 2, 3)}


def start(h: Harness) -> dict[int, int]:
    epochs = {}
    for b in (1, 2, 3):
        r = h.run(dataclasses.replace(h.registration(b), log_dirs=DIRS[b]))
        assert r.error_code == ErrorCode.none
        epochs[b] = r.broker_epoch
    for b, e in epochs.items():
        assert not h.heartbeat(b, e).is_fenced
    return epochs


def offline(h: Harness, b: int, epoch: int, *dirs: uuid.UUID) -> object:
    return h.run(BrokerHeartbeatRequest(broker_id=b, broker_epoch=epoch,
                                        current_metadata_offset=h.active().committed_offset,
                                        want_fence=False, want_shut_down=False, offline_log_dirs=dirs))


def test_replicas_are_placed_on_the_brokers_directories(h: Harness) -> None:
    start(h)
    assert h.image().brokers[1].log_dirs == DIRS[1]
    h.create("t", assignments={0: [1, 2], 1: [1, 3], 2: [2, 1]})
    parts = h.image().topic("t").partitions
    assert parts[0].directories == (DIRS[1][0], DIRS[2][0])
    assert parts[1].directory(1) == DIRS[1][1] and parts[1].directory(3) == DIRS[3][1]
    assert parts[2].directory(1) == DIRS[1][0]
    assert h.image().replica_online(parts[0], 1)


def test_an_offline_directory_moves_leadership_and_isr_off_its_replicas_only(h: Harness) -> None:
    e = start(h)
    h.create("t", assignments={0: [1, 2], 1: [1, 3], 2: [2, 1]})
    failed = DIRS[1][0]  # holds broker 1's replicas of partitions 0 and 2
    r = offline(h, 1, e[1], failed)
    assert r.error_code == ErrorCode.none and not r.is_fenced  # the broker itself stays in service
    image = h.active().committed_image
    parts = image.topic("t").partitions
    assert image.brokers[1].log_dirs == (DIRS[1][1],)
    assert (parts[0].leader, parts[0].isr) == (2, (2,))
    assert parts[2].leader == 2 and 1 not in parts[2].isr
    assert (parts[1].leader, parts[1].isr) == (1, (1, 3))  # on the healthy directory: untouched
    assert not image.replica_online(parts[0], 1) and image.replica_online(parts[1], 1)
    # not back into the ISR of a partition whose replica is on the failed directory
    refused = h.alter_isr(2, e[2], "t", 0, [2, 1])
    assert refused.topics[0].partitions[0].error_code == ErrorCode.ineligible_replica
    # nor leader when the other replica goes away: the partition has no leader instead
    h.run(BrokerHeartbeatRequest(broker_id=2, broker_epoch=e[2], current_metadata_offset=h.active().committed_offset,
                                 want_fence=True, want_shut_down=False))
    assert h.image().topic("t").partitions[0].leader == -1
    # reported again: nothing more to write
    before = h.active().committed_offset
    offline(h, 1, e[1], failed)
    assert h.active().committed_offset == before


def test_the_directory_is_back_when_the_broker_registers_again(h: Harness) -> None:
    e = start(h)
    h.create("t", assignments={0: [1, 2]})
    offline(h, 1, e[1], DIRS[1][0])
    h.tick(10_000)  # the process restarts: its session expires (broker 2 keeps its own)
    assert h.heartbeat(2, e[2]).error_code == ErrorCode.none
    again = h.run(dataclasses.replace(h.registration(1, incarnation=uuid.UUID(int=77)), log_dirs=DIRS[1]))
    assert again.error_code == ErrorCode.none
    h.heartbeat(1, again.broker_epoch)
    p = h.image().topic("t").partitions[0]
    assert h.image().replica_online(p, 1)
    assert h.alter_isr(2, e[2], "t", 0, [2, 1]).topics[0].partitions[0].error_code == ErrorCode.none


def test_records_and_snapshot_keep_directories() -> None:
    tid = uuid.uuid4()
    image = MetadataImage()
    image.apply(RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=0, log_dirs=DIRS[1]))
    rec = PartitionRecord(partition_id=0, topic_id=tid, replicas=(1,), isr=(1,), leader=1, leader_epoch=0,
                          partition_epoch=0, directories=(DIRS[1][1],))
    assert decode(encode(rec)) == rec
    assert place_replicas(image, (1, 2), 3) == (DIRS[1][1], UNASSIGNED_DIR)
    assert place_replicas(MetadataImage(), (1, 2), 0) == ()  # no directories registered: none recorded
    image.apply(TopicRecord(name="t", topic_id=tid))
    image.apply(rec)
    rebuilt = MetadataImage.from_records(image.to_records())
    assert rebuilt == image and rebuilt.topics[tid].partitions[0].directories == (DIRS[1][1],)
    assert rebuilt.brokers[1].log_dirs == DIRS[1]


def judged(h: Harness) -> tuple[ImageModel, list[Breach]]:
    """The harness's committed log through the metadata checker's model, record by record."""
    model, breaches = ImageModel(), []
    for batch in h.q.batches:
        for i, record in enumerate(batch.records):
            if record.value is not None and not batch.control:
                breaches += model.apply(checker_decode(record.value), batch.base_offset + i)
    return model, breaches


def test_the_metadata_checker_finds_the_controllers_log_valid(h: Harness) -> None:
    e = start(h)
    h.create("t", assignments={0: [1, 2], 1: [1, 3], 2: [2, 1]})
    offline(h, 1, e[1], DIRS[1][0])
    h.run(BrokerHeartbeatRequest(broker_id=2, broker_epoch=e[2], current_metadata_offset=h.active().committed_offset,
                                 want_fence=True, want_shut_down=False))
    model, breaches = judged(h)
    assert breaches == []
    assert model.brokers[1].log_dirs == [str(DIRS[1][1])]
    assert model.partitions[(str(h.image().topic("t").topic_id), 0)].directories[0] == str(DIRS[1][0])


def test_a_replica_a_reassignment_adds_is_placed_and_moved_off_a_failed_directory(h: Harness) -> None:
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    e = start(h)
    h.create("t", assignments={0: [2]})
    r = h.run(AlterPartitionReassignmentsRequest(timeout=0, topics=(ReassignableTopic(
        name="t", partitions=(ReassignablePartition(partition_index=0, replicas=(2, 3)),)),)))
    assert r.responses[0].partitions[0].error_code == ErrorCode.none
    p = h.image().topic("t").partitions[0]
    assert p.directory(2) == DIRS[2][0] and p.directory(3) == DIRS[3][0]  # 2 keeps its, 3 is placed
    h.alter_isr(2, e[2], "t", 0, [2, 3])
    offline(h, 3, e[3], DIRS[3][0])
    assert 3 not in h.image().topic("t").partitions[0].isr


def test_the_directory_is_recorded_offline_after_its_replicas_left_isrs_and_leaderships(h: Harness) -> None:
    """Kafka's order: a heartbeat's records may span batches, so the BrokerRegistrationChangeRecord
    comes after every partition change, never showing the directory offline while a replica leads there."""
    e = start(h)
    h.create("t", assignments={0: [1, 2], 1: [3, 1], 2: [2, 1]})
    before = sum(len(b.records) for b in h.q.batches)
    offline(h, 1, e[1], DIRS[1][0])
    written = [decode(r.value) for b in h.q.batches for r in b.records if r.value is not None and not b.control]
    kinds = [type(r) for r in written[before:]]
    assert kinds[-1] == BrokerRegistrationChangeRecord and len(kinds) >= 2
    assert set(kinds[:-1]) == {PartitionChangeRecord}


def test_the_metadata_checker_catches_a_directory_recorded_offline_before_its_replicas_moved(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def registration_first(w: Write, broker_id: int, epoch: int, offline: Iterable[uuid.UUID]) -> list[str]:
        n = len(w.records)
        moved = handle_offline_dirs(w, broker_id, epoch, offline)
        w.records[n:] = [*w.records[-1:], *w.records[n:-1]]
        return moved

    monkeypatch.setattr(cluster, "handle_offline_dirs", registration_first)
    e = start(h)
    h.create("t", assignments={0: [1, 2], 1: [3, 1]})
    offline(h, 1, e[1], DIRS[1][0])
    assert {b.rule for b in judged(h)[1]} == {"FailedDirectoryLeavesIsr"}


def test_a_replica_placed_anew_is_a_partition_change_like_any_other() -> None:
    """The record placing a broker's replica on a new directory (its disk formatted anew) elects as
    PartitionChangeBuilder does: here the remembered last ISR member, eligible again, leads."""
    tid, new_dir = uuid.uuid4(), uuid.UUID(int=99)
    image = MetadataImage()
    for b, dirs in ((1, DIRS[1]), (2, (new_dir,))):
        image.apply(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.uuid4(), broker_epoch=b, log_dirs=dirs))
        image.apply(UnfenceBrokerRecord(id=b, epoch=b))
    image.apply(TopicRecord(name="t", topic_id=tid))
    image.apply(PartitionRecord(partition_id=0, topic_id=tid, replicas=(2, 1), isr=(), leader=-1, leader_epoch=3,
                                partition_epoch=5, last_known_elr=(1,), directories=(DIRS[2][0], DIRS[1][0])))
    w = Write(image, ControllerConfig(node_id=9, cluster_id="c"), 0, 10, random.Random(0))
    rehome(w, 2, lost_replicas(image, 2))
    assert w.records == [PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(1,), leader=1, last_known_elr=(),
                                               directories=(new_dir, DIRS[1][0]))]
