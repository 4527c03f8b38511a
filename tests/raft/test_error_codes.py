"""The Raft core's error codes are Kafka's: every member of node.raft.messages.Errors has the
number kio's generated ErrorCode gives the same name (the simulators pass Errors as objects, so
only this catches a wrong number before a real client or tshark would)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kraftlab.node.raft.messages import Errors


def test_every_raft_error_has_kafkas_code() -> None:
    wrong = {e.name: (e.value, ErrorCode[e.name.lower()].value) for e in Errors
             if e.name.lower() not in ErrorCode.__members__ or ErrorCode[e.name.lower()].value != e.value}
    assert not wrong, f"(ours, Kafka's): {wrong}"
