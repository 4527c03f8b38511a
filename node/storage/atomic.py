"""Durable file primitives: replace a small file atomically (tmp → fsync → rename → fsync dir)."""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: str | Path) -> None:
    """Make creations, renames and deletions inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durably(directory: str | Path) -> Path:
    """Create `directory` (and missing parents) so that it survives a power loss: a new directory's
    name is durable only once its parent is fsynced. The parent is fsynced even when the directory
    already exists, since a previous life may have created it and stopped before that fsync."""
    directory = Path(directory)
    missing = []
    p = directory
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    directory.mkdir(parents=True, exist_ok=True)
    for d in [directory, *missing]:
        fsync_dir(d.parent)
    return directory


def write_atomically(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` so that a crash leaves either the old or the new content, never a mix.

    A leftover `<path>.tmp` from a crash before the rename is simply overwritten here and ignored by readers.
    """
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
