"""What is durable on the backing directory, and the rollback a crash performs.

The backing directory always holds the *current* state (what readers see), so the filesystem is a
plain passthrough; this module keeps what is needed to go back to the *durable* state:

- per file (backing inode): its durable size and the pre-image of every durable block overwritten
  or cut since its last fsync (blocks of `BLOCK` bytes; appends past the durable size need none);
- per directory (backing inode): its entries (name → inode) as of its last fsync, taken just
  before its first change after that fsync;
- a stash (`STASH`, a hidden directory of the backing root, hard links and moved directories
  named by inode) holding every file or directory whose last changed name went away, so a crash
  can put back a durable name whose entry was unlinked, renamed away or replaced.

`crash()` restores the directories' durable entries, then the files' durable bytes, and forgets
everything: after it the backing directory is exactly what a power loss would have left.
Directories are restored top-down; a directory whose own name was not durable vanishes with
everything in it, as it would on a disk.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 4096
STASH = ".kraftlab-diskfs-stash"


@dataclass
class FileUndo:
    """How to bring one file back to its durable content."""

    durable_size: int
    preimages: dict[int, bytes] = field(default_factory=dict)
    """Block number → the block's durable bytes (only blocks below `durable_size`)."""


@dataclass(frozen=True, slots=True)
class CrashReport:
    """What a crash dropped, for the nemesis's history."""

    files_rolled_back: list[str]
    bytes_dropped: int
    entries_removed: list[str]
    entries_restored: list[str]

    def to_json(self) -> dict[str, object]:
        return {"files_rolled_back": self.files_rolled_back, "bytes_dropped": self.bytes_dropped,
                "entries_removed": self.entries_removed, "entries_restored": self.entries_restored}


