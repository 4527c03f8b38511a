"""Configuration keys and the LeaderChangeMessage control record."""

from __future__ import annotations

import pytest

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.control import LEADER_CHANGE, control_type, decode_leader_change, leader_change_record
from kraftlab.node.raft.ports import Record


def test_kafka_defaults() -> None:
    c = RaftConfig()
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms, c.append_linger_ms) == (2000, 20, 25)
    assert c.check_quorum_timeout_ms == 3000


def test_from_server_properties() -> None:
    c = RaftConfig.from_properties(
        {
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "900",
            "controller.quorum.election.backoff.max.ms": "300",
            "controller.quorum.request.timeout.ms": "700",
            "controller.quorum.retry.backoff.ms": "5",
            "controller.quorum.append.linger.ms": "0",
            "node.id": "1",
        }
    )
    assert c == RaftConfig(
        election_timeout_ms=500,
        fetch_timeout_ms=900,
        election_backoff_max_ms=300,
        request_timeout_ms=700,
        retry_backoff_ms=5,
        append_linger_ms=0,
    )


def test_leader_change_record_round_trip() -> None:
    record = leader_change_record(3, [1, 2, 3], [2, 3])
    assert control_type(record.key) == LEADER_CHANGE
    assert record.key == b"\x00\x00\x00\x02"
    assert decode_leader_change(record) == (3, [1, 2, 3], [2, 3])
    for bad_key in (None, b"x", b"\xff\xff\x00\x02"):  # missing, too short, a negative key version
        with pytest.raises(ValueError):
            control_type(bad_key)
    assert control_type(b"\x00\x01\x00\x02") == LEADER_CHANGE  # a later key version reads as version 0
    with pytest.raises(ValueError):
        decode_leader_change(Record(b"\x00\x00\x00\x03", b""))
