"""A snapshot transfer's lifecycle (KIP-630), judged by the Raft simulator on every step of a follower.

A follower whose Fetch position the leader's log no longer covers is told the leader's snapshot id
and fetches it in chunks (FetchSnapshot), then installs it. The simulator holds the follower's
snapshot store and the leader's, so it judges each FetchSnapshot request as it is sent and each
install right after the step that made it (Kafka's `KafkaRaftClient` fetch-snapshot handling and
`FollowerState`, which clears its fetching snapshot on every state transition):

- SnapshotFetchOrderly: a FetchSnapshot goes to the leader of the sender's epoch, in that epoch,
  for a snapshot newer than the latest one the sender holds (never one it installed or an older
  one), at a position before that snapshot's end (the leader's copy). A transfer starts at position
  0 and goes on in order: each later request of it continues exactly where the bytes the sender
  holds for it end, in the same follower state (epoch, leader) as its start — a transfer in progress
  is dropped (starts again from 0) on every state transition, and a crash loses its bytes.
- SnapshotInstalled: right after the step that installs a fetched snapshot, the follower's log
  starts and ends at the snapshot's end offset in its epoch, is durable to there, its high-water mark
  covers it, and the core's applied offset and its state machine hold exactly it (the machine loaded
  it and applied nothing past its end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.machine import CounterMachine

Fail = Callable[[str, str], None]


class MachineNode(CheckedNode, Protocol):
    """A simulated node with its process life (a crash ends a transfer) and its state machine."""

    incarnation: int
    machine: CounterMachine | None


@dataclass(frozen=True, slots=True)
class Transfer:
    """One snapshot transfer: the snapshot, and the epoch, leader, incarnation and follower state
    (compared by identity: a transition makes a new one) it began in."""

    snapshot_id: OffsetAndEpoch
    epoch: int
    leader: int
    incarnation: int
    state: object = field(compare=False)

    def continued_by(self, other: Transfer) -> bool:
        return self == other and self.state is other.state


class SnapshotTransfer:
    def __init__(self, nodes: Mapping[int, CheckedNode], fail: Fail) -> None:
        self.nodes = nodes
        self.fail = fail
        self.transfers: dict[int, Transfer] = {}
        """node id -> the transfer it has in progress (until it installs it)."""
        self.installs = 0
        self.requests = 0

    def judge(self, node: MachineNode, out: Output, now: int) -> None:
        core = node.core
        if core is None:
            return
        nid = node.node_id
        transfer = self.transfers.get(nid)
        if transfer is not None and node.snapshots.latest() == transfer.snapshot_id:
            del self.transfers[nid]
            self._installed(node, transfer.snapshot_id)
        for env in out.messages:
            if isinstance(env.message, m.FetchSnapshotRequest):
                self._request(node, env.dst, env.message)

    def _request(self, node: MachineNode, dst: int, req: m.FetchSnapshotRequest) -> None:
        core = node.core
        assert core is not None
        self.requests += 1
        nid = node.node_id
        sid = req.snapshot_id
        held = node.snapshots.latest()

        def fail(why: str) -> None:
            self.fail(
                "SnapshotFetchOrderly",
                f"node {nid} asked {dst} for snapshot {sid} at {req.position} in epoch {req.epoch}: {why}",
            )

        if req.epoch != core.epoch or dst != core.leader_id:
            fail(f"it is in epoch {core.epoch} with leader {core.leader_id}")
        if held is not None and sid <= held:
            fail(f"it holds snapshot {held}")
        leader = self.nodes.get(dst)
        if leader is not None and sid in leader.snapshots.ids() and req.position >= leader.snapshots.size(sid):
            fail(f"the snapshot ends at byte {leader.snapshots.size(sid)}")
        transfer = self.transfers.get(nid)
        now = Transfer(sid, req.epoch, dst, node.incarnation, core.state)
        if req.position == 0:
            self.transfers[nid] = now
            return
        if transfer is None or not transfer.continued_by(now):
            fail(f"its transfer in progress is {transfer}, begun in another state (a new one starts at 0)")
        has = node.snapshots.partial_size(sid)
        if req.position != has:
            fail(f"it holds {has} bytes of it")

    def _installed(self, node: MachineNode, sid: OffsetAndEpoch) -> None:
        self.installs += 1
        core = node.core
        assert core is not None
        log = node.log
        start, end, last, flushed = log.start_offset(), log.end_offset(), log.last_epoch(), log.flushed_end_offset()
        if (start, end, last) != (sid.offset, sid.offset, sid.epoch) or flushed < sid.offset:
            self.fail(
                "SnapshotInstalled",
                f"node {node.node_id} installed snapshot {sid}; its log is [{start}, {end}) in epoch {last}, "
                f"flushed to {flushed}",
            )
        machine = node.machine
        held = None if machine is None else (machine.snapshot_offset, machine.applied)
        if core.high_watermark < sid.offset or core.applied_offset != sid.offset or held != (sid.offset, sid.offset):
            self.fail(
                "SnapshotInstalled",
                f"node {node.node_id} installed snapshot {sid} with high-water mark {core.high_watermark}, "
                f"applied {core.applied_offset}; its state machine holds a snapshot at and applied to {held}",
            )
