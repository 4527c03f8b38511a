"""The `quorum-state` file: KIP-595's persisted election state, in Kafka's JSON layout (data_version 0).

`{"clusterId": "", "leaderId": 1, "leaderEpoch": 5, "votedId": -1, "appliedOffset": 0,
"currentVoters": [{"voterId": 1}, ...], "data_version": 0}` (-1 stands for "none"). Written
tmp → fsync → rename → fsync of the directory, so a crash leaves the old or the new state; a
leftover `quorum-state.tmp` is ignored. A file that exists but cannot be parsed is an error,
never an empty state: a node that forgot its vote could vote twice in one epoch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.ports import QuorumStateData
from kraftlab.node.storage.atomic import TMP_SUFFIX, make_dirs_durably, write_atomically
from kraftlab.node.storage.errors import CorruptStateFile
from kraftlab.node.storage.layout import QUORUM_STATE_FILE, partition_dir

DATA_VERSION = 0
NONE = -1


def encode_quorum_state(state: QuorumStateData) -> bytes:
    doc = {
        "clusterId": "",
        "leaderId": NONE if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": NONE if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in state.voters],
        "data_version": DATA_VERSION,
    }
    return json.dumps(doc).encode()


def decode_quorum_state(data: bytes, path: str = "quorum-state") -> QuorumStateData:
    """Parse the file's content; CorruptStateFile says exactly what is wrong."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptStateFile(path, f"not valid JSON ({e}); the file is torn or damaged") from None
    if not isinstance(doc, dict):
        raise CorruptStateFile(path, "not a JSON object")
    version = _int(doc, "data_version", path)
    if version != DATA_VERSION:
        raise CorruptStateFile(path, f"unsupported data_version {version}")
    voters = doc.get("currentVoters")
    if not isinstance(voters, list) or not all(isinstance(v, dict) for v in voters):
        raise CorruptStateFile(path, "currentVoters is not a list of objects")
    leader_id = _int(doc, "leaderId", path)
    voted_id = _int(doc, "votedId", path)
    epoch = _int(doc, "leaderEpoch", path)
    if epoch < 0:
        raise CorruptStateFile(path, f"negative leaderEpoch {epoch}")
    return QuorumStateData(
        leader_epoch=epoch,
        leader_id=None if leader_id == NONE else leader_id,
        voted_id=None if voted_id == NONE else voted_id,
        voters=tuple(_int(v, "voterId", path) for v in voters),
    )


def _int(doc: dict[str, Any], key: str, path: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptStateFile(path, f"field {key!r} is missing or not an integer: {value!r}")
    return value


class FileQuorumStateStore:
    """A QuorumStateStore backed by one file.

    `bugs` (test only) may plant quorum-state-no-fsync: a power loss then forgets the last write
    (shown by running on the disk-fault filesystem, kraftlab.nemesis.diskfs)."""

    def __init__(self, path: str | Path, bugs: BugSet = NO_BUGS) -> None:
        self.path = Path(path)
        self.bugs = bugs

    @classmethod
    def in_log_dir(
        cls, metadata_log_dir: str | Path, bugs: BugSet = NO_BUGS
    ) -> FileQuorumStateStore:
        """The store at `<metadata.log.dir>/__cluster_metadata-0/quorum-state` (Kafka's place)."""
        directory = partition_dir(metadata_log_dir)
        make_dirs_durably(directory)
        return cls(directory / QUORUM_STATE_FILE, bugs)

    def read(self) -> QuorumStateData | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return decode_quorum_state(data, str(self.path))

    def write(self, state: QuorumStateData) -> None:
        data = encode_quorum_state(state)
        if self.bugs.on("quorum-state-no-fsync"):
            # BUG ZOO: quorum-state-no-fsync (KAFKA-15312) — renamed into place with no fsync of the
            # file or its directory: a power loss can bring back the old state (a forgotten vote).
            tmp = self.path.with_name(self.path.name + TMP_SUFFIX)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
            return
        write_atomically(self.path, data)
