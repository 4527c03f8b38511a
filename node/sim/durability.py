"""Durability judged by the Raft simulator: every durable claim backed by the simulated disk, and
every restart true to what that disk held.

The simulator owns each node's storage (`node.sim.memory`: the log's flushed end, the
quorum-state store, the frozen snapshots), so it knows what survives a crash at every instant
and judges what a node says against it (KIP-595; Kafka's `KafkaRaftClient`, `LeaderState`,
`QuorumState`):

- DurableClaims, on every step's output, at the moment it is sent: a Fetch's offset and a Vote's
  (or pre-vote's) last offset describe the sender's log (its end offset and last epoch) and are no
  further than its flushed end — a follower acknowledges by its next Fetch only what it flushed,
  and a candidate's log is what it would hold after a crash; a granted vote, a candidacy and a
  leadership (BeginQuorumEpoch) are sent only once the quorum-state holds that epoch and vote (or
  leader), and a follower fetches only in an epoch its quorum-state holds. And the other way,
  after every step of a leader: its own log end in DescribeQuorum is no further than its flushed
  end and at least what the driver reported flushed (a completed flush is counted within the step
  that reported it — its log may be flushed further by a flush thread not yet reported), and its
  high-water mark is at least what a majority of the end offsets it describes hold, once that is
  past its epoch's start (a leader that has the majority's offsets in hand commits them).
- RecoversDurableState, at every (re)start: the storage is what the crash left (log start, end
  and last epoch, latest snapshot, quorum-state; a wiped disk holds nothing), and the new core
  starts from exactly it — the epoch (the stored one, or the log's last if newer), the vote and
  leader of that stored epoch, the high-water mark and applied offset at the latest snapshot's
  end, not leading.

`DurabilityRules` is the simulator's hook: `starting` before a node's incarnation starts,
`sent` after every step (start, message, tick, flush, append), `flushed` before a completed flush
is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.ports import OffsetAndEpoch, QuorumStateData
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.memory import MemoryQuorumStateStore
from kraftlab.node.sim.snapshot_transfer import MachineNode, SnapshotTransfer

Fail = Callable[[str, str], None]


class DiskNode(CheckedNode, Protocol):
    """A simulated node with all three of its stores."""

    quorum: MemoryQuorumStateStore


class SimulatedNode(DiskNode, MachineNode, Protocol):
    """A simulated node with its stores and its process life (`incarnation`)."""


@dataclass(frozen=True, slots=True)
class DiskImage:
    """What a node's storage holds durably when a new incarnation starts on it (after a crash: what
    the crash left, a torn write or a wipe included)."""

    log_start: int
    log_end: int
    last_epoch: int
    latest_snapshot: OffsetAndEpoch | None
    quorum: QuorumStateData | None

    @classmethod
    def of(cls, node: DiskNode) -> DiskImage:
        log = node.log  # taken before a start: after a crash the log holds its durable records only
        return cls(log.start_offset(), log.end_offset(), log.last_epoch(), node.snapshots.latest(), node.quorum.read())


def majority_end(ends: list[int]) -> int:
    """The largest offset a majority of `ends` reach."""
    ranked = sorted(ends, reverse=True)
    return ranked[len(ranked) // 2]


class DurableClaims:
    """DurableClaims: the offsets and election state a node's messages claim are on its disk, and a
    leader counts what its disk and its voters' fetches hold."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.reported: dict[int, int] = {}
        """node id -> the flushed end its core knows of: the driver's last report (`flushed`), or
        the end it flushed itself while not leading."""

    def judge(self, node: DiskNode, out: Output, now: int) -> None:
        core = node.core
        if core is None:
            return
        nid = node.node_id
        log = node.log
        flushed = log.flushed_end_offset()
        for env in out.messages:
            msg = env.message
            if isinstance(msg, m.FetchRequest):
                self._log_claim(nid, "Fetch", msg.fetch_offset, msg.last_fetched_epoch, node)
                self._stored(node, msg.epoch, "Fetch", None)
            elif isinstance(msg, m.VoteRequest):
                self._log_claim(nid, "pre-vote" if msg.pre_vote else "Vote", msg.end_offset, msg.last_epoch, node)
                if not msg.pre_vote:
                    self._stored(node, msg.epoch, "Vote request", nid)
            elif isinstance(msg, m.VoteResponse) and msg.granted and not msg.pre_vote:
                self._stored(node, msg.epoch, f"vote granted to {env.dst}", env.dst)
            elif isinstance(msg, m.BeginQuorumEpochRequest):
                self._stored(node, msg.epoch, "BeginQuorumEpoch", None, leader=nid)
        state = core.state
        if not isinstance(state, Leader):
            # Only a leader defers its flushes: whatever else a node holds flushed, it flushed itself.
            self.reported[nid] = flushed
        else:
            answer = core.describe_quorum(now)
            own = [r.log_end_offset for r in answer.voters if r.replica_id == nid]
            # What the driver reported flushed, or the node flushed itself before it led (a flush
            # thread may run ahead of its report), no more than the log still holds durably.
            reported = min(self.reported.get(nid, 0), flushed)
            if own and not reported <= own[0] <= flushed:
                self.fail(
                    "DurableClaims",
                    f"leader {nid} describes its own log end as {own[0]} while its log is flushed to {flushed}, "
                    f"{reported} of it reported",
                )
            ends = [r.log_end_offset for r in answer.voters]
            if ends and nid in core.voter_set:
                reached = majority_end(ends)
                if reached > state.epoch_start_offset and core.high_watermark < reached:
                    self.fail(
                        "DurableClaims",
                        f"leader {nid} (epoch {state.epoch}) keeps its high-water mark at {core.high_watermark} "
                        f"though a majority of its voters' end offsets {sorted(ends)} reach {reached}",
                    )

    def _log_claim(self, nid: int, what: str, offset: int, epoch: int, node: DiskNode) -> None:
        log = node.log
        end, last = log.end_offset(), log.last_epoch()
        # The log start is durable too: the records before it are in a frozen snapshot (a leader's
        # retention may drop an unflushed tail its snapshot covers).
        flushed = max(log.flushed_end_offset(), log.start_offset())
        if offset > flushed or (offset, epoch) != (end, last):
            self.fail(
                "DurableClaims",
                f"node {nid} sent a {what} claiming offset {offset} in epoch {epoch}; its log ends at {end} "
                f"in epoch {last}, flushed to {flushed}",
            )

    def _stored(self, node: DiskNode, epoch: int, what: str, voted: int | None, leader: int | None = None) -> None:
        stored = node.quorum.read()
        held = stored is not None and stored.leader_epoch == epoch
        if held and voted is not None:
            held = stored is not None and stored.voted_id == voted
        if held and leader is not None:
            held = stored is not None and stored.leader_id == leader
        if not held:
            self.fail(
                "DurableClaims",
                f"node {node.node_id} sent {what} in epoch {epoch} while its quorum-state holds {stored}",
            )


