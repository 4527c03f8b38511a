"""Replication: the Fetch handlers of both sides, appends and flushes, and the high-water mark.

The leader answers Fetch from its log (a diverging epoch or a snapshot id when the replica's
position does not continue it), tracks each replica's progress in its `Leader` state, moves the
high-water mark to what a majority holds durably once that covers its own LeaderChange, and parks
a Fetch with nothing new until data, a new high-water mark or the fetch's wait ends. A follower
fetches from its leader, truncates a diverging tail (never below its high-water mark), appends
and flushes what it receives before it fetches again (its next Fetch offset acknowledges it),
and takes the leader's high-water mark. Committed batches go to the state machine in order.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.context import CoreContext
from kraftlab.node.raft.output import Commit, RaftSafetyError
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch
from kraftlab.node.raft.states import Follower, Leader, ParkedFetch, SnapshotFetch, Unattached

ZOO_FLUSH_INTERVAL_MS = 1000
"""BUG ZOO: ack-before-fsync — the period of the only flushes (like an OS writeback)."""


class Replication(CoreContext):
    _zoo_hw_epoch: int  # BUG ZOO: hw-before-leader-change — the epoch whose HW was initialised
    _zoo_flush_at: int  # BUG ZOO: ack-before-fsync — when the periodic flush runs next

    # ----------------------------------------------------------------- leader: polls and appends

    def _poll_leader(self, state: Leader, now: int) -> None:
        if state.voter_change is not None:
            self._poll_voter_change(state, now)
            if self.state is not state:
                return
        if state.pending and now >= state.pending_since + self.config.append_linger_ms:
            self._drain(state, now)
        if state.parked:
            for rid in [r for r, p in state.parked.items() if p.deadline <= now]:
                p = state.parked.pop(rid)
                self._answer_fetch(state, p.src, p.ref, p.fetch_offset, p.last_fetched_epoch, p.directory_id)
        if not state.alone:
            state.check_quorum_at = state.check_quorum_deadline(now, self.config.check_quorum_timeout_ms)
            if now >= state.check_quorum_at and self.bugs.on("no-check-quorum"):
                # BUG ZOO: no-check-quorum — an isolated leader stays leader (KAFKA-15489).
                state.check_quorum_at = now + self.config.check_quorum_timeout_ms
            elif now >= state.check_quorum_at:
                self._set_state(self._resigned(state.epoch, (), now), now)
                return
        inflight = self._inflight
        for v in state.unacknowledged:
            if v not in inflight:
                self._send(v, m.BeginQuorumEpochRequest(state.epoch, self.node_id), now)

    def _drain(self, state: Leader, now: int) -> None:
        records = tuple(state.pending)
        state.pending.clear()
        state.pending_since = -1
        self._write_batch(state, Batch(self.log.end_offset(), state.epoch, records, False, now), now)

    def _write_batch(self, state: Leader, batch: Batch, now: int) -> None:
        """Leader append: write, flush, then let the HW and parked fetches see it."""
        self._append_local([batch], leader=True)
        if batch.control and state.voter_set != self.voter_set:
            state.update_voters(self.voter_set, now)
        if not self._maybe_advance_hw(state):
            self._complete_parked(state)

    def _append_local(self, batches: Sequence[Batch], leader: bool) -> None:
        log = self.log
        log.append(batches)
        control = self.control
        membership = False
        for b in batches:
            if b.control:
                # KIP-853: a voter set takes effect as soon as it is appended, committed or not.
                control.apply_batch(b)
                membership = True
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
        if membership:
            self._journal_voters("append")
        if not deferred:
            self._journal_flush(always=True)

    def _zoo_periodic_flush(self, now: int) -> None:
        """BUG ZOO: ack-before-fsync (KAFKA-10533) — appends are flushed only by a periodic
        background flush, long after their offsets were acknowledged and counted."""
        if now >= self._zoo_flush_at:
            self._zoo_flush_at = now + ZOO_FLUSH_INTERVAL_MS
            if self.log.flushed_end_offset() < self.log.end_offset():
                self.log.flush()
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

    # ----------------------------------------------------------------- leader: the high-water mark

    def _maybe_advance_hw(self, state: Leader) -> bool:
        """The KAFKA-12619 rule: the HW moves only to an offset a majority holds durably, and only
        once that covers the leader's own LeaderChangeMessage (the epoch start offset)."""
        if self.bugs.on("ack-before-fsync"):
            # BUG ZOO: ack-before-fsync — the leader counts its own unflushed end offset.
            candidate = state.quorum_end_offset(self.log.end_offset())
        else:
            candidate = state.quorum_end_offset(self._durable_end())
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
            if not state.majority_acknowledged():
                return False
            self._zoo_hw_epoch = state.epoch
            if candidate == self._hw:
                return False
        elif candidate <= self._hw:
            return False
        self._set_hw(candidate)
        self._complete_parked(state)
        return True

    def _set_hw(self, hw: int) -> None:
        self._hw = hw
        if isinstance(self.state, Leader):
            self.state.hw_known = True
        self._event("hw", hw=hw, epoch=self.epoch)

    def _told_hw(self, state: Leader) -> int:
        """The high-water mark a leader tells (Fetch answers, DescribeQuorum): -1 until it has moved it
        in its own epoch, as Kafka's (a high-water mark learned as a follower is not the leader's)."""
        return self._hw if state.hw_known else -1

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

    # ----------------------------------------------------------------- leader: Fetch

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        error = self._not_leader_error(req.epoch)
        if req.fetch_offset < 0 or req.max_wait_ms < 0 or not 0 <= req.last_fetched_epoch <= req.epoch:
            error = m.Errors.INVALID_REQUEST
        if error is not None:
            self._reply(env, self._fetch_refusal(error, self.epoch, self.leader_id))
            return
        state = self.state
        assert isinstance(state, Leader)
        directory = req.replica_directory_id
        progress = state.progress_of(req.replica_id, directory)
        diverging, snapshot_id = self._validate_fetch(req.fetch_offset, req.last_fetched_epoch)
        hw_moved = False
        is_voter = progress is not None and state.voters.get(req.replica_id) is progress
        if progress is not None:
            progress.last_fetch_ms = now
            if diverging is None and snapshot_id is None:
                if req.fetch_offset > progress.end_offset:
                    progress.end_offset = req.fetch_offset
                if req.fetch_offset >= self.log.end_offset():
                    progress.last_caught_up_ms = now
                if is_voter:
                    hw_moved = self._maybe_advance_hw(state)
        if (
            diverging is None
            and snapshot_id is None
            and not hw_moved
            and req.max_wait_ms > 0
            and req.fetch_offset >= self.log.end_offset()
            and (progress is None or is_voter or progress.hw_sent >= self._told_hw(state))
        ):
            deadline = now + min(req.max_wait_ms, self.config.fetch_max_wait_ms)
            state.parked[env.src] = ParkedFetch(
                env.src, req.fetch_offset, req.last_fetched_epoch, env.ref, deadline, directory
            )
            return
        state.parked.pop(env.src, None)
        self._answer_fetch(state, env.src, env.ref, req.fetch_offset, req.last_fetched_epoch, directory)

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
            if found.offset < start or found.epoch > last_epoch or self._unanchored_start(found.offset):
                # No epoch <= last_epoch left in the log (the answer is the log start and the epoch
                # before it): the replica's records before our log start differ from ours, and only
                # the snapshot covers them.
                return None, self.snapshots.latest()
            return found, None
        return None, None

    def _unanchored_start(self, offset: int) -> bool:
        """Whether `offset` is a log start no snapshot ends at: retention kept segments behind the
        latest snapshot, and the epoch before such a start is not known after a restart (storage
        knows it only for a start at a snapshot), so no divergence can be told from it."""
        latest = self.snapshots.latest()
        return 0 < offset == self.log.start_offset() and (latest is None or latest.offset != offset)

    def _answer_fetch(
        self, state: Leader, dst: int, ref: Any, offset: int, last_epoch: int, directory: uuid.UUID | None = None
    ) -> None:
        diverging, snapshot_id = self._validate_fetch(offset, last_epoch)
        log = self.log
        batches: tuple[Batch, ...] = ()
        if diverging is None and snapshot_id is None and offset < log.end_offset():
            try:
                batches = tuple(log.read(offset, self.config.fetch_max_bytes))
            except ValueError:  # not a batch boundary: no replica of ours fetches there
                refusal = self._fetch_refusal(m.Errors.INVALID_REQUEST, state.epoch, self.node_id)
                self._out.messages.append(m.Envelope(self.node_id, dst, refusal, ref))
                return
        hw = self._told_hw(state)
        response = m.FetchResponse(
            m.Errors.NONE, state.epoch, self.node_id, hw, log.start_offset(), batches, diverging, snapshot_id
        )
        progress = state.known(dst, directory)
        if progress is not None:
            progress.hw_sent = hw
        self._out.messages.append(m.Envelope(self.node_id, dst, response, ref))

    def _complete_parked(self, state: Leader) -> None:
        parked = list(state.parked.values())
        state.parked.clear()
        for p in parked:
            self._answer_fetch(state, p.src, p.ref, p.fetch_offset, p.last_fetched_epoch, p.directory_id)

    # ----------------------------------------------------------------- follower: Fetch

    def _poll_follower(self, state: Follower, now: int) -> None:
        if now >= state.deadline:
            if self.is_voter:
                self._become_prospective(now, now)
            else:  # an observer looks for the leader again, keeping the vote it granted in this epoch
                self._set_state(Unattached(state.epoch, self.voted_id, now), now)
            return
        leader = state.leader_id
        if leader in self._inflight or now < state.retry_at:
            return
        if state.snapshot is not None:
            fetch = state.snapshot
            size = self.config.fetch_snapshot_max_bytes
            self._send(
                leader,
                m.FetchSnapshotRequest(
                    state.epoch, self.node_id, fetch.snapshot_id, fetch.position, size, self.directory_id
                ),
                now,
            )
        else:
            request = m.FetchRequest(
                state.epoch,
                self.node_id,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_wait_ms,
                self.directory_id,
            )
            self._send(leader, request, now)

    def _bootstrap_fetch(self, state: Unattached, now: int) -> None:
        """An observer that knows no leader asks a random voter (whose answer names the leader), one
        request at a time, every retry backoff (as Kafka's observers do): not once per election
        timeout, which left brokers up to seconds behind a new leader. Voters backing off after a
        failed request (RequestFailed) are skipped until their backoff ends — and when every one of
        them is backing off, the next probe goes when the first backoff ends (as Kafka's observer
        polls again at `backoffBeforeAvailableBootstrapServer`), not a retry backoff later."""
        inflight = self._inflight
        candidates = [v for v in (self.bootstrap or self.voters) if v != self.node_id]
        idle = [v for v in candidates if v not in inflight]
        state.deadline = now + self.config.retry_backoff_ms
        if any(ref != 0 for ref, _ in inflight.values()):  # ref 0: a peer backing off
            return
        if not idle:
            state.deadline = min([state.deadline, *(inflight[v][1] for v in candidates)])
            return
        target = idle[self.rng.randrange(len(idle))]
        self._send(
            target,
            m.FetchRequest(
                state.epoch, self.node_id, self.log.end_offset(), self.log.last_epoch(), 0, self.directory_id
            ),
            now,
        )

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
        state.fetched(now, self.config.fetch_timeout_ms)
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
        last_epoch = log.last_epoch()  # the LastFetchedEpoch of the Fetch this answers
        target = min(diverging.offset, log.end_offset_for_epoch(diverging.epoch).offset, old_end)
        if guard and target < self._hw:
            raise RaftSafetyError(f"node {self.node_id}: truncation to {target} below the high-water mark {self._hw}")
        if target < old_end:
            log.truncate_to(target)
            self.control.truncate_from(target)  # a voter set the lost tail brought is no longer in force
            self._journal_voters("truncate")
            self._durable = min(self._durable, target)
            # The leader answers with our LastFetchedEpoch when its log holds that epoch (ending
            # earlier than ours), with an older epoch when its log has no such epoch at all.
            self._event("truncate", to=target, **{"from": old_end}, reason="diverging",
                        diverging_epoch=diverging.epoch, diverging_end_offset=diverging.offset,
                        last_fetched_epoch=last_epoch)
