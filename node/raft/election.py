"""Elections: the Vote, BeginQuorumEpoch and EndQuorumEpoch handlers, the (pre-)vote rounds and
the transitions they lead to (KIP-595 with KIP-996's pre-vote).

A node that stops hearing from a leader pre-votes (Prospective: asks for `epoch + 1` without
changing anyone's epoch); a won pre-vote makes it a Candidate (its own vote persisted first), a
won vote a Leader, which writes its LeaderChange and tells the voters with BeginQuorumEpoch. A
leader leaving office (check-quorum, graceful resignation, restart) is Resigned and sends
EndQuorumEpoch naming its preferred successors.
"""

from __future__ import annotations

from dataclasses import replace

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.context import CoreContext
from kraftlab.node.raft.control import leader_change_record
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, kraft_version_record, voters_record
from kraftlab.node.raft.ports import Batch
from kraftlab.node.raft.states import Candidate, Follower, Leader, Prospective, Resigned, Unattached


class Election(CoreContext):
    # ----------------------------------------------------------------- transitions

    def _become_prospective(self, now: int, send_at: int) -> None:
        old = self.state
        if not self.is_voter:
            # No longer a voter (removed, or a replaced disk): it fetches as an observer instead.
            self._set_state(Unattached(self.epoch, self.voted_id, now), now)
            return
        leader = old.leader_id if isinstance(old, Follower | Prospective) else None
        state = Prospective(
            self.epoch, self.voted_id, leader, send_at, send_at + self._election_timeout(), {self.node_id}
        )
        self._set_state(state, now)
        if state.won(self.voter_set):
            self._become_candidate(now)

    def _become_candidate(self, now: int) -> None:
        state = Candidate(self.epoch + 1, self.node_id, now + self._election_timeout(), {self.node_id})
        self._set_state(state, now)  # persists the vote for ourselves before any request goes out
        if state.won(self.voter_set):
            self._become_leader(now)

    def _become_leader(self, now: int) -> None:
        old = self.state
        granted = sorted(old.granted) if isinstance(old, Candidate) else [self.node_id]
        end = self.log.end_offset()
        voter_set = self.voter_set
        state = Leader.elected(self.epoch, self.node_id, end, voter_set, now)
        self._set_state(state, now)
        records = [leader_change_record(self.node_id, voter_set.ids, granted)]
        control = self.control
        if control.kraft_version != KRAFT_VERSION_0 and control.last_change_offset() < 0:
            # The voter set came from a snapshot or the bootstrap checkpoint: as Kafka's leader does
            # at the start of its epoch, it writes it into the log too, so that a replica formatted
            # without initial controllers learns it by fetching.
            records += [kraft_version_record(control.kraft_version), voters_record(voter_set)]
        self._write_batch(state, Batch(end, state.epoch, tuple(records), True, now), now)

    def _round_lost(self, state: Prospective | Candidate, now: int) -> None:
        """A (pre-)vote round rejected by a majority (explicitly or unreachable) ends after a backoff."""
        if not state.lost(self.voter_set):
            return
        if isinstance(state, Prospective):
            state.deadline = min(state.deadline, now)  # the poll starts the next round after a backoff
        else:
            state.deadline = min(state.deadline, now + self._backoff())

    # ----------------------------------------------------------------- polls

    def _poll_unattached(self, state: Unattached, now: int) -> None:
        if now >= state.deadline:
            if self.is_voter:
                self._become_prospective(now, now)
            else:
                self._bootstrap_fetch(state, now)

    def _poll_prospective(self, state: Prospective, now: int) -> None:
        if now >= state.deadline:
            self._failures += 1
            self._become_prospective(now, now + self._backoff())
        elif now >= state.send_at:
            request = m.VoteRequest(state.epoch + 1, self.node_id, self.log.last_epoch(), self.log.end_offset(), True)
            self._solicit(state, request, now)

    def _poll_candidate(self, state: Candidate, now: int) -> None:
        if now >= state.deadline:
            self._failures += 1
            self._become_prospective(now, now + self._backoff())
        else:
            request = m.VoteRequest(state.epoch, self.node_id, self.log.last_epoch(), self.log.end_offset(), False)
            self._solicit(state, request, now)

    def _poll_resigned(self, state: Resigned, now: int) -> None:
        if now >= state.deadline:
            self._become_prospective(now, now)
            return
        inflight = self._inflight
        for v in state.unacknowledged:
            if v not in inflight:
                self._send(v, m.EndQuorumEpochRequest(state.epoch, self.node_id, state.preferred_successors), now)

    def _solicit(self, state: Prospective | Candidate, request: m.VoteRequest, now: int) -> None:
        granted, rejected, inflight = state.granted, state.rejected, self._inflight
        voter_set = self.voter_set
        for v in voter_set.others(self.node_id):
            if v not in granted and v not in rejected and v not in inflight:
                voter = voter_set.voter(v)
                directory = None if voter is None else voter.directory_id
                if directory is not None:
                    request = replace(request, voter_directory_id=directory)
                self._send(v, request, now)

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
        if isinstance(state, Prospective | Candidate):  # a (pre-)vote round counts the peer as not granting
            state.record_vote(env.src, False)
            self._round_lost(state, now)

    # ----------------------------------------------------------------- Vote

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

        if req.end_offset < 0 or req.last_epoch < 0 or req.last_epoch >= req.epoch:
            # Kafka checks the candidate's log position first: no log ends in the epoch it asks for.
            return answer(False, "invalid log position", m.Errors.INVALID_REQUEST)
        # Kafka's ReplicaEpoch: the candidate's own epoch (a pre-vote asks for the one after it).
        replica_epoch = req.epoch - 1 if req.pre_vote else req.epoch
        if replica_epoch < self.epoch:
            return answer(False, "stale epoch", m.Errors.FENCED_LEADER_EPOCH)
        if req.candidate_id < 0:
            return answer(False, "invalid candidate id", m.Errors.INVALID_REQUEST)
        if not self._dynamic and (not self.is_voter or req.candidate_id not in self.voter_set):
            return answer(False, "not a voter", m.Errors.INCONSISTENT_VOTER_SET)
        if replica_epoch > self.epoch:
            # The candidate is in a later epoch, reached in an election this node missed: adopt it,
            # as Raft does for any later term (a pre-vote too, or the candidate could never be heard
            # again: pre-votes change nobody's epoch), before anything else is judged (Kafka's order).
            self._set_state(Unattached(replica_epoch, None, self._voted_deadline(now)), now)
        if self._dynamic:
            # KIP-853: a replica grants votes whatever its voter set says (the candidate may know
            # a newer one, which may add this replica), but only as the replica the candidate
            # means: a replaced disk (another directory id) has no vote to give.
            asked = req.voter_directory_id
            another_disk = asked is not None and asked != self.directory_id
            if self.bugs.on("replaced-disk-keeps-vote"):
                another_disk = False  # BUG ZOO: replaced-disk-keeps-vote — a new disk votes as the old voter
            if another_disk:
                return answer(False, "another directory id", m.Errors.INVALID_VOTER_KEY)
        up_to_date = (req.last_epoch, req.end_offset) >= (self.log.last_epoch(), self.log.end_offset())
        if self.bugs.on("vote-without-log-check"):
            up_to_date = True  # BUG ZOO: vote-without-log-check — the candidate's log is never compared
        if req.pre_vote:
            refusal = self.state.pre_vote_refusal()
            if refusal is not None:
                return answer(False, refusal)
            return answer(up_to_date, "ok" if up_to_date else "log behind")
        state = self.state
        refusal = state.vote_refusal(req.candidate_id)
        if refusal is not None:
            return answer(False, refusal)
        if not up_to_date:
            return answer(False, "log behind")
        if not (isinstance(state, Unattached) and state.voted_id == req.candidate_id):
            # Persist the vote (quorum-state write) before the response goes out.
            self._set_state(Unattached(state.epoch, req.candidate_id, self._voted_deadline(now)), now)
        return answer(True, "ok")

    def _on_vote_response(self, env: m.Envelope, resp: m.VoteResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self.state
        # A matching ref means the request was sent from the current state (transitions forget
        # outstanding requests), so a response counts for it whatever its (non-wire) pre_vote flag.
        if isinstance(state, Prospective) or (isinstance(state, Candidate) and resp.epoch == state.epoch):
            state.record_vote(env.src, resp.error == m.Errors.NONE and resp.granted)
            if not state.won(self.voter_set):
                self._round_lost(state, now)
            elif isinstance(state, Prospective):
                self._become_candidate(now)
            else:
                self._become_leader(now)

    # ----------------------------------------------------------------- Begin/EndQuorumEpoch

    def _leader_request_error(self, epoch: int, leader_id: int) -> m.Errors | None:
        """Why a Begin/EndQuorumEpoch is refused (None: it is not), in Kafka's order of its voter-only
        checks: a leader that is this node itself (ours: it cannot be one), an older epoch, a negative
        leader id, then (static mode) a leader or a responder that is no voter. A dynamic quorum's
        replica may lag behind the set that made the sender a voter."""
        if leader_id == self.node_id:
            return m.Errors.INCONSISTENT_VOTER_SET
        if epoch < self.epoch:
            return m.Errors.FENCED_LEADER_EPOCH
        if leader_id < 0:
            return m.Errors.INVALID_REQUEST
        if not self._dynamic and (not self.is_voter or leader_id not in self.voter_set):
            return m.Errors.INCONSISTENT_VOTER_SET
        return None

    def _on_begin_request(self, env: m.Envelope, req: m.BeginQuorumEpochRequest, now: int) -> None:
        error = self._leader_request_error(req.epoch, req.leader_id)
        if error is not None:
            self._reply(env, m.BeginQuorumEpochResponse(error, self.epoch, self.leader_id))
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
        error = self._leader_request_error(req.epoch, req.leader_id)
        if error is not None:
            self._reply(env, m.EndQuorumEpochResponse(error, self.epoch, self.leader_id))
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
        state = self.state
        if isinstance(state, Resigned) and resp.error == m.Errors.NONE:
            state.unacknowledged.discard(env.src)
