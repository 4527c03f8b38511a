"""Log matching over what the nodes stored: each node's metadata log as it was on disk at the end of
the run, read from `kraft-node dump-log --batches-only` output collected beside its journal
(`metadata-log.txt`: Kafka's DumpLogSegments text, one line per batch — base and last offset,
partition leader epoch, batch CRC), not from the node's journal. The journal is the node's own
account; the segments are what a restart would recover, so a node that journals one log and writes
another is caught here.

StoredLogMatching: one batch per (base offset, epoch) across the nodes (the same last offset and
CRC: a follower stores the leader's batch as it was written), a log's epochs never going down,
and two logs that hold the same epoch at an offset holding the same epochs below it
(`raft.matching`). Snapshot files are left out (they hold state, not the log); a damaged or
half-written batch ends that segment's dump (the rest of it is not judged).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlab.checker.invariant import Violation
from kraftlab.checker.raft.matching import breaches, runs_of
from kraftlab.checker.rules import NamedRule, judge

STORED_LOG_FILE = "metadata-log.txt"
_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?partitionLeaderEpoch: (-?\d+) .*?crc: (\d+)")


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base: int
    last: int
    epoch: int
    crc: int
    line: int  # in the dump file


def parse_dump(text: str) -> list[StoredBatch]:
    """The segment batches of a `dump-log --batches-only` text (snapshot files skipped; a `CORRUPT`
    line ends its file's batches)."""
    out: list[StoredBatch] = []
    in_segment = False
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("Dumping "):
            in_segment = line.rstrip().endswith("(segment)")
        elif line.startswith("CORRUPT"):
            in_segment = False
        elif in_segment and (m := _BATCH.match(line)):
            out.append(StoredBatch(int(m[1]), int(m[2]), int(m[3]), int(m[4]), i))
    return out


class StoredLogMatching(NamedRule):
    def check(self, replay: Mapping[str, list[StoredBatch]]) -> Iterator[Violation]:
        first: dict[tuple[int, int], tuple[str, StoredBatch]] = {}
        for name, batches in sorted(replay.items()):
            for b in batches:
                seen = first.setdefault((b.base, b.epoch), (name, b))
                if (seen[1].last, seen[1].crc) != (b.last, b.crc):
                    yield Violation(self.name, (
                        f"{seen[0]} stores a batch at offset {b.base} in epoch {b.epoch} ending at {seen[1].last} with "
                        f"CRC {seen[1].crc}, {name} one ending at {b.last} with CRC {b.crc}: two batches at one "
                        f"offset in one epoch"))
        logs = [(runs_of({o: b.epoch for b in batches for o in range(b.base, b.last + 1)}), f"{name}'s stored log")
                for name, batches in sorted(replay.items())]
        for br in breaches(logs):
            yield Violation(self.name, br.explanation, before=br.before, after=br.after)


def read_stored_logs(paths: Iterable[str | Path]) -> dict[str, list[StoredBatch]]:
    """Node (the name of the directory holding the dump) → its stored batches."""
    return {Path(p).parent.name: parse_dump(Path(p).read_text(encoding="utf-8", errors="replace")) for p in paths}


def check_stored_logs(paths: Iterable[str | Path]) -> dict[str, Any]:
    logs = read_stored_logs(paths)
    return judge([StoredLogMatching()], logs,
                 stats={"nodes": len(logs), "batches": sum(len(b) for b in logs.values())})
