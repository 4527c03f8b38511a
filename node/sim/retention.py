"""The metadata log retention a simulated cluster runs with, drawn per seed.

Half the seeds delete the log behind each snapshot at once (`metadata.max.retention.bytes=0`), so
lagging nodes catch up by FetchSnapshot; the other half keep a few kilobytes of it (a few
snapshots' worth of records at the simulators' rates), so a node coming back below the latest
snapshot is answered with records or a diverging epoch — the path a deposed leader takes in Kafka,
whose default keeps 100 MiB. Drawn from a generator of its own: the fault schedule stays the seed's.
"""

from __future__ import annotations

import random

from kraftlab.node.raft.retention import UNLIMITED, RetentionPolicy

SMALL_BYTES = 4096
"""About 64 records of the in-memory log (which counts 64 bytes a record)."""
CHOICES = (0, SMALL_BYTES)


def drawn_retention(seed: int) -> RetentionPolicy:
    """The retention of a run with this seed: none or small, by bytes (time is no limit in a run of seconds)."""
    max_bytes = random.Random(seed ^ 0x4E7E_4710).choice(CHOICES)
    return RetentionPolicy(max_bytes=max_bytes, max_ms=UNLIMITED)
