"""The `hw-checkpoint` file: a durable lower bound of the high-water mark, in Kafka's checkpoint format.

Written atomically by the log's owner now and then (from any thread: writes are serialised, so the
owner may keep the fsyncs off its event loop); read on open so that recovery can tell a torn
uncommitted tail (truncate it) from damage to committed data (refuse to serve it). The format is
Kafka's offset checkpoint file: a version line, an entry count, then `topic partition offset`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kraftlab.node.storage.atomic import write_atomically
from kraftlab.node.storage.errors import CorruptStateFile

VERSION = 0
TOPIC = "__cluster_metadata"
PARTITION = 0


class HighWatermarkCheckpoint:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def read(self) -> int:
        """The checkpointed high-water mark; 0 when no checkpoint was ever written."""
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return 0
        except UnicodeDecodeError:
            raise CorruptStateFile(str(self.path), "not ASCII text") from None
        lines = text.split("\n")
        if len(lines) != 4 or lines[3] != "":
            raise CorruptStateFile(str(self.path), f"expected 3 lines, got {text!r}")
        if lines[0] != str(VERSION) or lines[1] != "1":
            raise CorruptStateFile(str(self.path), f"unsupported version/count {lines[0]!r}/{lines[1]!r}")
        fields = lines[2].split(" ")
        if len(fields) != 3 or fields[0] != TOPIC or fields[1] != str(PARTITION) or not fields[2].isdigit():
            raise CorruptStateFile(str(self.path), f"bad entry {lines[2]!r}")
        return int(fields[2])

    def write(self, hw: int) -> None:
        if hw < 0:
            raise ValueError(f"negative high-water mark {hw}")
        with self._lock:
            write_atomically(self.path, f"{VERSION}\n1\n{TOPIC} {PARTITION} {hw}\n".encode("ascii"))
