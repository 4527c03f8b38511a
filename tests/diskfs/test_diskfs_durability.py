"""The rollback of `Durability`, driven directly on a backing directory (no FUSE): after any sequence
of creates, writes, truncates, renames, unlinks and fsyncs, a crash leaves exactly the names made
durable by the last directory fsync, each with the bytes of its file's last fsync."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlab.nemesis.diskfs.durability import BLOCK, STASH, Durability

NAMES = ["a", "quorum-state"]


def listing(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != STASH}


class Pair:
    """A backing directory changed through the hooks, and the model of what is durable."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.d = Durability(root)
        self.root_ino = os.lstat(root).st_ino
        self.next_id = 0
        self.names: dict[str, int] = {}  # current name → file id
        self.content: dict[int, bytes] = {}  # file id → current bytes
        self.durable_names: dict[str, int] = {}
        self.durable_content: dict[int, bytes] = {}

    def path(self, name: str) -> Path:
        return self.root / name

    def create(self, name: str) -> None:
        if name in self.names:
            return
        self.d.before_dir_change(self.root_ino, self.root)
        self.path(name).write_bytes(b"")
        self.d.created(os.lstat(self.path(name)).st_ino)
        self.names[name] = self.next_id
        self.content[self.next_id] = b""
        self.durable_content[self.next_id] = b""
        self.next_id += 1

    def write(self, name: str, offset: int, data: bytes) -> None:
        if name not in self.names:
            return
        p = self.path(name)
        self.d.before_write(os.lstat(p).st_ino, p, offset, len(data))
        with open(p, "r+b") as f:
            f.seek(offset)
            f.write(data)
        cur = bytearray(self.content[self.names[name]])
        if offset > len(cur):
            cur.extend(b"\0" * (offset - len(cur)))
        cur[offset:offset + len(data)] = data
        self.content[self.names[name]] = bytes(cur)

    def truncate(self, name: str, size: int) -> None:
        if name not in self.names:
            return
        p = self.path(name)
        self.d.before_truncate(os.lstat(p).st_ino, p, size)
        os.truncate(p, size)
        cur = self.content[self.names[name]]
        self.content[self.names[name]] = cur[:size] + b"\0" * max(0, size - len(cur))

    def fsync(self, name: str) -> None:
        if name in self.names:
            self.d.file_synced(os.lstat(self.path(name)).st_ino)
            self.durable_content[self.names[name]] = self.content[self.names[name]]

    def fsync_dir(self) -> None:
        self.d.dir_synced(self.root_ino)
        self.durable_names = dict(self.names)

    def rename(self, old: str, new: str) -> None:
        if old not in self.names or old == new:
            return
        self.d.before_dir_change(self.root_ino, self.root)
        if new in self.names:
            self.d.before_name_gone(self.path(new))
        os.rename(self.path(old), self.path(new))
        self.names[new] = self.names.pop(old)

    def unlink(self, name: str) -> None:
        if name not in self.names:
            return
        self.d.before_dir_change(self.root_ino, self.root)
        self.d.before_name_gone(self.path(name))
        os.unlink(self.path(name))
        del self.names[name]

    def expected_after_crash(self) -> dict[str, bytes]:
        return {n: self.durable_content[i] for n, i in sorted(self.durable_names.items())}


name = st.sampled_from(NAMES)
op = st.one_of(
    st.tuples(st.just("create"), name),
    st.tuples(st.just("fsync"), name),
    st.tuples(st.just("fsync_dir")),
    st.tuples(st.just("write"), name, st.integers(0, 3 * BLOCK), st.binary(min_size=1, max_size=BLOCK + 7)),
    st.tuples(st.just("truncate"), name, st.integers(0, 2 * BLOCK)),
    st.tuples(st.just("fsync"), name),
    st.tuples(st.just("fsync_dir")),
    st.tuples(st.just("rename"), name, name),
    st.tuples(st.just("unlink"), name),
)


@settings(max_examples=300)
@given(st.lists(op, max_size=30), st.lists(op, max_size=15))
def test_a_crash_leaves_exactly_what_was_made_durable(before: list[tuple], after: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pair = Pair(Path(tmp))
        for o in before:
            getattr(pair, o[0])(*o[1:])
        pair.d.crash()
        assert listing(pair.root) == pair.expected_after_crash()
        pair.names = dict(pair.durable_names)  # the model restarts from the durable state
        pair.content = {i: pair.durable_content[i] for i in pair.names.values()}
        for o in after:  # and a second life crashes correctly too
            getattr(pair, o[0])(*o[1:])
        pair.d.crash()
        assert listing(pair.root) == pair.expected_after_crash()
        assert not pair.d.dirty
        assert list((pair.root / STASH).iterdir()) == []


def test_an_unsynced_rename_over_a_file_brings_the_old_file_back(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.create("quorum-state")
    pair.write("quorum-state", 0, b'{"leaderEpoch": 1}')
    pair.fsync("quorum-state")
    pair.fsync_dir()
    pair.create("a")  # the tmp file
    pair.write("a", 0, b'{"leaderEpoch": 2}')
    pair.rename("a", "quorum-state")  # no fsync of the file nor of the directory
    assert (tmp_path / "quorum-state").read_bytes() == b'{"leaderEpoch": 2}'
    report = pair.d.crash()
    assert listing(tmp_path) == {"quorum-state": b'{"leaderEpoch": 1}'}
    assert report.entries_restored == ["quorum-state"]


def test_a_created_file_whose_directory_was_never_synced_vanishes(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.create("a")
    pair.write("a", 0, b"x" * 100)
    pair.fsync("a")  # the data, but not the name
    pair.d.crash()
    assert listing(tmp_path) == {}


def test_subdirectories_roll_back_top_down(tmp_path: Path) -> None:
    d = Durability(tmp_path)
    root_ino = os.lstat(tmp_path).st_ino
    d.before_dir_change(root_ino, tmp_path)
    (tmp_path / "part").mkdir()
    part_ino = os.lstat(tmp_path / "part").st_ino
    d.before_dir_change(part_ino, tmp_path / "part")
    d.dir_synced(root_ino)  # 'part' is durable, nothing in it is
    d.before_dir_change(part_ino, tmp_path / "part")
    (tmp_path / "part" / "seg.log").write_bytes(b"abc")
    d.created(os.lstat(tmp_path / "part" / "seg.log").st_ino)
    d.before_dir_change(root_ino, tmp_path)
    (tmp_path / "new").mkdir()  # never durable, with a file in it
    (tmp_path / "new" / "x").write_bytes(b"x")
    report = d.crash()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != STASH) == ["part"]
    assert list((tmp_path / "part").iterdir()) == []
    assert set(report.entries_removed) == {"new", "part/seg.log"}
