"""Safety invariants the simulator checks after every event (those of Kafka's RaftEventSimulationTest).

Besides Kafka's (one leader per epoch, one vote per voter and epoch, monotonic epochs and
high-water marks, the high-water mark held durably by a majority, consistent committed data, no
leader loading a snapshot), a node's log must start at its latest snapshot and keep no snapshot below that start.

Each event changes the state of one node at most (or applies a fault), so `check_node` looks
at the node the event touched and `check_all` runs after faults; both see every node that is up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.states import majority
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.sim.memory import MemoryLog, MemorySnapshotStore


class InvariantViolation(AssertionError):
    def __init__(self, name: str, detail: str, now: int) -> None:
        super().__init__(f"{name} violated at t={now} ms: {detail}")
        self.name = name
        self.detail = detail
        self.now = now


class CheckedNode(Protocol):
    node_id: int
    voter: bool
    log: MemoryLog
    snapshots: MemorySnapshotStore

    @property
    def core(self) -> RaftCore | None: ...


@dataclass(slots=True)
class _Seen:
    epoch: int = 0
    hw: int = 0


class Invariants:
    def __init__(self, voters: Iterable[int]) -> None:
        self.voters = tuple(voters)
        self.majority = majority(len(self.voters))
        self.leaders: dict[int, int] = {}  # epoch -> the one leader seen in it
        self.votes: dict[tuple[int, int], int] = {}  # (node, epoch) -> the one candidate it voted for
        self.seen: dict[int, _Seen] = {}
        self.digests: dict[int, int] = {}  # committed offset -> state digest after applying up to it
        self.now = 0

    def fail(self, name: str, detail: str) -> None:
        raise InvariantViolation(name, detail, self.now)

    def restarted(self, node_id: int, wiped: bool) -> None:
        """A new incarnation: its high-water mark is relearned; a wiped node also restarts its epochs."""
        seen = self.seen.setdefault(node_id, _Seen())
        seen.hw = 0
        if wiped:
            seen.epoch = 0
            self.votes = {k: v for k, v in self.votes.items() if k[0] != node_id}  # its votes went with its disk

    def check_node(self, node: CheckedNode, nodes: Mapping[int, CheckedNode]) -> None:
        core = node.core
        if core is None:
            return
        nid = node.node_id
        seen = self.seen.get(nid)
        if seen is None:
            seen = self.seen[nid] = _Seen()
        epoch = core.epoch
        if epoch < seen.epoch:
            self.fail("MonotonicEpoch", f"node {nid} went from epoch {seen.epoch} to {epoch}")
        seen.epoch = epoch
        if (voted := core.voted_id) is not None:
            first = self.votes.setdefault((nid, epoch), voted)
            if first != voted:
                self.fail("SingleVote", f"node {nid} voted for {first} and then for {voted} in epoch {epoch}")
        hw = core.high_watermark
        if hw < seen.hw:
            self.fail("MonotonicHighWatermark", f"node {nid} high-water mark went from {seen.hw} to {hw}")
        seen.hw = hw
        if core.is_leader:
            leader = self.leaders.setdefault(epoch, nid)
            if leader != nid:
                self.fail("SingleLeader", f"nodes {leader} and {nid} both led epoch {epoch}")
            if hw > 0:
                # Against the voter set the leader acts on (KIP-853: the one at its log's end; in a
                # static quorum the configured one) — or one it may have been reached under: a set
                # is in force once appended, so the HW was reached under the set in force at it or
                # one appended after it (a change can be appended, and committed, after the HW
                # passed the one before; a leader keeps the HW it had as a follower).
                durable = self.durable_voters(core.voter_set, hw, nodes)
                if durable < core.voter_set.majority:
                    held = any(
                        self.durable_voters(s, hw, nodes) >= s.majority for s in core.voter_history.since(hw - 1)
                    )
                    if not held:
                        self.fail(
                            "MajorityReachedHighWatermark",
                            f"leader {nid} (epoch {epoch}) has HW {hw} but only {durable} voters hold it durably",
                        )
        start = node.log.start_offset()
        latest = node.snapshots.latest()
        if start > 0 and (latest is None or latest.offset < start):
            # The log may keep segments behind the latest snapshot (retention), never lose records
            # no snapshot holds.
            self.fail("SnapshotCoversLogStart", f"node {nid} log starts at {start}, latest snapshot {latest}")
        # Older snapshots cover nothing the log and the latest snapshot do not: the node deletes them
        # once it has a newer one (a node that keeps them fills its disk).
        stale = [s for s in node.snapshots.ids() if s.offset < start or (latest is not None and s < latest)]
        if stale:
            self.fail(
                "NoSnapshotBelowLogStart", f"node {nid} log starts at {start}, latest snapshot {latest}, keeps {stale}"
            )

    def durable_voters(self, voters: VoterSet, hw: int, nodes: Mapping[int, CheckedNode]) -> int:
        """How many of `voters` hold the log durably up to `hw`."""
        return sum(1 for v in voters if nodes[v].log.flushed_end_offset() >= hw)

    def check_all(self, nodes: Mapping[int, CheckedNode]) -> None:
        for node in nodes.values():
            self.check_node(node, nodes)

    def applied(self, node_id: int, offset: int, digest: int) -> None:
        """ConsistentCommittedData: every node's state after the committed prefix [0, offset) is the same."""
        known = self.digests.setdefault(offset, digest)
        if known != digest:
            self.fail("ConsistentCommittedData", f"node {node_id} applied different data up to offset {offset}")

    def snapshot_loaded(self, node_id: int, snapshot_id: OffsetAndEpoch, while_leader: bool) -> None:
        """LeaderNeverLoadsSnapshot: `while_leader` is the state machine's own view at that point of
        the update sequence (leader changes and loads reach it in order)."""
        if while_leader:
            self.fail("LeaderNeverLoadsSnapshot", f"leader {node_id} loaded snapshot {snapshot_id}")
