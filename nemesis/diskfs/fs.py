"""The FUSE operations: a passthrough to the backing directory that tells `Durability` about every
change before it makes it, and asks `FaultTable` whether to fail or delay it.

Inodes are the backing files' own inode numbers (the backing root is FUSE's root inode). The kernel
caches nothing across a crash: entries and attributes have no timeout and an open never keeps the
page cache, so after a rollback every read sees the backing directory as it now is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from kraftlab.nemesis.diskfs.durability import STASH, CrashReport, Durability
from kraftlab.nemesis.diskfs.faults import FaultTable, Rule


def _fail(err: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(err)


class DiskFs(pyfuse3.Operations):
    """One mounted backing directory."""

    enable_writeback_cache = False

    def __init__(self, backing: str | Path, seed: int = 0) -> None:
        super().__init__()
        self.root = Path(backing).resolve()
        self.root_ino = os.lstat(self.root).st_ino
        self.durability = Durability(self.root)
        self.faults = FaultTable(seed)
        self.paths: dict[int, Path] = {pyfuse3.ROOT_INODE: self.root}
        self.open_files: dict[int, int] = {}  # fh (the backing fd) → inode
        self.crashes = 0

    # -- inode and path bookkeeping ------------------------------------------------------------------

    def _ino(self, backing_ino: int) -> int:
        return pyfuse3.ROOT_INODE if backing_ino == self.root_ino else backing_ino

    def _backing_ino(self, ino: int) -> int:
        return self.root_ino if ino == pyfuse3.ROOT_INODE else ino

    def _path(self, ino: int) -> Path:
        try:
            return self.paths[ino]
        except KeyError:
            raise _fail(errno.ESTALE) from None

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    def _child(self, parent: int, name: bytes) -> Path:
        n = os.fsdecode(name)
        if parent == pyfuse3.ROOT_INODE and n == STASH:
            raise _fail(errno.ENOENT)  # the stash is the filesystem's own, never the user's
        return self._path(parent) / n

    def _attr(self, st: os.stat_result) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = self._ino(st.st_ino)
        a.generation = 0
        a.entry_timeout = 0
        a.attr_timeout = 0
        a.st_mode = st.st_mode
        a.st_nlink = st.st_nlink
        a.st_uid = st.st_uid
        a.st_gid = st.st_gid
        a.st_rdev = st.st_rdev
        a.st_size = st.st_size
        a.st_blksize = st.st_blksize
        a.st_blocks = st.st_blocks
        a.st_atime_ns = st.st_atime_ns
        a.st_mtime_ns = st.st_mtime_ns
        a.st_ctime_ns = st.st_ctime_ns
        return a

    def _remember(self, path: Path) -> pyfuse3.EntryAttributes:
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        self.paths[self._ino(st.st_ino)] = path
        return self._attr(st)

    def _check(self, op: str, path: Path) -> None:
        err = self.faults.error(op, self._rel(path))
        if err is not None:
            raise _fail(err)

    def _moved(self, old: Path, new: Path) -> None:
        """A rename: every remembered path at or under `old` is now under `new`."""
        for ino, p in list(self.paths.items()):
            if p == old or old in p.parents:
                self.paths[ino] = new / p.relative_to(old)

    def _rescan(self) -> None:
        """After a crash: the paths of the backing tree as it now is."""
        self.paths = {pyfuse3.ROOT_INODE: self.root}
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root and STASH in dirnames:
                dirnames.remove(STASH)
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                self.paths.setdefault(self._ino(os.lstat(p).st_ino), p)

    # -- the control channel's actions ---------------------------------------------------------------

    def crash(self) -> CrashReport:
        before = set(self.paths)
        report = self.durability.crash()
        self._rescan()
        self.crashes += 1
        for ino in before:
            with contextlib.suppress(OSError):  # the kernel holds nothing for it
                pyfuse3.invalidate_inode(ino)
        return report

    def fail(self, rule: Rule) -> None:
        """Apply an error rule. A rule that fails reads first drops what the kernel caches of the
        files it names: a page read before it would otherwise be served from memory and the node
        never meet the error while it runs."""
        self.faults.add(rule)
        if "read" not in rule.ops:
            return
        for ino, path in list(self.paths.items()):
            if path != self.root and rule.matches("read", self._rel(path)):
                with contextlib.suppress(OSError):  # the kernel holds nothing for it
                    pyfuse3.invalidate_inode(ino)

    def status(self) -> dict[str, Any]:
        return {"files_not_durable": len(self.durability.files), "dirs_not_durable": len(self.durability.dirs),
                "rules": [r.to_json() for r in self.faults.rules], "errors_injected": self.faults.injected,
                "crashes": self.crashes, "open_files": len(self.open_files)}

    # -- metadata --------------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        if name == b".":
            return self._remember(self._path(parent_inode))
        if name == b"..":
            return self._remember(self._path(parent_inode).parent if parent_inode != pyfuse3.ROOT_INODE
                                  else self.root)
        return self._remember(self._child(parent_inode, name))

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        try:
            return self._attr(os.lstat(self._path(inode)))
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields,
                      fh: int | None, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._path(inode)
        try:
            if fields.update_size:
                self._check("write", path)
                self.durability.before_truncate(self._backing_ino(inode), path, attr.st_size)
                os.truncate(path, attr.st_size)
            if fields.update_mode:
                os.chmod(path, stat.S_IMODE(attr.st_mode), follow_symlinks=False)
            if fields.update_uid or fields.update_gid:
                os.chown(path, attr.st_uid if fields.update_uid else -1,
                         attr.st_gid if fields.update_gid else -1, follow_symlinks=False)
            if fields.update_atime or fields.update_mtime:
                st = os.lstat(path)
                os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                                   attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns),
                         follow_symlinks=False)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        return await self.getattr(inode)

    async def readlink(self, inode: int, ctx: Any) -> bytes:
        return os.fsencode(os.readlink(self._path(inode)))

    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        sv = os.statvfs(self.root)
        out = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                     "f_favail", "f_namemax"):
            setattr(out, name, getattr(sv, name))
        return out

    async def forget(self, inode_list: Any) -> None:
        pass  # paths are kept for the life of the mount (data directories are small)

    # -- directories -----------------------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: Any) -> int:
        self._path(inode)
        return inode

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        directory = self._path(fh)
        names = sorted(n for n in os.listdir(directory) if not (fh == pyfuse3.ROOT_INODE and n == STASH))
        for i, name in enumerate(names[start_id:], start_id):
            try:
                attr = self._remember(directory / name)
            except pyfuse3.FUSEError:
                continue  # gone meanwhile
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, i + 1):
                break

    async def releasedir(self, fh: int) -> None:
        pass

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        path = self._path(fh)
        await self._sync_gate(path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.durability.dir_synced(self._backing_ino(fh))

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        self._check("create", path)
        self.durability.before_dir_change(self._backing_ino(parent_inode), path.parent)
        try:
            os.mkdir(path, mode & ~ctx.umask)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        attr = self._remember(path)
        self.durability.before_dir_change(os.lstat(path).st_ino, path)  # none of its entries is durable yet
        return attr

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        path = self._child(parent_inode, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise _fail(errno.ENOTDIR)
            if os.listdir(path):
                raise _fail(errno.ENOTEMPTY)
            self.durability.before_dir_change(self._backing_ino(parent_inode), path.parent)
            self.durability.before_name_gone(path)
            if os.path.lexists(path):
                os.rmdir(path)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None

    # -- names -------------------------------------------------------------------------------------------

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        path = self._child(parent_inode, name)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                raise _fail(errno.EISDIR)
            self.durability.before_dir_change(self._backing_ino(parent_inode), path.parent)
            self.durability.before_name_gone(path)
            os.unlink(path)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: Any) -> None:
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise _fail(errno.EINVAL)
        old = self._child(parent_inode_old, name_old)
        new = self._child(parent_inode_new, name_new)
        try:
            src = os.lstat(old)
            if os.path.lexists(new):
                if flags & pyfuse3.RENAME_NOREPLACE:
                    raise _fail(errno.EEXIST)
                dst = os.lstat(new)
                if dst.st_ino == src.st_ino:
                    return
                if stat.S_ISDIR(dst.st_mode) != stat.S_ISDIR(src.st_mode):
                    raise _fail(errno.EISDIR if stat.S_ISDIR(dst.st_mode) else errno.ENOTDIR)
                if stat.S_ISDIR(dst.st_mode) and os.listdir(new):
                    raise _fail(errno.ENOTEMPTY)
            self.durability.before_dir_change(self._backing_ino(parent_inode_old), old.parent)
            self.durability.before_dir_change(self._backing_ino(parent_inode_new), new.parent)
            if os.path.lexists(new):
                self.durability.before_name_gone(new)
                if os.path.isdir(new) and not os.path.islink(new):
                    os.rmdir(new)  # not needed back (else the stash took it): an empty directory
            os.rename(old, new)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        self._moved(old, new)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._child(new_parent_inode, new_name)
        self.durability.before_dir_change(self._backing_ino(new_parent_inode), path.parent)
        try:
            os.link(self._path(inode), path, follow_symlinks=False)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        return self._remember(path)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        self.durability.before_dir_change(self._backing_ino(parent_inode), path.parent)
        try:
            os.symlink(os.fsdecode(target), path)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        return self._remember(path)

    # -- files ---------------------------------------------------------------------------------------------

    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        path = self._path(inode)
        self._check("open", path)
        if flags & os.O_TRUNC:
            self._check("write", path)
            self.durability.before_truncate(self._backing_ino(inode), path, 0)
        try:
            fd = os.open(path, flags & ~os.O_CREAT)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        self.open_files[fd] = inode
        return pyfuse3.FileInfo(fh=fd, keep_cache=False)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: Any) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        path = self._child(parent_inode, name)
        self._check("create", path)
        existed = os.path.lexists(path)
        if existed and flags & os.O_TRUNC:
            self.durability.before_truncate(os.lstat(path).st_ino, path, 0)
        if not existed:
            self.durability.before_dir_change(self._backing_ino(parent_inode), path.parent)
        try:
            fd = os.open(path, flags | os.O_CREAT, mode & ~ctx.umask)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        attr = self._remember(path)
        if not existed:
            self.durability.created(os.fstat(fd).st_ino)
        self.open_files[fd] = attr.st_ino
        return pyfuse3.FileInfo(fh=fd, keep_cache=False), attr

    def _file(self, fh: int) -> tuple[int, Path]:
        ino = self.open_files.get(fh)
        if ino is None:
            raise _fail(errno.EBADF)
        return ino, self._path(ino)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        _, path = self._file(fh)
        self._check("read", path)
        try:
            return os.pread(fh, size, off)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        ino, path = self._file(fh)
        self._check("write", path)
        try:
            if fcntl.fcntl(fh, fcntl.F_GETFL) & os.O_APPEND:  # the end, whatever offset the kernel gave
                off = os.fstat(fh).st_size
            self.durability.before_write(self._backing_ino(ino), path, off, len(buf))
            return os.pwrite(fh, buf, off)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None

    async def flush(self, fh: int) -> None:
        pass

    async def release(self, fh: int) -> None:
        if self.open_files.pop(fh, None) is not None:
            os.close(fh)

    async def fsync(self, fh: int, datasync: bool) -> None:
        ino, path = self._file(fh)
        await self._sync_gate(path)
        try:
            (os.fdatasync if datasync else os.fsync)(fh)
        except OSError as exc:
            raise _fail(exc.errno or errno.EIO) from None
        self.durability.file_synced(self._backing_ino(ino))

    async def _sync_gate(self, path: Path) -> None:
        """An fsync's injected delay, then its injected error (a failed fsync makes nothing durable).
        A crash during the delay is a power loss before the fsync returned: it made nothing durable
        either (the caller was killed; its answer is EIO)."""
        delay = self.faults.delay_s("fsync", self._rel(path))
        if delay > 0:
            crashes = self.crashes
            await trio.sleep(delay)
            if self.crashes != crashes:
                raise _fail(errno.EIO)
        self._check("fsync", path)