class RecoversDurableState:
    """RecoversDurableState: a restarted node's storage and core are what its disk held at the crash."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.images: dict[int, DiskImage] = {}
        """node id -> its disk when its new incarnation was about to start, until the start is judged."""
        self.restarts = 0

    def starting(self, node: DiskNode) -> None:
        self.images[node.node_id] = DiskImage.of(node)

    def judge(self, node: DiskNode) -> None:
        """The step just taken was the node's start: judge it against its disk image."""
        image = self.images.pop(node.node_id, None)
        core = node.core
        if image is None or core is None:
            return
        self.restarts += 1
        nid = node.node_id
        now = DiskImage.of(node)
        stored = image.quorum
        epoch = max(stored.leader_epoch if stored is not None else 0, image.last_epoch)
        if core.epoch > epoch and core.voter_set.ids == (nid,):
            # A voter alone in its set elects itself, commits and may snapshot within its start
            # step: its disk only grew.
            held = image.latest_snapshot
            if now.log_end < image.log_end or (held is not None and (now.latest_snapshot or held) < held):
                self.fail("RecoversDurableState", f"node {nid} restarted on {now}; its disk held {image}")
            return
        if replace(now, quorum=image.quorum) != image:  # (a fresh disk gets its first quorum-state at start)
            self.fail("RecoversDurableState", f"node {nid} restarted on {now}; its disk held {image}")
        if core.epoch != epoch:
            self.fail("RecoversDurableState", f"node {nid} restarted in epoch {core.epoch}; its disk held {image}")
        if stored is not None and stored.leader_epoch == core.epoch:
            # (A leader restarts Resigned in its stored epoch, voter or not: its own id stays the leader's.)
            if core.voted_id != stored.voted_id or core.leader_id != stored.leader_id:
                self.fail(
                    "RecoversDurableState",
                    f"node {nid} restarted with vote {core.voted_id} and leader {core.leader_id} in epoch "
                    f"{core.epoch}; its quorum-state held {stored}",
                )
        elif core.voted_id is not None or core.leader_id is not None:
            self.fail(
                "RecoversDurableState",
                f"node {nid} restarted with vote {core.voted_id} and leader {core.leader_id} in epoch {core.epoch}, "
                f"which its quorum-state ({stored}) never held",
            )
        committed = 0 if image.latest_snapshot is None else image.latest_snapshot.offset
        if core.high_watermark != committed or core.applied_offset != committed or core.is_leader:
            self.fail(
                "RecoversDurableState",
                f"node {nid} restarted with high-water mark {core.high_watermark}, applied "
                f"{core.applied_offset}, leading {core.is_leader}; its latest snapshot ends at {committed}",
            )


class DurabilityRules:
    """The simulator's hook for DurableClaims, RecoversDurableState and a snapshot transfer's
    lifecycle (`node.sim.snapshot_transfer`)."""

    def __init__(self, fail: Fail, nodes: Mapping[int, SimulatedNode]) -> None:
        self.claims = DurableClaims(fail)
        self.recovery = RecoversDurableState(fail)
        self.transfers = SnapshotTransfer(nodes, fail)
        self._incarnations: dict[int, int] = {}

    def starting(self, node: DiskNode) -> None:
        """The node's new incarnation is about to start on its disk."""
        self.recovery.starting(node)
        self.claims.reported.pop(node.node_id, None)

    def flushed(self, node: DiskNode) -> None:
        """The driver is about to report a completed flush to the node's core."""
        self.claims.reported[node.node_id] = node.log.flushed_end_offset()

    def sent(self, node: SimulatedNode, out: Output, now: int) -> None:
        """After a step of `node` whose output is `out`."""
        if self._incarnations.get(node.node_id) != node.incarnation:
            self._incarnations[node.node_id] = node.incarnation
            self.recovery.judge(node)
        self.claims.judge(node, out, now)
        self.transfers.judge(node, out, now)
