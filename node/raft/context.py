"""What every part of the Raft core shares: the node's storage and state, the step's output, the
requests in flight, the timers, and the transitions (through `QuorumState`).

`RaftCore` is assembled from responsibilities, each a module of its own — `election` (Vote,
Begin/EndQuorumEpoch, the (pre-)vote rounds), `replication` (Fetch on both sides, the
high-water mark, appends and flushes), `snapshots` (FetchSnapshot, creating and installing
snapshots) — on top of this context. A part calls another's methods only through names declared
here.
"""

from __future__ import annotations

import random
import uuid
from typing import TYPE_CHECKING, Any

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.membership.log_voters import ControlRecordState
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, QuorumStateStore, ReplicatedLog, SnapshotStore
from kraftlab.node.raft.quorum_state import QuorumState
from kraftlab.node.raft.states import Candidate, EpochState, Follower, Leader, Prospective, Resigned, Unattached
from kraftlab.node.raft.voters import VoterHistory, VoterSet


class CoreContext:
    bugs: BugSet = NO_BUGS
    """Test-only planted bugs (node.bugs); empty unless a zoo run asks for one."""

    config: RaftConfig
    node_id: int
    directory_id: uuid.UUID | None
    """This replica's metadata directory id (KIP-853): a voter set naming this node with another
    directory id names a replaced disk, not this replica. None: the static mode (ids only)."""
    bootstrap: tuple[int, ...]
    """Whom an observer that knows no leader asks (`controller.quorum.bootstrap.servers`, as peer
    ids the transport resolves); empty: the voters."""
    log: ReplicatedLog
    quorum: QuorumStateStore
    """The quorum-state file; only `quorum_state` writes it."""
    snapshots: SnapshotStore
    rng: random.Random
    journal: bool
    deferred_flush: bool
    control: ControlRecordState
    """kraft.version and the voter set by log offset, kept in step with the log (appends,
    truncations, snapshots): the voter set in force is the one at the log's end (KIP-853)."""
    quorum_state: QuorumState
    _dynamic: bool
    _journalled_voters: tuple[int, VoterSet] | None
    """A dynamic quorum (KIP-853: kraft.version 1, the voter set from the log); False: static."""
    _hw: int
    _applied: int
    _durable: int
    """The durable end offset this core has counted and journalled (`flush`): raised only by a flush
    the core did itself or one the driver reported (`flushed`), cut by truncations. The leader counts
    this, never the log's own flushed end, which a driver's flush thread may move earlier."""
    _inflight: dict[int, tuple[int, int]]
    _unreachable: dict[int, int]
    """Consecutive failed requests per peer (RequestFailed)."""
    _ref: int
    _failures: int
    """(Pre-)vote rounds failed in a row: the election backoff grows with it. Any state but a
    round starts it afresh (`_set_state`), as Kafka counts `retries + 1` only for a round that
    follows a Candidate's and 1 for any other (`QuorumState.transitionToProspective`)."""
    _out: Output

    if TYPE_CHECKING:
        # Provided by the parts (see the module docstring).
        def _write_batch(self, state: Leader, batch: Batch, now: int) -> None: ...
        def _journal_flush(self, always: bool = False) -> None: ...
        def _set_hw(self, hw: int) -> None: ...
        def _deliver_commits(self) -> None: ...
        def _delete_snapshots_before(self, sid: OffsetAndEpoch) -> None: ...
        def _following(self, env: m.Envelope, epoch: int) -> Follower | None: ...
        def _become_prospective(self, now: int, send_at: int) -> None: ...
        def _bootstrap_fetch(self, state: Unattached, now: int) -> None: ...
        def _drain(self, state: Leader, now: int) -> None: ...
        def _poll_voter_change(self, state: Leader, now: int) -> None: ...
        def _abandon_voter_change(self, state: Leader) -> None: ...
        def _begin(self) -> None: ...
        def _end(self, now: int) -> Output: ...

    # ----------------------------------------------------------------- read-only views

    @property
    def state(self) -> EpochState:
        return self.quorum_state.state

    @property
    def voter_history(self) -> VoterHistory:
        return self.control.voters

    @property
    def voter_set(self) -> VoterSet:
        """The voter set this node acts on now (the one in force at its log's end)."""
        if self.bugs.on("voters-at-commit"):  # BUG ZOO: voters-at-commit — the set only once committed
            return self.voter_history.at(getattr(self, "_hw", 0) - 1)  # (no HW yet while constructing)
        return self.voter_history.latest

    @property
    def voters(self) -> tuple[int, ...]:
        return self.voter_set.ids

    @property
    def is_voter(self) -> bool:
        """Whether this replica (node id and directory id) is a voter of the set in force."""
        return self.voter_set.holds(self.node_id, self.directory_id)

    @property
    def epoch(self) -> int:
        return self.quorum_state.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.quorum_state.state.leader_id

    @property
    def voted_id(self) -> int | None:
        return self.quorum_state.state.voted_id

    # ----------------------------------------------------------------- step plumbing

    def _journal_voters(self, reason: str) -> None:
        """Journal `voters` when the voter set in force (at the log's end) changed: appended,
        rolled back by a truncation, or replaced by a snapshot (and once at start)."""
        if not self._dynamic and self.control.kraft_version == KRAFT_VERSION_0:
            return  # a static quorum's set never changes: its `start` line says it
        history = self.voter_history
        now = (history.last_offset, history.latest)
        if now == self._journalled_voters:
            return
        self._journalled_voters = now
        latest = history.latest
        self._event(
            "voters",
            offset=history.last_offset,
            voters=list(latest.ids),
            directory_ids=[
                None if (v := latest.voter(i)) is None or v.directory_id is None else uuid_to_kafka(v.directory_id)
                for i in latest.ids
            ],
            kraft_version=self.control.kraft_version,
            reason=reason,
        )

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

    def _not_leader_error(self, epoch: int) -> m.Errors | None:
        """The error a Fetch/FetchSnapshot at `epoch` gets here, or None when this node serves it:
        Kafka's `validateLeaderOnlyRequest` order — the epoch first (an older one is fenced, a newer
        one unknown here), then the role."""
        if epoch < self.epoch:
            return m.Errors.FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return m.Errors.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader):
            return m.Errors.NOT_LEADER_OR_FOLLOWER
        return None

    def _fetch_refusal(self, error: m.Errors, epoch: int, leader_id: int | None) -> m.FetchResponse:
        """A Fetch answered with `error` (Kafka's `buildEmptyFetchResponse`): no records, no diverging
        epoch nor snapshot id, no high-water mark (-1), the log start, and the sender's leader and epoch."""
        return m.FetchResponse(error, epoch, leader_id, -1, self.log.start_offset())

    # ----------------------------------------------------------------- timers

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

    def _voted_deadline(self, now: int) -> int:
        """When a node a Vote request moved (to a later epoch, or to its vote) acts next: a voter
        after an election timeout; an observer (a dynamic quorum's replica grants votes whatever
        its set) at once, since it keeps looking for the leader every retry backoff — Kafka's
        observer never waits for an election (`QuorumState.transitionToUnattached`)."""
        return now + self._election_timeout() if self.is_voter else now

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
        return Resigned(epoch, self.node_id, now + wait, successors, set(others))

    # ----------------------------------------------------------------- transitions

    def _set_state(self, state: EpochState, now: int) -> None:
        old = self.quorum_state.state
        if isinstance(old, Leader):
            self._leave_leadership(old, state)
        if not isinstance(state, Prospective | Candidate):
            self._failures = 0
        self._inflight.clear()
        self.quorum_state.transition_to(state, self._out, self.journal)

    def _leave_leadership(self, old: Leader, new: EpochState) -> None:
        """What a leader settles before it is left: its unflushed tail and its parked fetches."""
        if (
            self.deferred_flush
            and self.log.flushed_end_offset() < self.log.end_offset()
            and not self.bugs.on("ack-before-fsync")  # BUG ZOO: ack-before-fsync leaves the tail to its flusher
        ):
            # Deferred flush: nothing this node says from now on (Fetch offsets, votes) may count
            # an unflushed tail as durable.
            self.log.flush()
            self._journal_flush()
        if old is not new:
            self._abandon_voter_change(old)
        if old.parked and old is not new:
            for p in old.parked.values():
                # KIP-595: a response carries its sender's leader and epoch, the state it is leaving for.
                response = self._fetch_refusal(m.Errors.NOT_LEADER_OR_FOLLOWER, new.epoch, new.leader_id)
                self._out.messages.append(m.Envelope(self.node_id, p.src, response, p.ref))
            old.parked.clear()

    def _observe(self, epoch: int, leader_id: int | None, now: int, src: int) -> bool:
        """React to an epoch and leader learned from a message from `src`; True when the state changed.

        A prospective node that gave up on its leader goes back to it only on hearing from the
        leader itself: other voters still naming it prove nothing (they may be cut off from it too).
        """
        if leader_id == self.node_id:
            leader_id = None
        state = self.quorum_state.state
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
        self._set_state(Follower(epoch, leader_id, voted, now + self.config.fetch_timeout_ms), now)
