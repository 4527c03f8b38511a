"""Which of a broker's log directories still work (I/O at the edge; the broker core only hears
the answer).

`directory_ids(dirs)`: each formatted log directory's id (meta.properties `directory.id`,
KIP-858), what the broker registers. `offline(dirs)`: the ids of directories that can no longer be
used: gone, unreadable, or holding another directory's meta.properties (replaced under the broker).
The metadata log's own directory is not judged here: losing it stops the node, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.meta_properties import read_meta_properties


def directory_ids(dirs: Iterable[Path]) -> dict[Path, uuid.UUID]:
    out: dict[Path, uuid.UUID] = {}
    for d in dirs:
        try:
            directory_id = read_meta_properties(d).directory_id
        except (OSError, ValueError, StorageError):
            continue
        if directory_id is not None:
            out[Path(d)] = directory_id
    return out


def offline(dirs: Mapping[Path, uuid.UUID]) -> set[uuid.UUID]:
    failed = set()
    for path, directory_id in dirs.items():
        try:
            ok = read_meta_properties(path).directory_id == directory_id
        except (OSError, ValueError, StorageError):
            ok = False
        if not ok:
            failed.add(directory_id)
    return failed
