"""The quorum-state file: Kafka's JSON layout, atomic replacement, loud failure on damage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.raft.ports import QuorumStateData
from kraftlab.node.storage.errors import CorruptStateFile
from kraftlab.node.storage.quorum_state import FileQuorumStateStore, decode_quorum_state, encode_quorum_state

ids = st.none() | st.integers(0, 2**31 - 1)
states = st.builds(
    QuorumStateData, st.integers(0, 2**31 - 1), ids, ids, st.lists(st.integers(0, 1000), max_size=7).map(tuple)
)


@given(states)
def test_round_trip(state: QuorumStateData) -> None:
    assert decode_quorum_state(encode_quorum_state(state)) == state


def test_kafka_layout() -> None:
    doc = json.loads(encode_quorum_state(QuorumStateData(5, None, 2, (1, 2, 3))))
    assert doc == {
        "clusterId": "", "leaderId": -1, "leaderEpoch": 5, "votedId": 2, "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0,
    }  # fmt: skip


def test_missing_file_reads_as_none_then_writes_replace(log_dir: Path) -> None:
    store = FileQuorumStateStore.in_log_dir(log_dir)
    assert store.path == log_dir / "__cluster_metadata-0" / "quorum-state"
    assert store.read() is None
    store.write(QuorumStateData(1, None, 1, (1, 2, 3)))
    store.write(QuorumStateData(2, 3, None, (1, 2, 3)))
    assert FileQuorumStateStore.in_log_dir(log_dir).read() == QuorumStateData(2, 3, None, (1, 2, 3))
    assert sorted(os.listdir(store.path.parent)) == ["quorum-state"]  # no tmp file left behind


def test_leftover_tmp_file_is_ignored(log_dir: Path) -> None:
    store = FileQuorumStateStore.in_log_dir(log_dir)
    store.write(QuorumStateData(4, 1, 1, (1,)))
    tmp = store.path.with_name("quorum-state.tmp")
    tmp.write_bytes(b'{"leaderEpoch": 9, "tor')  # a crash between write and rename
    assert store.read() == QuorumStateData(4, 1, 1, (1,))
    store.write(QuorumStateData(5, None, None, (1,)))
    assert store.read() == QuorumStateData(5, None, None, (1,))
    assert not tmp.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not valid JSON"),
        (b'{"leaderEpoch": 3, "leaderId": 1', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"leaderId": 1, "leaderEpoch": 1, "votedId": -1, "currentVoters": []}', "data_version"),
        (b'{"leaderId": 1, "leaderEpoch": 1, "votedId": -1, "currentVoters": [], "data_version": 1}', "unsupported"),
        (b'{"leaderId": 1, "leaderEpoch": "1", "votedId": -1, "currentVoters": [], "data_version": 0}', "leaderEpoch"),
        (b'{"leaderId": 1, "leaderEpoch": 1, "votedId": -1, "currentVoters": [1], "data_version": 0}', "currentVoters"),
        (b'{"leaderId": 1, "leaderEpoch": -2, "votedId": -1, "currentVoters": [], "data_version": 0}', "negative"),
    ],
)
def test_damaged_file_is_a_clear_error_never_empty(log_dir: Path, content: bytes, message: str) -> None:
    store = FileQuorumStateStore.in_log_dir(log_dir)
    store.path.write_bytes(content)
    with pytest.raises(CorruptStateFile, match=message) as err:
        store.read()
    assert str(store.path) in str(err.value)


def test_every_truncation_of_a_written_file_is_detected(log_dir: Path) -> None:
    store = FileQuorumStateStore.in_log_dir(log_dir)
    store.write(QuorumStateData(7, 2, 2, (1, 2, 3)))
    full = store.path.read_bytes()
    for cut in range(len(full)):
        store.path.write_bytes(full[:cut])
        with pytest.raises(CorruptStateFile):
            store.read()
