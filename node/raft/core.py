"""The sans-IO Raft core (KIP-595 with pre-vote, KIP-996, and check-quorum).

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.control import leader_change_record
from kraftlab.node.raft.ports import (
    Batch,
    OffsetAndEpoch,
    QuorumStateData,
    QuorumStateStore,
    Record,
    ReplicatedLog,
    SnapshotStore,
)
from kraftlab.node.raft.states import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    ParkedFetch,
    Progress,
    Prospective,
    Resigned,
    Role,
    SnapshotFetch,
    Unattached,
)
from kraftlab.node.raft.voters import VoterHistory, VoterSet

ZOO_FLUSH_INTERVAL_MS = 1000
"""BUG ZOO: ack-before-fsync — the period of the only flushes (like an OS writeback)."""


class NotLeader(Exception):
    """`append` on a node that is not the leader; carries the leader it knows of."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftSafetyError(Exception):
    """The core was asked to do something that would break Raft's safety (for example truncate
    below the high-water mark): the node must stop rather than continue."""


@dataclass(slots=True)
class LoadSnapshot:
    snapshot_id: OffsetAndEpoch
    records: list[Record]


@dataclass(slots=True)
class Commit:
    batches: list[Batch]


@dataclass(slots=True)
class LeaderChange:
    leader_id: int | None
    epoch: int
    local_is_leader: bool


Update = LoadSnapshot | Commit | LeaderChange


@dataclass(slots=True)
class Output:
    messages: list[m.Envelope] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    deadline: int | None = None
    flush_to: int | None = None

    def merge(self, later: Output) -> None:
        """Append a later step's output (its deadline supersedes this one's)."""
        self.messages.extend(later.messages)
        self.events.extend(later.events)
        self.updates.extend(later.updates)
        self.deadline = later.deadline
        if later.flush_to is not None:
            self.flush_to = max(self.flush_to or 0, later.flush_to)


