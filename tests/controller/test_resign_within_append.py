"""A QuorumController on a real RaftCore whose append step resigns (check-quorum) and drops the
records it just took into its linger buffer: the write must fail NOT_CONTROLLER, never be held."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Feature, Listener
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, u16

from kraftlab.node.controller.ports import ControllerConfig, NotLeader, Reply
from kraftlab.node.controller.quorum_controller import QuorumController
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import NotLeader as RaftNotLeader
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Record
from kraftlab.node.raft.states import Role
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore

E = m.Errors


class _Writer:
    """The controller's MetadataWriter over a RaftNode (as the process's appender does it)."""

    def __init__(self) -> None:
        self.node: RaftNode | None = None

    def append(self, records: Sequence[Record], now_ms: int) -> int:
        assert self.node is not None
        try:
            base, _ = self.node.append(records, now_ms)
        except RaftNotLeader as e:
            raise NotLeader() from e
        return base

    def next_offset(self) -> int:
        assert self.node is not None
        return self.node.next_offset()


def _registration(bid: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=BrokerId(bid), cluster_id="q1Sh-9_ISia_zwGINzRvyQ", incarnation_id=uuid.UUID(int=bid),
        listeners=(Listener(name="PLAINTEXT", host="10.0.0.1", port=u16(9092), security_protocol=i16(0)),),
        features=(Feature(name="metadata.version", min_supported_version=i16(1), max_supported_version=i16(1)),),
        rack=None,
    )


def _sent(out: Output, kind: type) -> list[m.Envelope]:
    return [e for e in out.messages if isinstance(e.message, kind)]


def test_registration_whose_append_step_resigns_on_check_quorum_fails() -> None:
    writer = _Writer()
    ctrl = QuorumController(ControllerConfig(node_id=1, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", seed=1), writer)
    log = MemoryLog()
    core = RaftCore(RaftConfig(), 1, (1, 2, 3), log, MemoryQuorumStateStore(), MemorySnapshotStore(),
                    random.Random(1))
    node = writer.node = RaftNode(core, ctrl)
    # node 1 wins the election of epoch 1
    out = node.start(0)
    now = out.deadline
    assert now is not None
    pre = _sent(node.tick(now), m.VoteRequest)[0]
    out = node.handle(m.Envelope(2, 1, m.VoteResponse(E.NONE, 0, None, True, True), pre.ref), now)
    vote = _sent(out, m.VoteRequest)[0]
    node.handle(m.Envelope(2, 1, m.VoteResponse(E.NONE, 1, None, True, False), vote.ref), now)
    assert core.is_leader
    # voter 2 fetches: the LeaderChange commits, the controller activates and writes metadata.version
    for _ in range(3):
        now += 30
        node.tick(now)
        node.handle(m.Envelope(2, 1, m.FetchRequest(1, 2, log.end_offset(), 1, 0)), now)
        ctrl.tick(now)
    assert ctrl.active and ctrl.committed_offset == log.end_offset() > 1
    ctrl.take_outputs()
    # voter 2 goes silent; the leader is paused past check-quorum, and on resume a registration
    # is decided before any tick: its append step takes the records, then resigns
    now += core.config.check_quorum_timeout_ms
    ctrl.handle_request("reg", _registration(7), now)
    assert core.role is Role.RESIGNED
    replies = [o for o in ctrl.take_outputs() if isinstance(o, Reply)]
    assert [(r.token, r.response.error_code) for r in replies] == [("reg", ErrorCode.not_controller)]
    assert ctrl.held_requests() == 0 and not ctrl.active