class Durability:
    """The undo state of one backing directory. Every hook is called *before* the change it
    announces is applied to the backing directory (so it can read what is about to be lost)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.stash = self.root / STASH
        self.stash.mkdir(exist_ok=True)
        self.files: dict[int, FileUndo] = {}
        self.dirs: dict[int, dict[str, int]] = {}

    # -- hooks --------------------------------------------------------------------------------------

    def before_write(self, ino: int, path: str | Path, offset: int, length: int) -> None:
        undo = self._file(ino, path)
        self._save_blocks(undo, path, offset, offset + length)

    def before_truncate(self, ino: int, path: str | Path, size: int) -> None:
        undo = self._file(ino, path)
        self._save_blocks(undo, path, size, undo.durable_size)

    def created(self, ino: int) -> None:
        """A new file: none of its bytes are durable."""
        self.files[ino] = FileUndo(0)

    def file_synced(self, ino: int) -> None:
        self.files.pop(ino, None)

    def before_dir_change(self, dir_ino: int, dir_path: str | Path) -> None:
        if dir_ino not in self.dirs:
            self.dirs[dir_ino] = self._entries(Path(dir_path))

    def dir_synced(self, dir_ino: int) -> None:
        self.dirs.pop(dir_ino, None)
        self._collect_stash()

    def before_name_gone(self, path: str | Path) -> None:
        """`path` is about to be unlinked or replaced: keep its file (or empty directory) reachable
        in the stash while some directory may still need it back."""
        st = os.lstat(path)
        target = self.stash / str(st.st_ino)
        if os.path.lexists(target):
            return
        if not self._needed(st.st_ino):
            self._forget_if_last_name(st)
            return
        if stat.S_ISDIR(st.st_mode):
            os.rename(path, target)  # rmdir: the caller finds it gone, as it asked
        else:
            os.link(path, target, follow_symlinks=False)

    @property
    def dirty(self) -> bool:
        return bool(self.files or self.dirs)

    # -- the crash ----------------------------------------------------------------------------------

    def crash(self) -> CrashReport:
        removed: list[str] = []
        restored: list[str] = []
        if self.dirs:
            self._stash_all()
            self._restore_dirs_top_down(removed, restored)
        rolled, dropped = [], 0
        by_ino = self._paths_by_inode()
        for ino, undo in self.files.items():
            path = by_ino.get(ino)
            if path is None or not stat.S_ISREG(os.lstat(path).st_mode):
                continue  # not reachable any more: it went with its non-durable name
            dropped += self._roll_back(path, undo)
            rolled.append(str(path.relative_to(self.root)))
        self.files.clear()
        self.dirs.clear()
        shutil.rmtree(self.stash, ignore_errors=True)
        self.stash.mkdir(exist_ok=True)
        return CrashReport(sorted(rolled), dropped, sorted(removed), sorted(restored))

    def _restore_dir(self, directory: Path, want: dict[str, int], removed: list[str], restored: list[str]) -> None:
        have = self._entries(directory)
        for name, ino in have.items():
            if want.get(name) != ino:
                path = directory / name
                if path.is_dir() and not path.is_symlink():
                    if ino in self._named():
                        os.rename(path, self.stash / str(ino))  # durable elsewhere: moved back later
                    else:
                        shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed.append(str(path.relative_to(self.root)))
        for name, ino in want.items():
            if have.get(name) == ino:
                continue
            source = self.stash / str(ino)
            path = directory / name
            if not os.path.lexists(source):
                continue  # a directory that is not in the stash is where it belongs already
            if source.is_dir() and not source.is_symlink():
                os.rename(source, path)
            else:
                os.link(source, path, follow_symlinks=False)
            restored.append(str(path.relative_to(self.root)))

    def _restore_dirs_top_down(self, removed: list[str], restored: list[str]) -> None:
        """Restore each changed directory that is still reachable, parents first (the tree is
        re-walked after each one, since restoring a parent moves its children)."""
        done: set[int] = set()
        while True:
            by_ino = self._paths_by_inode()
            pending = [(len(by_ino[i].parts), i) for i in self.dirs if i not in done and i in by_ino]
            if not pending:
                return
            _, ino = min(pending)
            done.add(ino)
            self._restore_dir(by_ino[ino], self.dirs[ino], removed, restored)

    def _roll_back(self, path: Path, undo: FileUndo) -> int:
        size = os.lstat(path).st_size
        fd = os.open(path, os.O_WRONLY)
        try:
            for block, data in sorted(undo.preimages.items()):
                os.pwrite(fd, data, block * BLOCK)
            os.ftruncate(fd, undo.durable_size)
        finally:
            os.close(fd)
        return max(0, size - undo.durable_size) + sum(len(d) for d in undo.preimages.values())

    # -- helpers ------------------------------------------------------------------------------------

    def _file(self, ino: int, path: str | Path) -> FileUndo:
        undo = self.files.get(ino)
        if undo is None:
            undo = self.files[ino] = FileUndo(os.stat(path).st_size)
        return undo

    def _save_blocks(self, undo: FileUndo, path: str | Path, start: int, end: int) -> None:
        end = min(end, undo.durable_size)
        if start >= end:
            return
        blocks = [b for b in range(start // BLOCK, (end - 1) // BLOCK + 1) if b not in undo.preimages]
        if not blocks:
            return
        with open(path, "rb") as f:
            for b in blocks:
                f.seek(b * BLOCK)
                undo.preimages[b] = f.read(min(BLOCK, undo.durable_size - b * BLOCK))

    def _entries(self, directory: Path) -> dict[str, int]:
        out = {}
        with os.scandir(directory) as it:
            for e in it:
                if not (directory == self.root and e.name == STASH):
                    out[e.name] = e.inode()
        return out

    def _named(self) -> set[int]:
        """The inodes some changed directory names durably."""
        return {i for entries in self.dirs.values() for i in entries.values()}

    def _needed(self, ino: int) -> bool:
        return ino in self._named()

    def _stash_all(self) -> None:
        """Link every file named in a changed directory into the stash (directories stay put)."""
        for ino in self.dirs:
            path = self._paths_by_inode().get(ino)
            if path is None:
                continue
            for name, child in self._entries(path).items():
                target = self.stash / str(child)
                p = path / name
                if not os.path.lexists(target) and not (p.is_dir() and not p.is_symlink()):
                    os.link(p, target, follow_symlinks=False)

    def _collect_stash(self) -> None:
        """Drop stashed files and directories no durable entry names any more."""
        wanted = {str(i) for i in self._named()}
        with os.scandir(self.stash) as it:
            for e in it:
                if e.name not in wanted:
                    self._forget_if_last_name(e.stat(follow_symlinks=False))
                    if e.is_dir(follow_symlinks=False):
                        shutil.rmtree(e.path, ignore_errors=True)
                    else:
                        os.unlink(e.path)

    def _forget_if_last_name(self, st: os.stat_result) -> None:
        """The last name of a file or directory is going: the kernel may give its inode number to a
        new one, which must not inherit its undo state."""
        if stat.S_ISDIR(st.st_mode):
            self.dirs.pop(st.st_ino, None)
        elif st.st_nlink <= 1:
            self.files.pop(st.st_ino, None)

    def _paths_by_inode(self) -> dict[int, Path]:
        """Every reachable file and directory of the backing tree (the stash excluded), by inode."""
        out = {os.lstat(self.root).st_ino: self.root}
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root and STASH in dirnames:
                dirnames.remove(STASH)
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                out.setdefault(os.lstat(p).st_ino, p)
        return out