class RaftCore:
    bugs: BugSet = NO_BUGS
    """Test-only planted bugs (node.bugs); empty unless a zoo run asks for one."""

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
    ) -> None:
        if bugs is not None:
            self.bugs = bugs
        self.deferred_flush = deferred_flush
        self.config = config
        self.node_id = node_id
        self.voter_history = VoterHistory(voters if isinstance(voters, VoterSet) else VoterSet.of_ids(voters))
        self.log = log
        self.quorum = quorum
        self.snapshots = snapshots
        self.rng = rng
        self.journal = journal
        self.roles = list(roles) if roles is not None else (["controller"] if self.is_voter else ["broker"])
        self.state: EpochState = Unattached(0, None, 0)
        self._hw = 0
        self._applied = 0
        self._persisted: tuple[int, int | None, int | None] | None = None
        self._announced: tuple[int | None, int, bool] | None = None
        self._inflight: dict[int, tuple[int, int]] = {}
        self._unreachable: dict[int, int] = {}  # consecutive failed requests per peer (RequestFailed)
        self._ref = 0
        self._failures = 0
        self._out = Output()
        # The durable end offset this core has counted and journalled (`flush`): raised only by a flush
        # the core did itself or one the driver reported (`flushed`), cut by truncations. The leader
        # counts this, never the log's own flushed end, which a driver's flush thread may move earlier.
        self._durable = -1
        self._zoo_hw_epoch = -1  # BUG ZOO: hw-before-leader-change — the epoch whose HW was initialised
        self._zoo_flush_at = 0  # BUG ZOO: ack-before-fsync — when the periodic flush runs next
        self._handlers = {
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
            m.RequestFailed: self._on_request_failed,
        }

    # ----------------------------------------------------------------- read-only views

    @property
    def voter_set(self) -> VoterSet:
        """The voter set this node acts on now (the one in force at its log's end)."""
        return self.voter_history.latest

    @property
    def voters(self) -> tuple[int, ...]:
        return self.voter_history.latest.ids

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_history.latest

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, Leader)

    @property
    def leader_id(self) -> int | None:
        if isinstance(self.state, Leader | Resigned):
            return self.node_id
        return self.state.leader_id

    @property
    def voted_id(self) -> int | None:
        if isinstance(self.state, Candidate):
            return self.node_id
        return self.state.voted_id

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
        stored = self.quorum.read()
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
        )
        self._durable = self.log.flushed_end_offset()  # recovery keeps only the durable log
        if latest is not None:
            self._out.updates.append(LoadSnapshot(latest, self.snapshots.read_records(latest)))
            self._event("snapshot", action="load", offset=latest.offset, epoch=latest.epoch)
        log_epoch = self.log.last_epoch()
        if stored is None and latest is None and self.log.end_offset() == 0 and self.is_voter:
            self._set_state(Unattached(0, None, self._fresh_deadline(now)), now)
        elif stored is None or log_epoch > stored.leader_epoch:
            self._set_state(Unattached(max(log_epoch, 0), None, self._unattached_deadline(now)), now)
        else:
            self._persisted = (stored.leader_epoch, stored.leader_id, stored.voted_id)
            epoch = stored.leader_epoch
            if stored.leader_id == self.node_id and self.is_voter and self.bugs.on("resume-old-epoch"):
                # BUG ZOO: resume-old-epoch — lead the stored epoch again after a restart (KAFKA-10527).
                self.state = Unattached(epoch, stored.voted_id, now)
                self._become_leader(now)
            elif stored.leader_id == self.node_id and self.is_voter:
                # A restarted leader never leads the same epoch again.
                self._set_state(self._resigned(epoch, (), now), now)
            elif stored.leader_id is not None and stored.leader_id != self.node_id:
                self._set_state(
                    Follower(epoch, stored.leader_id, stored.voted_id, now + self.config.fetch_timeout_ms), now
                )
            else:
                self._set_state(Unattached(epoch, stored.voted_id, self._unattached_deadline(now)), now)
        return self._end(now)

    def handle(self, envelope: m.Envelope, now: int) -> Output:
        self._begin()
        self._handlers[type(envelope.message)](envelope, envelope.message, now)
        return self._end(now)

    def tick(self, now: int) -> Output:
        self._begin()
        return self._end(now)

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

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record], now: int) -> Output:
        """Store a snapshot of the state machine at a committed, applied offset and delete the log before it."""
        if snapshot_id.offset > self._applied or snapshot_id.offset > self._hw:
            raise ValueError(f"snapshot {snapshot_id} beyond the applied/committed offset {self._applied}/{self._hw}")
        self._begin()
        latest = self.snapshots.latest()
        if latest is None or snapshot_id.offset > latest.offset:
            self.snapshots.write(snapshot_id, records, now)
            self._event("snapshot", action="create", offset=snapshot_id.offset, epoch=snapshot_id.epoch)
            self.log.delete_before(snapshot_id.offset)
            self._delete_snapshots_before(snapshot_id)
        return self._end(now)

    def describe_quorum(self, now: int) -> m.DescribeQuorumResponse:
        state = self.state
        if not isinstance(state, Leader):
            return m.DescribeQuorumResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, self._hw)

        def replica(rid: int, p: Progress) -> m.ReplicaState:
            if rid == self.node_id:
                return m.ReplicaState(rid, self._durable_end(), now, now)
            return m.ReplicaState(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)

        return m.DescribeQuorumResponse(
            m.Errors.NONE,
            self.node_id,
            state.epoch,
            self._hw,
            tuple(replica(r, p) for r, p in sorted(state.voters.items())),
            tuple(replica(r, p) for r, p in sorted(state.observers.items())),
        )

    # ----------------------------------------------------------------- step plumbing

    def _begin(self) -> None:
        self._out = Output()

    def _end(self, now: int) -> Output:
        if self.bugs.on("ack-before-fsync") and now >= self._zoo_flush_at:
            # BUG ZOO: ack-before-fsync (KAFKA-10533) — appends are flushed only by a periodic
            # background flush, long after their offsets were acknowledged and counted.
            self._zoo_flush_at = now + ZOO_FLUSH_INTERVAL_MS
            if self.log.flushed_end_offset() < self.log.end_offset():
                self.log.flush()
                self._journal_flush(always=True)
        for _ in range(8):  # a transition made by the poll gets its own poll (to send its requests)
            state = self.state
            self._poll(now)
            if self.state is state:
                break
        if self._applied < self._hw:
            self._deliver_commits()
        out = self._out
        out.deadline = self._next_deadline(now)
        return out

    def _event(self, ev: str, **fields: Any) -> None:
        if self.journal:
            fields["ev"] = ev
            self._out.events.append(fields)

    def _send(self, dst: int, message: m.Request, now: int) -> None:
        self._ref -= 1
        self._inflight[dst] = (self._ref, now + self.config.request_timeout_ms)
        self._out.messages.append(m.Envelope(self.node_id, dst, message, self._ref))

    def _reply(self, request: m.Envelope, message: m.Response) -> None:
        self._out.messages.append(m.Envelope(self.node_id, request.src, message, request.ref))

    def _take_inflight(self, envelope: m.Envelope) -> bool:
        """True when `envelope` answers the request outstanding to its source (then no longer outstanding)."""
        entry = self._inflight.get(envelope.src)
        if entry is None or entry[0] != envelope.ref:
            return False
        del self._inflight[envelope.src]
        if self._unreachable:
            self._unreachable.pop(envelope.src, None)
        return True

    def _on_request_failed(self, env: m.Envelope, failed: m.RequestFailed, now: int) -> None:
        """The request outstanding to `env.src` will get no response: retry it after a backoff."""
        entry = self._inflight.get(env.src)
        if entry is None or entry[0] != env.ref:
            return
        strikes = self._unreachable.get(env.src, 0)
        self._unreachable[env.src] = strikes + 1
        wait = min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << min(strikes, 10))
        self._inflight[env.src] = (0, now + wait)  # ref 0 is never a request's (they are negative)
        state = self.state
        if isinstance(state, Prospective | Candidate):
            state.rejected.add(env.src)
            self._round_lost(state, now)

    def _round_lost(self, state: Prospective | Candidate, now: int) -> None:
        """A (pre-)vote round rejected by a majority (explicitly or unreachable) ends after a backoff."""
        if not self.voter_set.is_majority(state.rejected):
            return
        if isinstance(state, Prospective):
            state.deadline = min(state.deadline, now)  # the poll starts the next round after a backoff
        else:
            state.deadline = min(state.deadline, now + self._backoff())

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return self.rng.randrange(t, 2 * t)

    def _backoff(self) -> int:
        bound = min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << min(self._failures, 20))
        return self.rng.randrange(0, bound + 1)

    def _unattached_deadline(self, now: int) -> int:
        if self.voter_set.is_only_voter(self.node_id):
            return now
        return now + (self._election_timeout() if self.is_voter else 0)

    def _fresh_deadline(self, now: int) -> int:
        """A fresh voter (no quorum-state, empty log, no snapshot: the quorum's first start) knows
        there is no leader to wait for: as KIP-595's bootstrap has it, it begins the vote once it
        can reach the voters, after a short random delay in [0, retry backoff) instead of a whole
        election timeout. It still pre-votes first (a pre-vote changes nobody's state), and every
        later election keeps the randomised election timeout."""
        if self.voter_set.is_only_voter(self.node_id):
            return now
        return now + self.rng.randrange(0, max(1, self.config.retry_backoff_ms))

    def _resigned(self, epoch: int, successors: tuple[int, ...], now: int) -> Resigned:
        others = self.voter_set.others(self.node_id)
        wait = self._election_timeout() if others else 0  # a lone voter has nobody to wait for
        return Resigned(epoch, now + wait, successors, set(others))

    # ----------------------------------------------------------------- transitions

    def _set_state(self, state: EpochState, now: int) -> None:
        old = self.state
        if (
            isinstance(old, Leader)
            and self.deferred_flush
            and self.log.flushed_end_offset() < self.log.end_offset()
            and not self.bugs.on("ack-before-fsync")  # BUG ZOO: ack-before-fsync leaves the tail to its flusher
        ):
            # Deferred flush: nothing this node says from now on (Fetch offsets, votes) may count
            # an unflushed tail as durable.
            self.log.flush()
            self._journal_flush()
        if isinstance(old, Leader) and old.parked and old is not state:
            for p in old.parked.values():
                self._out.messages.append(
                    m.Envelope(
                        self.node_id,
                        p.src,
                        m.FetchResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, state.epoch, None, self._hw),
                        p.ref,
                    )
                )
            old.parked.clear()
        self.state = state
        self._inflight.clear()
        leader = self.leader_id
        voted = self.voted_id
        persisted = (state.epoch, leader, voted)
        if persisted != self._persisted:
            self.quorum.write(QuorumStateData(state.epoch, leader, voted, self.voters))
            self._persisted = persisted
        role = state.role if self.is_voter else Role.OBSERVER
        self._event("role", role=role.value, epoch=state.epoch, leader=leader, voted_for=voted)
        announced = (leader, state.epoch, isinstance(state, Leader))
        if announced != self._announced:
            self._announced = announced
            self._out.updates.append(LeaderChange(*announced))

    def _observe(self, epoch: int, leader_id: int | None, now: int, src: int) -> bool:
        """React to an epoch and leader learned from a message from `src`; True when the state changed.

        A prospective node that gave up on its leader goes back to it only on hearing from the
        leader itself: other voters still naming it prove nothing (they may be cut off from it too).
        """
        if leader_id == self.node_id:
            leader_id = None
        state = self.state
        if epoch > state.epoch:
            if leader_id is not None:
                self._become_follower(epoch, leader_id, now)
            else:
                self._set_state(Unattached(epoch, None, self._unattached_deadline(now)), now)
            return True
        if epoch == state.epoch and leader_id is not None and isinstance(state, Unattached | Prospective | Candidate):
            if isinstance(state, Prospective) and state.leader_id == leader_id and src != leader_id:
                return False
            self._become_follower(epoch, leader_id, now)
            return True
        return False

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        voted = self.voted_id if epoch == self.epoch else None
        self._failures = 0
        self._set_state(Follower(epoch, leader_id, voted, now + self.config.fetch_timeout_ms), now)

    def _become_prospective(self, now: int, send_at: int) -> None:
        leader = self.state.leader_id if isinstance(self.state, Follower | Prospective) else None
        state = Prospective(
            self.epoch, self.voted_id, leader, send_at, send_at + self._election_timeout(), {self.node_id}
        )
        self._set_state(state, now)
        if self.voter_set.is_majority(state.granted):
            self._become_candidate(now)

    def _become_candidate(self, now: int) -> None:
        state = Candidate(self.epoch + 1, now + self._election_timeout(), {self.node_id})
        self._set_state(state, now)  # persists the vote for ourselves before any request goes out
        if self.voter_set.is_majority(state.granted):
            self._become_leader(now)

    def _become_leader(self, now: int) -> None:
        granted = sorted(self.state.granted) if isinstance(self.state, Candidate) else [self.node_id]
        self._failures = 0
        end = self.log.end_offset()
        voter_set = self.voter_set
        progress = {v: Progress(0, now, -1) for v in voter_set}
        state = Leader(self.epoch, end, progress, voter_set, unacknowledged=set(voter_set.others(self.node_id)))
        self._set_state(state, now)
        record = leader_change_record(self.node_id, voter_set.ids, granted)
        self._write_batch(state, Batch(end, state.epoch, (record,), True, now), now)

    # ----------------------------------------------------------------- the poll: timers and sends

    def _poll(self, now: int) -> None:
        inflight = self._inflight
        if inflight:
            for dst in [d for d, (_, deadline) in inflight.items() if deadline <= now]:
                del inflight[dst]
        state = self.state
        if isinstance(state, Follower):
            self._poll_follower(state, now)
        elif isinstance(state, Leader):
            self._poll_leader(state, now)
        elif isinstance(state, Unattached):
            if now >= state.deadline:
                if self.is_voter:
                    self._become_prospective(now, now)
                else:
                    self._bootstrap_fetch(state, now)
        elif isinstance(state, Prospective):
            if now >= state.deadline:
                self._failures += 1
                self._become_prospective(now, now + self._backoff())
            elif now >= state.send_at:
                request = m.VoteRequest(
                    state.epoch + 1, self.node_id, self.log.last_epoch(), self.log.end_offset(), True
                )
                self._solicit(state.granted, state.rejected, request, now)
        elif isinstance(state, Candidate):
            if now >= state.deadline:
                self._failures += 1
                self._become_prospective(now, now + self._backoff())
            else:
                request = m.VoteRequest(state.epoch, self.node_id, self.log.last_epoch(), self.log.end_offset(), False)
                self._solicit(state.granted, state.rejected, request, now)
        elif isinstance(state, Resigned):
            if now >= state.deadline:
                self._become_prospective(now, now)
            else:
                for v in state.unacknowledged:
                    if v not in inflight:
                        self._send(
                            v, m.EndQuorumEpochRequest(state.epoch, self.node_id, state.preferred_successors), now
                        )

    def _solicit(self, granted: set[int], rejected: set[int], request: m.VoteRequest, now: int) -> None:
        for v in self.voter_set.others(self.node_id):
            if v not in granted and v not in rejected and v not in self._inflight:
                self._send(v, request, now)

    def _bootstrap_fetch(self, state: Unattached, now: int) -> None:
        """An observer that knows no leader asks a random voter (whose answer names the leader), one
        request at a time, every retry backoff (as Kafka's observers do): not once per election
        timeout, which left brokers up to seconds behind a new leader. Voters backing off after a
        failed request (RequestFailed) are skipped until their backoff ends."""
        inflight = self._inflight
        idle = [v for v in self.voters if v not in inflight]
        if idle and not any(ref != 0 for ref, _ in inflight.values()):  # ref 0: a peer backing off
            target = idle[self.rng.randrange(len(idle))]
            self._send(
                target, m.FetchRequest(state.epoch, self.node_id, self.log.end_offset(), self.log.last_epoch()), now
            )
        state.deadline = now + self.config.retry_backoff_ms

    def _poll_follower(self, state: Follower, now: int) -> None:
        if now >= state.deadline:
            if self.is_voter:
                self._become_prospective(now, now)
            else:
                self._set_state(Unattached(state.epoch, None, now), now)
            return
        leader = state.leader_id
        if leader in self._inflight or now < state.retry_at:
            return
        if state.snapshot is not None:
            fetch = state.snapshot
            size = self.config.fetch_snapshot_max_bytes
            self._send(
                leader, m.FetchSnapshotRequest(state.epoch, self.node_id, fetch.snapshot_id, fetch.position, size), now
            )
        else:
            request = m.FetchRequest(
                state.epoch, self.node_id, self.log.end_offset(), self.log.last_epoch(), self.config.fetch_max_wait_ms
            )
            self._send(leader, request, now)

    def _poll_leader(self, state: Leader, now: int) -> None:
        if state.pending and now >= state.pending_since + self.config.append_linger_ms:
            self._drain(state, now)
        if state.parked:
            for rid in [r for r, p in state.parked.items() if p.deadline <= now]:
                p = state.parked.pop(rid)
                self._answer_fetch(state, p.src, p.ref, p.fetch_offset, p.last_fetched_epoch)
        if not state.voter_set.is_only_voter(self.node_id):
            state.check_quorum_at = state.check_quorum_deadline(self.node_id, now, self.config.check_quorum_timeout_ms)
            if now >= state.check_quorum_at and self.bugs.on("no-check-quorum"):
                # BUG ZOO: no-check-quorum — an isolated leader stays leader (KAFKA-15489).
                state.check_quorum_at = now + self.config.check_quorum_timeout_ms
            elif now >= state.check_quorum_at:
                self._set_state(self._resigned(state.epoch, (), now), now)
                return
        for v in state.unacknowledged:
            if v not in self._inflight:
                self._send(v, m.BeginQuorumEpochRequest(state.epoch, self.node_id), now)

    def _next_deadline(self, now: int) -> int | None:
        state = self.state
        times = [d for _, d in self._inflight.values()]
        if isinstance(state, Follower):
            times.append(state.deadline)
            if state.leader_id not in self._inflight:
                times.append(max(state.retry_at, now))
        elif isinstance(state, Leader):
            if state.pending:
                times.append(state.pending_since + self.config.append_linger_ms)
            if state.parked:
                times.append(min(p.deadline for p in state.parked.values()))
            if not state.voter_set.is_only_voter(self.node_id):
                times.append(state.check_quorum_at)
        elif isinstance(state, Prospective):
            times.append(state.deadline)
            if state.send_at > now:
                times.append(state.send_at)
        else:
            times.append(state.deadline)
        return min(times) if times else None

    # ----------------------------------------------------------------- votes

    def _on_vote_request(self, env: m.Envelope, req: m.VoteRequest, now: int) -> None:
        def answer(granted: bool, reason: str, error: m.Errors = m.Errors.NONE) -> None:
            self._event(
                "vote",
                epoch=req.epoch,
                candidate=req.candidate_id,
                granted=granted,
                pre_vote=req.pre_vote,
                reason=reason,
            )
            self._reply(env, m.VoteResponse(error, self.epoch, self.leader_id, granted, req.pre_vote))

        if req.epoch < self.epoch:
            return answer(False, "stale epoch", m.Errors.FENCED_LEADER_EPOCH)
        voter_set = self.voter_set
        if self.node_id not in voter_set or req.candidate_id not in voter_set:
            return answer(False, "not a voter", m.Errors.INCONSISTENT_VOTER_SET)
        if req.pre_vote and req.epoch - 1 > self.epoch:
            # The candidate really is in a later epoch (its pre-vote asks for its epoch + 1), reached
            # in an election this node missed: adopt that epoch, as Raft does for any later term, or
            # the candidate could never be heard again (pre-votes change nobody's epoch).
            self._set_state(Unattached(req.epoch - 1, None, now + self._election_timeout()), now)
        up_to_date = (req.last_epoch, req.end_offset) >= (self.log.last_epoch(), self.log.end_offset())
        if self.bugs.on("vote-without-log-check"):
            up_to_date = True  # BUG ZOO: vote-without-log-check — the candidate's log is never compared
        if req.pre_vote:
            state = self.state
            if isinstance(state, Leader):
                return answer(False, "leader")
            if isinstance(state, Follower) and state.has_fetched:
                return answer(False, "following a live leader")
            return answer(up_to_date, "ok" if up_to_date else "log behind")
        if req.epoch > self.epoch:
            self._set_state(Unattached(req.epoch, None, now + self._election_timeout()), now)
        state = self.state
        if isinstance(state, Unattached | Prospective) and state.leader_id is None:
            if state.voted_id not in (None, req.candidate_id):
                return answer(False, f"voted for {state.voted_id}")
            if not up_to_date:
                return answer(False, "log behind")
            if state.voted_id is None or not isinstance(state, Unattached):
                # Persist the vote (quorum-state write) before the response goes out.
                self._set_state(Unattached(state.epoch, req.candidate_id, now + self._election_timeout()), now)
            return answer(True, "ok")
        return answer(False, f"already {state.role.value} in epoch")

    def _on_vote_response(self, env: m.Envelope, resp: m.VoteResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self.state
        ok = resp.error == m.Errors.NONE and resp.granted
        # A matching ref means the request was sent from the current state (transitions forget
        # outstanding requests), so a response counts for it whatever its (non-wire) pre_vote flag.
        if isinstance(state, Prospective):
            (state.granted if ok else state.rejected).add(env.src)
            if self.voter_set.is_majority(state.granted):
                self._become_candidate(now)
            else:
                self._round_lost(state, now)
        elif isinstance(state, Candidate) and resp.epoch == state.epoch:
            (state.granted if ok else state.rejected).add(env.src)
            if self.voter_set.is_majority(state.granted):
                self._become_leader(now)
            else:
                self._round_lost(state, now)

    # ----------------------------------------------------------------- Begin/EndQuorumEpoch

    def _on_begin_request(self, env: m.Envelope, req: m.BeginQuorumEpochRequest, now: int) -> None:
        if req.leader_id not in self.voter_set or req.leader_id == self.node_id:
            self._reply(env, m.BeginQuorumEpochResponse(m.Errors.INCONSISTENT_VOTER_SET, self.epoch, self.leader_id))
            return
        if req.epoch < self.epoch:
            self._reply(env, m.BeginQuorumEpochResponse(m.Errors.FENCED_LEADER_EPOCH, self.epoch, self.leader_id))
            return
        self._observe(req.epoch, req.leader_id, now, env.src)
        self._reply(env, m.BeginQuorumEpochResponse(m.Errors.NONE, self.epoch, self.leader_id))

    def _on_begin_response(self, env: m.Envelope, resp: m.BeginQuorumEpochResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self.state
        if isinstance(state, Leader) and resp.error == m.Errors.NONE and resp.epoch == state.epoch:
            state.unacknowledged.discard(env.src)

    def _on_end_request(self, env: m.Envelope, req: m.EndQuorumEpochRequest, now: int) -> None:
        if req.leader_id not in self.voter_set or req.leader_id == self.node_id:
            self._reply(env, m.EndQuorumEpochResponse(m.Errors.INCONSISTENT_VOTER_SET, self.epoch, self.leader_id))
            return
        if req.epoch < self.epoch:
            self._reply(env, m.EndQuorumEpochResponse(m.Errors.FENCED_LEADER_EPOCH, self.epoch, self.leader_id))
            return
        self._observe(req.epoch, req.leader_id, now, env.src)
        state = self.state
        if isinstance(state, Follower) and state.leader_id == req.leader_id and self.is_voter:
            successors = req.preferred_successors
            if self.node_id in successors:
                rank = successors.index(self.node_id)
                wait = min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << rank)
            else:
                wait = self._election_timeout()
            state.deadline = min(state.deadline, now + wait)
            state.has_fetched = False
        self._reply(env, m.EndQuorumEpochResponse(m.Errors.NONE, self.epoch, self.leader_id))

    def _on_end_response(self, env: m.Envelope, resp: m.EndQuorumEpochResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        if isinstance(self.state, Resigned) and resp.error == m.Errors.NONE:
            self.state.unacknowledged.discard(env.src)

    # ----------------------------------------------------------------- Fetch (leader side)

    def _not_leader_error(self, epoch: int) -> m.Errors | None:
        """The error a Fetch/FetchSnapshot at `epoch` gets here, or None when this node serves it."""
        if epoch > self.epoch:
            return m.Errors.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader):
            return m.Errors.NOT_LEADER_OR_FOLLOWER
        if epoch < self.epoch:
            return m.Errors.FENCED_LEADER_EPOCH
        return None

    def _progress(self, state: Leader, replica_id: int) -> Progress | None:
        if replica_id in state.voters:
            state.unacknowledged.discard(replica_id)
            return state.voters[replica_id]
        if replica_id < 0:
            return None
        return state.observers.setdefault(replica_id, Progress())

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        error = self._not_leader_error(req.epoch)
        if req.fetch_offset < 0 or req.max_wait_ms < 0 or not 0 <= req.last_fetched_epoch <= req.epoch:
            error = m.Errors.INVALID_REQUEST
        if error is not None:
            self._reply(env, m.FetchResponse(error, self.epoch, self.leader_id, self._hw))
            return
        state = self.state
        assert isinstance(state, Leader)
        progress = self._progress(state, req.replica_id)
        diverging, snapshot_id = self._validate_fetch(req.fetch_offset, req.last_fetched_epoch)
        hw_moved = False
        if progress is not None:
            progress.last_fetch_ms = now
            if diverging is None and snapshot_id is None:
                if req.fetch_offset > progress.end_offset:
                    progress.end_offset = req.fetch_offset
                if req.fetch_offset >= self.log.end_offset():
                    progress.last_caught_up_ms = now
                if req.replica_id in state.voters:
                    hw_moved = self._maybe_advance_hw(state)
        if (
            diverging is None
            and snapshot_id is None
            and not hw_moved
            and req.max_wait_ms > 0
            and req.fetch_offset >= self.log.end_offset()
            and (progress is None or req.replica_id in state.voters or progress.hw_sent >= self._hw)
        ):
            deadline = now + min(req.max_wait_ms, self.config.fetch_max_wait_ms)
            state.parked[env.src] = ParkedFetch(env.src, req.fetch_offset, req.last_fetched_epoch, env.ref, deadline)
            return
        state.parked.pop(env.src, None)
        self._answer_fetch(state, env.src, env.ref, req.fetch_offset, req.last_fetched_epoch)

    def _validate_fetch(self, offset: int, last_epoch: int) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
        """(diverging epoch, snapshot id) for a fetch position; both None when it continues our log."""
        log = self.log
        start = log.start_offset()
        if offset < start:
            return None, self.snapshots.latest()
        if offset == 0 and last_epoch == 0:
            return None, None
        found = log.end_offset_for_epoch(last_epoch)
        if found.epoch != last_epoch or found.offset < offset:
            if found.offset < start or found.epoch > last_epoch:
                # No epoch <= last_epoch left in the log (the answer is the log start and the epoch
                # before it): the replica's records before our log start differ from ours, and only
                # the snapshot covers them.
                return None, self.snapshots.latest()
            return found, None
        return None, None

    def _answer_fetch(self, state: Leader, dst: int, ref: Any, offset: int, last_epoch: int) -> None:
        diverging, snapshot_id = self._validate_fetch(offset, last_epoch)
        log = self.log
        batches: tuple[Batch, ...] = ()
        error = m.Errors.NONE
        if diverging is None and snapshot_id is None and offset < log.end_offset():
            try:
                batches = tuple(log.read(offset, self.config.fetch_max_bytes))
            except ValueError:  # not a batch boundary: no replica of ours fetches there
                error = m.Errors.INVALID_REQUEST
        response = m.FetchResponse(
            error, state.epoch, self.node_id, self._hw, log.start_offset(), batches, diverging, snapshot_id
        )
        progress = state.voters.get(dst) or state.observers.get(dst)
        if progress is not None:
            progress.hw_sent = self._hw
        self._out.messages.append(m.Envelope(self.node_id, dst, response, ref))

    def _maybe_advance_hw(self, state: Leader) -> bool:
        """The KAFKA-12619 rule: the HW moves only to an offset a majority holds durably, and only
        once that covers the leader's own LeaderChangeMessage (the epoch start offset)."""
        if self.bugs.on("ack-before-fsync"):
            # BUG ZOO: ack-before-fsync — the leader counts its own unflushed end offset.
            candidate = state.quorum_end_offset(self.node_id, self.log.end_offset())
        else:
            candidate = state.quorum_end_offset(self.node_id, self._durable_end())
        if self.bugs.on("hw-before-leader-change"):
            return self._zoo_advance_hw_early(state, candidate)
        if candidate <= state.epoch_start_offset or candidate <= self._hw:
            return False
        self._set_hw(candidate)
        self._complete_parked(state)
        return True

    def _zoo_advance_hw_early(self, state: Leader, candidate: int) -> bool:
        """BUG ZOO: hw-before-leader-change (KAFKA-12619) — a new leader's HW starts unknown and is
        taken from the majority's fetch offsets as soon as a majority has fetched, without waiting for
        its LeaderChange (the epoch start offset) to be replicated: it can go below the HW already exposed."""
        if self._zoo_hw_epoch != state.epoch:
            if len(state.voter_set) - len(state.unacknowledged) < state.voter_set.majority:
                return False
            self._zoo_hw_epoch = state.epoch
            if candidate == self._hw:
                return False
        elif candidate <= self._hw:
            return False
        self._set_hw(candidate)
        self._complete_parked(state)
        return True

    def _complete_parked(self, state: Leader) -> None:
        parked = list(state.parked.values())
        state.parked.clear()
        for p in parked:
            self._answer_fetch(state, p.src, p.ref, p.fetch_offset, p.last_fetched_epoch)

    def _set_hw(self, hw: int) -> None:
        self._hw = hw
        self._event("hw", hw=hw, epoch=self.epoch)

    def _drain(self, state: Leader, now: int) -> None:
        records = tuple(state.pending)
        state.pending.clear()
        state.pending_since = -1
        self._write_batch(state, Batch(self.log.end_offset(), state.epoch, records, False, now), now)

    def _write_batch(self, state: Leader, batch: Batch, now: int) -> None:
        """Leader append: write, flush, then let the HW and parked fetches see it."""
        self._append_local([batch], leader=True)
        if not self._maybe_advance_hw(state):
            self._complete_parked(state)

    def _append_local(self, batches: Sequence[Batch], leader: bool) -> None:
        log = self.log
        log.append(batches)
        deferred = False
        if self.bugs.on("ack-before-fsync"):
            pass  # BUG ZOO: ack-before-fsync defers this to the periodic flush
        elif leader and self.deferred_flush:
            deferred = True
            self._out.flush_to = log.end_offset()
        else:
            log.flush()
        if self.journal:
            for b in batches:
                self._event(
                    "append",
                    base=b.base_offset,
                    epoch=b.epoch,
                    crcs=[r.crc() for r in b.records],
                    control=b.control,
                    leader=leader,
                )
        if not deferred:
            self._journal_flush(always=True)

    def _journal_flush(self, always: bool = False) -> None:
        """Count a completed flush as durable and journal `flush` (when the durable end moved since
        the last one, or `always`): before any `hw` it enables, since both go out in step order."""
        end = self.log.flushed_end_offset()
        if always or end != self._durable:
            self._durable = end
            self._event("flush", end=end)

    def _durable_end(self) -> int:
        """This node's own durable end as counted toward the HW: what `flush` events reported, no more
        than the log still holds durably (a truncation cuts it)."""
        return min(self._durable, self.log.flushed_end_offset())

    # ----------------------------------------------------------------- Fetch (follower side)

    def _following(self, env: m.Envelope, epoch: int) -> Follower | None:
        state = self.state
        if isinstance(state, Follower) and state.leader_id == env.src and state.epoch == epoch:
            return state
        return None

    def _on_fetch_response(self, env: m.Envelope, resp: m.FetchResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self._following(env, resp.epoch)
        if state is None:
            return
        if resp.error != m.Errors.NONE:
            state.retry_at = now + self.config.retry_backoff_ms
            return
        state.deadline = now + self.config.fetch_timeout_ms
        state.has_fetched = True
        log = self.log
        if resp.diverging_epoch is not None and self.bugs.on("hw-before-truncate"):
            # BUG ZOO: hw-before-truncate (KAFKA-14704) — take the leader's HW (and apply up to it)
            # before cutting the diverging tail, and truncate without the below-HW guard.
            hw = min(resp.high_watermark, log.end_offset())
            if hw > self._hw:
                self._set_hw(hw)
                self._deliver_commits()
            self._truncate_diverging(resp.diverging_epoch, guard=False)
        elif resp.diverging_epoch is not None:
            self._truncate_diverging(resp.diverging_epoch)
        elif resp.snapshot_id is not None:
            state.snapshot = SnapshotFetch(resp.snapshot_id)
        else:
            batches = resp.batches
            if batches and batches[0].base_offset == log.end_offset():
                self._append_local(batches, leader=False)
            hw = min(resp.high_watermark, log.end_offset())
            if hw > self._hw:
                self._set_hw(hw)

    def _truncate_diverging(self, diverging: OffsetAndEpoch, guard: bool = True) -> None:
        log = self.log
        old_end = log.end_offset()
        target = min(diverging.offset, log.end_offset_for_epoch(diverging.epoch).offset, old_end)
        if guard and target < self._hw:
            raise RaftSafetyError(f"node {self.node_id}: truncation to {target} below the high-water mark {self._hw}")
        if target < old_end:
            log.truncate_to(target)
            self._durable = min(self._durable, target)
            self._event("truncate", to=target, **{"from": old_end}, reason="diverging")

    # ----------------------------------------------------------------- FetchSnapshot

    def _on_fetch_snapshot_request(self, env: m.Envelope, req: m.FetchSnapshotRequest, now: int) -> None:
        error = self._not_leader_error(req.epoch)
        sid = req.snapshot_id
        if error is None and sid not in self.snapshots.ids():
            error = m.Errors.SNAPSHOT_NOT_FOUND
        size = self.snapshots.size(sid) if error is None else 0
        if error is None and not 0 <= req.position <= size:
            error = m.Errors.POSITION_OUT_OF_RANGE
        if error is None and req.max_bytes <= 0:
            error = m.Errors.INVALID_REQUEST
        if error is not None:
            self._reply(env, m.FetchSnapshotResponse(error, self.epoch, self.leader_id, sid))
            return
        state = self.state
        assert isinstance(state, Leader)
        progress = self._progress(state, req.replica_id)
        if progress is not None:
            progress.last_fetch_ms = now
        chunk = self.snapshots.read_bytes(sid, req.position, min(req.max_bytes, self.config.fetch_snapshot_max_bytes))
        self._reply(
            env, m.FetchSnapshotResponse(m.Errors.NONE, state.epoch, self.node_id, sid, size, req.position, chunk)
        )

    def _on_fetch_snapshot_response(self, env: m.Envelope, resp: m.FetchSnapshotResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self._following(env, resp.epoch)
        if state is None or state.snapshot is None:
            return
        fetch = state.snapshot
        if resp.error != m.Errors.NONE or resp.snapshot_id != fetch.snapshot_id or resp.position != fetch.position:
            state.snapshot = None  # start over from a Fetch, which names the leader's current snapshot
            state.retry_at = now + self.config.retry_backoff_ms
            return
        state.deadline = now + self.config.fetch_timeout_ms
        state.has_fetched = True
        if resp.data:
            self.snapshots.write_bytes(fetch.snapshot_id, fetch.position, resp.data)
            fetch.position += len(resp.data)
        if fetch.position >= resp.size:
            state.snapshot = None
            self._install_snapshot(fetch.snapshot_id, state, now)

    def _install_snapshot(self, sid: OffsetAndEpoch, state: Follower, now: int) -> None:
        """A follower replaces its log and state by a snapshot fetched from the leader. Fetched bytes
        that fail validation are dropped (the store does so) and the fetch starts over: the next
        Fetch names the leader's snapshot again (damage in transit or in the leader's copy is not a
        reason to stop)."""
        if isinstance(self.state, Leader):
            raise RaftSafetyError("a leader never loads a snapshot")
        try:
            self.snapshots.freeze(sid)
        except ValueError as e:
            self._event(
                "corruption",
                path=f"fetched snapshot {sid.offset}-{sid.epoch}",
                offset=sid.offset,
                reason=str(e),
                below_hw=False,
            )
            state.retry_at = now + self.config.retry_backoff_ms
            return
        self._event("snapshot", action="fetch", offset=sid.offset, epoch=sid.epoch)
        old_end = self.log.end_offset()
        self.log.reset_to_snapshot(sid)
        self._durable = sid.offset  # the snapshot is durable and the log now starts (and ends) there
        self._event("truncate", to=sid.offset, **{"from": old_end}, reason="snapshot")
        self._out.updates.append(LoadSnapshot(sid, self.snapshots.read_records(sid)))
        self._event("snapshot", action="load", offset=sid.offset, epoch=sid.epoch)
        self._applied = sid.offset
        self._delete_snapshots_before(sid)
        if sid.offset > self._hw:
            self._set_hw(sid.offset)

    def _delete_snapshots_before(self, sid: OffsetAndEpoch) -> None:
        if self.journal:
            for old in self.snapshots.ids():
                if old < sid:
                    self._event("snapshot", action="delete", offset=old.offset, epoch=old.epoch)
        self.snapshots.delete_before(sid)

    # ----------------------------------------------------------------- the rest

    def _on_describe_request(self, env: m.Envelope, req: m.DescribeQuorumRequest, now: int) -> None:
        self._reply(env, self.describe_quorum(now))

    def _on_ignored(self, env: m.Envelope, message: m.Message, now: int) -> None:
        return None

    def _deliver_commits(self) -> None:
        log = self.log
        hw = self._hw
        pos = self._applied
        committed: list[Batch] = []
        max_bytes = self.config.fetch_max_bytes
        while pos < hw:
            chunk = log.read(pos, max_bytes)
            if not chunk:
                break
            for batch in chunk:
                if batch.next_offset > hw:
                    break
                committed.append(batch)
                pos = batch.next_offset
            else:
                continue
            break
        if committed:
            self._applied = pos
            self._out.updates.append(Commit(committed))


def core_class_with(bugs: BugSet) -> type[RaftCore]:
    """A RaftCore subclass whose instances carry `bugs` (for drivers that take a core class: the
    simulator's `core_class`, the server's bug registry). The empty set gives RaftCore itself."""
    if not bugs:
        return RaftCore
    return type(f"RaftCore[{bugs}]", (RaftCore,), {"bugs": bugs})
