"""The sans-IO Raft core (KIP-595 with pre-vote, KIP-996, and check-quorum).

`RaftCore` is the client of Kafka's raft module (KafkaRaftClient): the public steps below, the
dispatch of messages to thin handlers and of timers to the current state's poll. The work is
split by responsibility as Kafka does it: `quorum_state` (transitions and their persistence),
`states` (each election state its own class: the vote tally, the follower's fetch timer, the
leader's replica progress and check-quorum), `voters` (who votes), `election`, `replication`
and `snapshots` (the handlers), `context` (what they share), `output` (what a step returns).

API (stable; the server and the simulator drive it)::

    core = RaftCore(config, node_id, voters, log, quorum_store, snapshot_store, random.Random(seed))
    out = core.start(now_ms)                 # once, after storage recovery
    out = core.handle(envelope, now_ms)      # a message arrived (request or response)
    out = core.tick(now_ms)                  # time passed; call at (or after) out.deadline
    base, out = core.append(records, now_ms) # leader only: raises NotLeader otherwise
    out = core.resign(now_ms)                # graceful: hand leadership to the most caught-up voter
    out = core.create_snapshot(snapshot_id, records, now_ms)  # at a committed offset
    out = core.flushed(now_ms)               # deferred flush only: the log is durable to out.flush_to
    core.describe_quorum(now_ms)             # what DescribeQuorum answers

Every step returns an `Output`:

- `messages`: `Envelope`s to send. All storage effects of the step (appends, flushes, the
  quorum-state write, truncations, snapshot writes) are done and durable before the step returns,
  so a driver may send these at once: a voter's Fetch offset, a granted vote and an
  acknowledgement all imply durability.
- `events`: journal events (dicts with `ev` plus the fields of docs/contracts.md's Raft rows);
  the driver adds `ts`, `mono` and `node`.
- `updates`: for the StateMachine, in order: `LoadSnapshot`, `Commit` (batches below the
  high-water mark, never twice), `LeaderChange`.
- `deadline`: the absolute time (ms) at which `tick` must be called next (None: no timer).
- `flush_to`: None, unless `deferred_flush` is on (below) and the step appended as leader without
  flushing: then the driver must make the log durable up to at least this offset (after sending
  the step's messages, on any thread, as it likes) and then call `flushed`.

Deferred leader flush (`core.deferred_flush = True`, set by a driver that can flush off its event
loop, before `start`): as in Kafka, the leader's own appends are not fsynced within the step, so
followers can fetch them while the leader's fsync runs (the two fsyncs overlap instead of adding
up). The leader counts only its own flushed end offset toward the high-water mark, so nothing is
committed on the strength of its unflushed tail; `flushed` lets it count what became durable — only
a flush reported by `flushed` (or done by the core itself) counts, never the log's flushed end as a
flush thread may have moved it, and its `flush` event is journalled before any `hw` it enables. Every
other write stays synchronous: a voter's Fetch offset and votes still imply durability, and a leader
leaving office flushes its tail before its next message.

`now_ms` is the node's monotonic clock in ms; it must never go backwards. Leader batches carry it
as their append time. Correlation: each request the core sends carries a fresh `ref` in its
envelope (a negative integer, so a transport can tell it from its own tags); the transport must
deliver the matching response with the same `ref` (responses with an unknown `ref` are ignored as
stale). For a request it receives, the core copies the incoming envelope's `ref` onto its response.
A transport that learns a request will get no response (connection refused or lost) should deliver
`messages.RequestFailed` with that `ref`: the core then retries that peer after a backoff that grows
with its consecutive failures, and a (pre-)vote round counts the peer as not granting, so that a
round that can no longer win ends at once (a split vote between two live nodes while the third is
down is settled in a backoff, not a whole election timeout).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kraftlab.node.bugs import BugSet
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.election import Election
from kraftlab.node.raft.membership.changes import VoterChanges
from kraftlab.node.raft.membership.log_voters import ControlRecordState
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, KRAFT_VERSION_1
from kraftlab.node.raft.output import Commit, LeaderChange, LoadSnapshot, NotLeader, Output, RaftSafetyError, Update
from kraftlab.node.raft.ports import OffsetAndEpoch, QuorumStateStore, Record, ReplicatedLog, SnapshotStore
from kraftlab.node.raft.quorum_state import QuorumState
from kraftlab.node.raft.replication import ZOO_FLUSH_INTERVAL_MS, Replication
from kraftlab.node.raft.snapshots import Snapshots
from kraftlab.node.raft.states import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Role,
    Unattached,
)
from kraftlab.node.raft.voters import VoterSet

__all__ = [
    "ZOO_FLUSH_INTERVAL_MS",
    "Commit",
    "LeaderChange",
    "LoadSnapshot",
    "NotLeader",
    "Output",
    "RaftCore",
    "RaftSafetyError",
    "Update",
    "core_class_with",
]

Handler = Callable[[m.Envelope, Any, int], None]


class RaftCore(Election, Replication, Snapshots, VoterChanges):
    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        voters: Sequence[int] | VoterSet,
        log: ReplicatedLog,
        quorum: QuorumStateStore,
        snapshots: SnapshotStore,
        rng: random.Random,
        *,
        journal: bool = True,
        roles: Sequence[str] | None = None,
        bugs: BugSet | None = None,
        deferred_flush: bool = False,
        directory_id: uuid.UUID | None = None,
        bootstrap: Sequence[int] = (),
    ) -> None:
        if bugs is not None:
            self.bugs = bugs
        self.deferred_flush = deferred_flush
        self.config = config
        self.node_id = node_id
        self.directory_id = directory_id
        self.bootstrap = tuple(bootstrap)
        initial = voters if isinstance(voters, VoterSet) else VoterSet.of_ids(voters)
        # An empty initial set is the dynamic mode: the voters come from the bootstrap checkpoint,
        # snapshots and the log (KIP-853); a static quorum's set is in force from offset 0.
        self.control = ControlRecordState(initial, KRAFT_VERSION_0 if len(initial) else KRAFT_VERSION_1)
        self.log = log
        self.quorum = quorum
        self.quorum_state = QuorumState(node_id, quorum, self.control.voters, directory_id)
        self.snapshots = snapshots
        self.rng = rng
        self.journal = journal
        self.roles = list(roles) if roles is not None else (["controller"] if self.is_voter else ["broker"])
        self._dynamic = len(initial) == 0
        self._journalled_voters = None
        self._hw = 0
        self._applied = 0
        self._inflight = {}
        self._unreachable = {}
        self._ref = 0
        self._failures = 0
        self._out = Output()
        self._durable = -1
        self._zoo_hw_epoch = -1
        self._zoo_flush_at = 0
        self._handlers: dict[type[m.Message], Handler] = {
            m.VoteRequest: self._on_vote_request,
            m.VoteResponse: self._on_vote_response,
            m.BeginQuorumEpochRequest: self._on_begin_request,
            m.BeginQuorumEpochResponse: self._on_begin_response,
            m.EndQuorumEpochRequest: self._on_end_request,
            m.EndQuorumEpochResponse: self._on_end_response,
            m.FetchRequest: self._on_fetch_request,
            m.FetchResponse: self._on_fetch_response,
            m.FetchSnapshotRequest: self._on_fetch_snapshot_request,
            m.FetchSnapshotResponse: self._on_fetch_snapshot_response,
            m.DescribeQuorumRequest: self._on_describe_request,
            m.DescribeQuorumResponse: self._on_ignored,
            m.AddRaftVoterRequest: self._on_add_voter_request,
            m.RemoveRaftVoterRequest: self._on_remove_voter_request,
            m.UpdateRaftVoterRequest: self._on_update_voter_request,
            m.VoterChangeResponse: self._on_ignored,
            m.RequestFailed: self._on_request_failed,
        }
        self._polls: dict[type[EpochState], Callable[[Any, int], None]] = {
            Unattached: self._poll_unattached,
            Prospective: self._poll_prospective,
            Candidate: self._poll_candidate,
            Leader: self._poll_leader,
            Follower: self._poll_follower,
            Resigned: self._poll_resigned,
        }

    # ----------------------------------------------------------------- read-only views

    @property
    def role(self) -> Role:
        return self.quorum_state.state.role

    @property
    def is_leader(self) -> bool:
        return isinstance(self.quorum_state.state, Leader)

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def applied_offset(self) -> int:
        """Exclusive end offset of everything handed to the StateMachine (snapshot or commits)."""
        return self._applied

    # ----------------------------------------------------------------- public steps

    def start(self, now: int) -> Output:
        self._begin()
        latest = self.snapshots.latest()
        if latest is not None:
            self._applied = self._hw = latest.offset  # a snapshot only ever covers committed data
        self._load_voters(latest)
        stored = self.quorum_state.read()
        self._event(
            "start",
            roles=self.roles,
            voters=list(self.voters),
            log_start=self.log.start_offset(),
            log_end=self.log.end_offset(),
            hw=self._hw,
            # what the quorum-state file held (DurableVote: a restarted node remembers its vote)
            stored_epoch=None if stored is None else stored.leader_epoch,
            stored_vote=None if stored is None else stored.voted_id,
            # the disk this process runs on (KIP-853: a replaced disk is another voter)
            directory_id=None if self.directory_id is None else uuid_to_kafka(self.directory_id),
        )
        self._durable = self.log.flushed_end_offset()  # recovery keeps only the durable log
        if self._dynamic or self.control.kraft_version != KRAFT_VERSION_0:
            self._journal_voters("start")
        if latest is not None and latest.offset > 0:
            # (The bootstrap checkpoint 0-0 holds the first voter set only: no state to load.)
            self._out.updates.append(LoadSnapshot(latest, self.snapshots.read_records(latest)))
            self._event("snapshot", action="load", offset=latest.offset, epoch=latest.epoch)
        log_epoch = self.log.last_epoch()
        first_start = latest is None or latest.offset == 0  # none, or the bootstrap checkpoint 0-0
        if stored is None and first_start and self.log.end_offset() == 0 and self.is_voter:
            self._set_state(Unattached(0, None, self._fresh_deadline(now)), now)
        elif stored is None or log_epoch > stored.leader_epoch:
            self._set_state(Unattached(max(log_epoch, 0), None, self._unattached_deadline(now)), now)
        else:
            epoch = stored.leader_epoch
            if stored.leader_id == self.node_id and self.is_voter and self.bugs.on("resume-old-epoch"):
                # BUG ZOO: resume-old-epoch — lead the stored epoch again after a restart (KAFKA-10527).
                self.quorum_state.zoo_resume_unpersisted(Unattached(epoch, stored.voted_id, now))
                self._become_leader(now)
            elif stored.leader_id == self.node_id:
                # A restarted leader never leads the same epoch again — nor, as Kafka's QuorumState
                # has it, votes or knows another leader in it, whether or not it is still a voter
                # (a removed one becomes an observer when its Resigned wait ends).
                self._set_state(self._resigned(epoch, (), now), now)
            elif stored.leader_id is not None and stored.leader_id != self.node_id:
                self._set_state(
                    Follower(epoch, stored.leader_id, stored.voted_id, now + self.config.fetch_timeout_ms), now
                )
            else:
                self._set_state(Unattached(epoch, stored.voted_id, self._unattached_deadline(now)), now)
        return self._end(now)

    def _load_voters(self, latest: OffsetAndEpoch | None) -> None:
        """The voter set and kraft.version in force at start: the latest snapshot's (or the bootstrap
        checkpoint's) control records, then every KRaftVersion/KRaftVoters record the log holds
        after it (segments retention kept behind the snapshot are read past, as Kafka does)."""
        if latest is not None:
            self.control.reset_to_snapshot(self.snapshots.read_control_records(latest))
        if not self._dynamic and self.control.kraft_version == KRAFT_VERSION_0:
            return  # a static quorum's log holds no membership records: nothing to read
        log = self.log
        pos, end = log.start_offset(), log.end_offset()
        covered = 0 if latest is None else latest.offset  # retained log the snapshot already holds
        while pos < end:
            chunk = log.read(pos, self.config.fetch_max_bytes)
            if not chunk:
                break
            for batch in chunk:
                if batch.next_offset > covered:
                    self.control.apply_batch(batch)
                pos = batch.next_offset

    def handle(self, envelope: m.Envelope, now: int) -> Output:
        self._begin()
        self._handlers[type(envelope.message)](envelope, envelope.message, now)
        return self._end(now)

    def tick(self, now: int) -> Output:
        self._begin()
        return self._end(now)

    def next_offset(self) -> int:
        """The offset an append now would give its first record: the log's end, after a leader's
        records still lingering in its batch (what a state machine that writes its own offsets into
        records — a broker epoch — must ask, since the core appends control records of its own)."""
        state = self.state
        return self.log.end_offset() + (len(state.pending) if isinstance(state, Leader) else 0)

    def append(self, records: Sequence[Record], now: int) -> tuple[int, Output]:
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeader(self.leader_id, self.epoch)
        if not records:
            raise ValueError("append needs at least one record")
        self._begin()
        base = self.log.end_offset() + len(state.pending)
        if not state.pending:
            state.pending_since = now
        state.pending.extend(records)
        if self.config.append_linger_ms <= 0 or len(state.pending) >= self.config.max_batch_records:
            self._drain(state, now)
        return base, self._end(now)

    def flushed(self, now: int) -> Output:
        """The driver completed a flush (deferred flush): the log is durable up to
        `log.flushed_end_offset()`. The core journals `flush` and only then counts it toward the
        high-water mark (a flush completed but not yet reported here is not counted)."""
        self._begin()
        self._journal_flush()
        state = self.state
        if isinstance(state, Leader):
            self._maybe_advance_hw(state)
        return self._end(now)

    def resign(self, now: int) -> Output:
        """Graceful resignation (controlled shutdown): EndQuorumEpoch naming the most caught-up voters first."""
        self._begin()
        state = self.state
        if isinstance(state, Leader):
            ranked = sorted(self.voter_set.others(self.node_id), key=lambda v: -state.voters[v].end_offset)
            self._set_state(self._resigned(state.epoch, tuple(ranked), now), now)
        return self._end(now)

    def describe_quorum(self, now: int) -> m.DescribeQuorumResponse:
        state = self.state
        if not isinstance(state, Leader):
            return m.DescribeQuorumResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, self._hw)
        durable = self._durable_end()

        voter_set = self.voter_set

        def replica(rid: int, p: Any, directory: uuid.UUID | None) -> m.ReplicaState:
            if rid == self.node_id:
                return m.ReplicaState(rid, durable, now, now, directory)
            return m.ReplicaState(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms, directory)

        def named(rid: int) -> uuid.UUID | None:
            voter = voter_set.voter(rid)
            return None if voter is None else voter.directory_id

        observers = sorted(state.observers.items(), key=lambda kv: (kv[0][0], str(kv[0][1] or "")))
        return m.DescribeQuorumResponse(
            m.Errors.NONE,
            self.node_id,
            state.epoch,
            self._told_hw(state),
            tuple(replica(r, p, named(r)) for r, p in sorted(state.voters.items())),
            tuple(replica(rid, p, directory) for (rid, directory), p in observers),
            tuple((v, voter.endpoints) for v in voter_set if (voter := voter_set.voter(v)) is not None),
        )

    # ----------------------------------------------------------------- step plumbing

    def _begin(self) -> None:
        self._out = Output()

    def _end(self, now: int) -> Output:
        if self.bugs.on("ack-before-fsync"):
            self._zoo_periodic_flush(now)  # BUG ZOO: ack-before-fsync
        quorum_state = self.quorum_state
        for _ in range(8):  # a transition made by the poll gets its own poll (to send its requests)
            state = quorum_state.state
            self._poll(state, now)
            if quorum_state.state is state:
                break
        if self._applied < self._hw:
            self._deliver_commits()
        out = self._out
        out.deadline = self._next_deadline(now)
        return out

    def _poll(self, state: EpochState, now: int) -> None:
        inflight = self._inflight
        if inflight:
            for dst in [d for d, (_, deadline) in inflight.items() if deadline <= now]:
                del inflight[dst]
        self._polls[type(state)](state, now)

    def _next_deadline(self, now: int) -> int | None:
        state = self.quorum_state.state
        times = [d for _, d in self._inflight.values()]
        if isinstance(state, Follower):
            times.append(state.next_timer(now, state.leader_id in self._inflight))
        elif isinstance(state, Leader):
            timer = state.next_timer(now, self.config.append_linger_ms)
            if timer is not None:
                times.append(timer)
        else:
            times.append(state.next_timer(now))
        return min(times) if times else None

    def _on_describe_request(self, env: m.Envelope, req: m.DescribeQuorumRequest, now: int) -> None:
        self._reply(env, self.describe_quorum(now))

    def _on_ignored(self, env: m.Envelope, message: m.Message, now: int) -> None:
        return None


def core_class_with(bugs: BugSet) -> type[RaftCore]:
    """A RaftCore subclass whose instances carry `bugs` (for drivers that take a core class: the
    simulator's `core_class`, the server's bug registry). The empty set gives RaftCore itself."""
    if not bugs:
        return RaftCore
    return type(f"RaftCore[{bugs}]", (RaftCore,), {"bugs": bugs})
