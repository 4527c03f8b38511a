"""The SnapshotStore contract over DiskSnapshotStore and node.sim's MemorySnapshotStore:
what the Raft core relies on when it writes, serves, fetches, freezes and prunes snapshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraftlab.node.raft.ports import OffsetAndEpoch, Record, SnapshotStore
from kraftlab.node.sim.memory import MemorySnapshotStore
from kraftlab.node.storage.snapshots import DiskSnapshotStore

KINDS = ["disk", "memory"]
RECORDS = [Record(f"key{i}".encode(), bytes(range(i % 200))) for i in range(120)] + [Record(None, b"v")]


@pytest.fixture(params=KINDS)
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SnapshotStore]]:
    count = iter(range(100))
    if request.param == "disk":
        yield lambda: DiskSnapshotStore(tmp_path / f"s{next(count)}", max_batch_bytes=512)
    else:
        yield MemorySnapshotStore


def test_write_then_read(new_store: Callable[[], SnapshotStore]) -> None:
    store = new_store()
    assert store.latest() is None and store.ids() == []
    store.write(OffsetAndEpoch(10, 1), RECORDS[:5], 100)
    store.write(OffsetAndEpoch(30, 2), RECORDS, 200)
    assert store.ids() == [OffsetAndEpoch(10, 1), OffsetAndEpoch(30, 2)]
    assert store.latest() == OffsetAndEpoch(30, 2)
    assert store.read_records(OffsetAndEpoch(30, 2)) == RECORDS
    assert store.read_records(OffsetAndEpoch(10, 1)) == RECORDS[:5]


@pytest.mark.parametrize("chunk", [1, 97, 1 << 20])
def test_fetch_in_chunks_then_freeze(new_store: Callable[[], SnapshotStore], chunk: int) -> None:
    leader, follower = new_store(), new_store()
    sid = OffsetAndEpoch(30, 2)
    leader.write(sid, RECORDS, 5)
    size, position = leader.size(sid), 0
    while position < size:
        data = leader.read_bytes(sid, position, chunk)
        assert 0 < len(data) <= chunk
        follower.write_bytes(sid, position, data)
        position += len(data)
    assert follower.ids() == []
    follower.freeze(sid)
    assert follower.ids() == [sid] and follower.read_records(sid) == RECORDS
    assert leader.read_bytes(sid, size, 100) == b""


def test_a_fetch_can_start_over(new_store: Callable[[], SnapshotStore]) -> None:
    leader, follower = new_store(), new_store()
    sid = OffsetAndEpoch(30, 2)
    leader.write(sid, RECORDS, 5)
    follower.write_bytes(sid, 0, leader.read_bytes(sid, 0, 50))
    data = leader.read_bytes(sid, 0, 1 << 20)
    follower.write_bytes(sid, 0, data)
    follower.freeze(sid)
    assert follower.read_records(sid) == RECORDS


def test_freezing_damaged_bytes_fails_and_publishes_nothing(new_store: Callable[[], SnapshotStore]) -> None:
    leader, follower = new_store(), new_store()
    sid = OffsetAndEpoch(30, 2)
    leader.write(sid, RECORDS, 5)
    data = bytearray(leader.read_bytes(sid, 0, 1 << 20))
    data[len(data) // 3] ^= 0x01
    follower.write_bytes(sid, 0, bytes(data))
    with pytest.raises(ValueError):
        follower.freeze(sid)
    assert follower.ids() == [] and follower.latest() is None


def test_delete_before_keeps_the_given_and_newer(new_store: Callable[[], SnapshotStore]) -> None:
    store = new_store()
    for offset in (10, 20, 30):
        store.write(OffsetAndEpoch(offset, 1), RECORDS[:2], 0)
    store.write_bytes(OffsetAndEpoch(40, 1), 0, b"partial")
    store.delete_before(OffsetAndEpoch(20, 1))
    assert store.ids() == [OffsetAndEpoch(20, 1), OffsetAndEpoch(30, 1)]
    with pytest.raises(ValueError):
        store.freeze(OffsetAndEpoch(40, 1))  # the partial one went too
