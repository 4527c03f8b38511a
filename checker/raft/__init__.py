"""Raft invariants over node journals (the checks of Kafka's RaftEventSimulationTest, offline).

The journals are replayed once (`replay.Replay`: each node's journal in its own order rebuilds
its log — appends, truncations, snapshots, restarts —, its epochs, roles and high-water marks);
each rule below is then one class of `rules`, judged alone over that replay (checker.rules: its
own verdict, count and time in the result's `rules`):

- SingleLeader: at most one node is leader in any epoch.

Every rule that counts a majority (MajorityReachedHighWatermark, StaleLeader, ElectedByMajority)
counts it of the voter set in force (KIP-853: from the node's journalled `voters` events, a set in
force once appended; the static `start` voters otherwise); the rules across voter sets
(ElectedByMajority, OneChangeAtATime, MajoritiesIntersect, RemovedLeaderResigns,
ReplacedDiskNeverVotes) are stated in checker.raft.membership_rules; the journal held to its
contract (JournalFields, VotersAtStart, VoterChangeSequence, RoleLines, LogContinuity,
LinesInTheirState: what these rules read is there, in order, and agrees with itself) in checker.raft.journal_contract.
- MonotonicEpoch: a node's epoch never goes down (for a voter it is durable across restarts — an
  observer learns it again from the leader; a restart with
  an empty log — new or wiped storage — starts the node's history over).
- DurableVote: a restarted node's quorum-state (as its `start` line reports what it read) still
  holds the last vote it granted before the restart — the same candidate in that epoch, or a later
  epoch — unless its quorum-state was found damaged.
- SingleVote: a node votes for at most one candidate per epoch (its granted votes and the
  `voted_for` of its transitions, a candidate's vote for itself included), across restarts unless
  its quorum-state was lost or damaged.
- CheckpointedHighWatermark: the high-water mark a node recovers from its checkpoint (`recovery`)
  is one it had journalled before (an `hw`, or a snapshot's end on `start`).
- MonotonicHighWatermark: a node's high-water mark never goes down within one process life.
- MajorityReachedHighWatermark: when a leader advances its high-water mark to H, a majority of
  voters hold the entry at H-1 (same epoch and CRC) durably — appended and covered by a later
  `flush` (the durable end), or by a snapshot. When the journals share one kernel's clock
  (`Journals.shared_clock`, the namespace lab), "hold" means before the leader's `hw` line by that
  clock: each follower journals its flush before it sends the Fetch that acknowledges it, so a
  leader that counts an offset no majority had flushed yet is caught even if they flush it later.
  Otherwise cross-node order is not trusted (clocks skew), and
  for the other voters "hold" means at some point in their journal; the leader's own copy counts
  only if its flush is journalled before that `hw` line (the core counts its own durable end
  only from flushes it journalled). A journal may be cut early (copied from a live node), so a
  voter whose journal ends before the leader's `hw` line (by the wall clock) and never shows a
  high-water mark of H or more (which would come after the leader's) is unknown, and the HW is
  reported only if the holders and the unknown together are no majority. And a follower's high-water mark never goes
  beyond its own durable end: it journals `flush` before the Fetch that acknowledges the offsets
  (a node writes a step's journal events before it sends the step's messages) and learns a HW
  no higher than its log. (A leader may: with a deferred leader flush, as in Kafka, a majority
  of followers can commit what the leader has not flushed yet.) A journal with no `flush` event
  at all (older nodes, hand-built journals) counts appends as durable.
- CommittedPrefixAgreement: every node that saw an offset committed saw the same CRC there, no
  node's final log differs from a committed CRC below that node's own high-water mark (beyond it,
  a node cut off when the journals end may still hold a tail it has not learned is divergent),
  and no node truncates an entry below its own
  high-water mark (except to replace its log with a snapshot, or to cut a corrupt tail found on
  recovery: storage damage is reported by its own `corruption` event).
- LogMatching: Raft's Log Matching property over what the nodes stored — one entry (CRC) per
  offset and epoch across every node and time; a log's epochs never go down as its offsets rise;
  two logs (each node's final log, each leader's log when elected) that hold the same epoch at an
  offset hold the same epochs at every offset below it that both hold.
- LeaderCompleteness: every entry committed in an epoch is in the log of every leader of a later
  epoch at the moment it became leader.
- NoUncommittedApply: a node applies an offset only below its high-water mark, with the
  committed CRC.
- StaleLeader: a leader's `quorum` samples (the age of each voter's last Fetch) never show,
  twice in a row in one epoch, fewer than a majority (counting the leader) heard from within the
  check-quorum timeout (1.5 × fetch timeout) plus a slack: such a leader must have resigned.
  Two samples, because one sample's clock reading may differ from the step's it follows.
- AnsweredBeforeCommit: a controller journals a successful `decision` (written when it answers the
  request, with the last offset of the records it wrote) while its own high-water mark is not yet
  past that offset: it answered before its records were committed, so a failover can lose what a
  client was told succeeded (KIP-631: the active controller responds once the records commit).
  Reported once per process life.
- NodeStoppedOnSafetyError: a node journalled `fatal` — its Raft core hit a safety error or an
  unexpected exception (for example a read at an offset that is not a batch boundary): the node
  stops or is stuck, which is a finding, not an inconclusive run — unless that process life also
  journalled `corruption` (damaged storage, as the disk nemesis makes, may fail anywhere).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from kraftlab.checker.journal import Journals
from kraftlab.checker.raft.journal_contract import (
    JournalFields,
    LinesInTheirState,
    LogContinuity,
    RoleLines,
    VoterChangeSequence,
    VotersAtStart,
)
from kraftlab.checker.raft.membership_rules import (
    ElectedByMajority,
    MajoritiesIntersect,
    OneChangeAtATime,
    RemovedLeaderResigns,
    ReplacedDiskNeverVotes,
)
from kraftlab.checker.raft.replay import Replay
from kraftlab.checker.raft.rules import (
    STALE_LEADER_SLACK_MS,
    AnsweredBeforeCommit,
    CheckpointedHighWatermark,
    CommittedPrefixAgreement,
    DurableVote,
    LeaderCompleteness,
    LogMatching,
    MajorityReachedHighWatermark,
    MonotonicEpoch,
    MonotonicHighWatermark,
    NodeStoppedOnSafetyError,
    NoUncommittedApply,
    SingleLeader,
    SingleVote,
    StaleLeader,
)
from kraftlab.checker.rules import Rule, judge, select


def raft_rules(stale_leader_slack_ms: float = STALE_LEADER_SLACK_MS) -> list[Rule[Replay]]:
    """Every Raft rule, in the order they are judged and reported."""
    return [SingleLeader(), MonotonicEpoch(), DurableVote(), SingleVote(), CheckpointedHighWatermark(),
            MonotonicHighWatermark(), MajorityReachedHighWatermark(), CommittedPrefixAgreement(),
            LogMatching(), LeaderCompleteness(), NoUncommittedApply(), StaleLeader(stale_leader_slack_ms),
            AnsweredBeforeCommit(), NodeStoppedOnSafetyError(), ElectedByMajority(), OneChangeAtATime(),
            MajoritiesIntersect(), RemovedLeaderResigns(), ReplacedDiskNeverVotes(), JournalFields(), VotersAtStart(),
            VoterChangeSequence(), RoleLines(), LogContinuity(), LinesInTheirState()]


INVARIANTS = [r.name for r in raft_rules()]


def check_raft(journals: Journals, voters: list[int] | None = None,
               stale_leader_slack_ms: float = STALE_LEADER_SLACK_MS, *, only: Collection[str] | None = None,
               seconds: float | None = None) -> dict[str, Any]:
    """Judge the rules (those named in `only`, by default all) over one replay of `journals`;
    `voters` defaults to the union of `start` events' voters; `seconds` bounds the rules' time (the
    rules not reached in it are `unknown`)."""
    rules = select(raft_rules(stale_leader_slack_ms), only)
    replay = Replay(journals, voters)
    committed = replay.committed
    stats = {"nodes": len(replay.nodes), "voters": replay.voters,
             "epochs_with_leader": len({int(el.entry["epoch"]) for el in replay.elections}),
             "committed_offsets": len(committed),
             "applies": len(replay.events("apply"))}
    return judge(rules, replay, seconds=seconds, stats=stats)
