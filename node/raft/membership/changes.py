"""The leader's side of KIP-853's voter changes: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter.

A change is one VotersRecord the leader appends; like every voter set it is in force as soon as it
is appended, on the leader and on each replica that appends it. The rules are Kafka's
(AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler):

- only the leader changes the set (NOT_LEADER_OR_FOLLOWER; an UpdateRaftVoter of another epoch:
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), and only of a dynamic quorum (kraft.version 1,
  else UNSUPPORTED_VERSION);
- a request is valid, checked by the leader before its state (INVALID_REQUEST): it names a
  directory id (not Kafka's zero UUID), a voter to add or update has an endpoint, an update's
  kraft.version range is not negative nor empty and holds the finalized kraft.version;
- one change at a time: none while another is being carried out or while the last VotersRecord
  has not committed, and none before the leader has committed in its epoch (its high-water mark
  covers its LeaderChange) — REQUEST_TIMED_OUT, the client retries;
- an added replica must not already be a voter by id (DUPLICATE_VOTER; a replaced disk is removed
  first) and must have caught up — fetched up to the leader's end within a fetch timeout — before
  the record is written, else REQUEST_TIMED_OUT when the request's timeout ends;
- a removed or updated voter must be in the set with that directory id (VOTER_NOT_FOUND); the
  set may not become empty;
- the answer goes out once the record has committed. A leader that removed itself resigns then
  (it led a set it was not part of only to commit that record), naming the most caught-up voters.
"""

from __future__ import annotations

import uuid

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.context import CoreContext
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, voters_record
from kraftlab.node.raft.ports import Batch
from kraftlab.node.raft.states import Leader, VoterChange
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet

ADD, REMOVE, UPDATE = "add", "remove", "update"


class VoterChanges(CoreContext):
    # ----------------------------------------------------------------- requests

    def _refusal(
        self,
        directory_id: uuid.UUID | None,
        endpoints: tuple[Endpoint, ...] | None = None,
        kraft_versions: tuple[int, int] | None = None,
        request_epoch: int | None = None,
    ) -> tuple[m.Errors, str] | None:
        """Why a voter change request is refused before its voter is looked at (None: it is not),
        in Kafka's order: the leader check (validateLeaderOnlyRequest: an UpdateRaftVoter names the
        epoch it was sent in), the request's own validity, then the leader's state."""
        if request_epoch is not None and request_epoch != self.epoch:
            error = m.Errors.FENCED_LEADER_EPOCH if request_epoch < self.epoch else m.Errors.UNKNOWN_LEADER_EPOCH
            return error, f"epoch {request_epoch}, this node's is {self.epoch}"
        if not isinstance(self.state, Leader):
            return m.Errors.NOT_LEADER_OR_FOLLOWER, "not the leader"
        invalid = _invalid_request(directory_id, endpoints, kraft_versions)
        if invalid is not None:
            return m.Errors.INVALID_REQUEST, invalid
        return self._change_refusal()

    def _change_refusal(self) -> tuple[m.Errors, str] | None:
        """Why the leader can start no voter change now (None: it can), in the handlers' order."""
        state = self.state
        assert isinstance(state, Leader)
        concurrent = self.bugs.on("concurrent-voter-changes")  # BUG ZOO: concurrent-voter-changes
        if state.voter_change is not None and not concurrent:
            change = state.voter_change
            return m.Errors.REQUEST_TIMED_OUT, f"a {change.kind} of voter {change.subject} is in progress"
        if self._hw <= state.epoch_start_offset:
            return m.Errors.REQUEST_TIMED_OUT, "the leader has not committed in its epoch yet"
        if self.control.kraft_version == KRAFT_VERSION_0:
            return m.Errors.UNSUPPORTED_VERSION, "kraft.version 0: the voter set is controller.quorum.voters"
        last = self.control.last_change_offset()
        if last >= self._hw and not concurrent:
            return m.Errors.REQUEST_TIMED_OUT, f"the voter change at offset {last} has not committed yet"
        return None

    def _refuse_change(self, env: m.Envelope, error: m.Errors, message: str) -> None:
        self._event("voter_change", action="refused", error=error.name, reason=message)
        self._reply(env, m.VoterChangeResponse(error, message, self.leader_id, self.epoch))

    def _on_add_voter_request(self, env: m.Envelope, req: m.AddRaftVoterRequest, now: int) -> None:
        voter = req.voter
        refusal = self._refusal(voter.directory_id, voter.endpoints)
        if refusal is not None:
            return self._refuse_change(env, *refusal)
        if voter.node_id in self.voter_set:
            return self._refuse_change(env, m.Errors.DUPLICATE_VOTER, f"{voter.node_id} is already a voter")
        state = self.state
        assert isinstance(state, Leader)
        deadline = now + max(0, req.timeout_ms)
        voters = self.voter_set.with_voter(voter)
        state.voter_change = VoterChange(ADD, env.src, env.ref, voters, voter.node_id, deadline)
        self._event("voter_change", action="requested", kind=ADD, voter=voter.node_id)
        self._poll_voter_change(state, now)

    def _on_remove_voter_request(self, env: m.Envelope, req: m.RemoveRaftVoterRequest, now: int) -> None:
        refusal = self._refusal(req.directory_id)
        if refusal is not None:
            return self._refuse_change(env, *refusal)
        voters = self.voter_set
        if not voters.holds(req.voter_id, req.directory_id):
            return self._refuse_change(
                env, m.Errors.VOTER_NOT_FOUND, f"({req.voter_id}, {req.directory_id}) is not a voter"
            )
        if len(voters) == 1:
            return self._refuse_change(env, m.Errors.INVALID_REQUEST, "the last voter cannot be removed")
        self._start_change(REMOVE, env, voters.without(req.voter_id), req.voter_id, now)

    def _on_update_voter_request(self, env: m.Envelope, req: m.UpdateRaftVoterRequest, now: int) -> None:
        refusal = self._refusal(req.directory_id, req.endpoints, req.kraft_versions, req.epoch)
        if refusal is not None:
            return self._refuse_change(env, *refusal)
        low, high = req.kraft_versions
        if not low <= self.control.kraft_version <= high:
            return self._refuse_change(
                env, m.Errors.INVALID_REQUEST, f"kraft.version {self.control.kraft_version} is not in [{low}, {high}]"
            )
        voters = self.voter_set
        old = voters.voter(req.voter_id)
        if old is None or not voters.holds(req.voter_id, req.directory_id):
            return self._refuse_change(
                env, m.Errors.VOTER_NOT_FOUND, f"({req.voter_id}, {req.directory_id}) is not a voter"
            )
        updated = Voter(old.node_id, old.directory_id, req.endpoints, (low, high))
        if updated == old:
            self._reply(env, m.VoterChangeResponse(m.Errors.NONE, None, self.node_id, self.epoch))
            return
        self._start_change(UPDATE, env, voters.without(old.node_id).with_voter(updated), old.node_id, now)

    def _start_change(self, kind: str, env: m.Envelope, voters: VoterSet, subject: int, now: int) -> None:
        state = self.state
        assert isinstance(state, Leader)
        state.voter_change = VoterChange(kind, env.src, env.ref, voters, subject, now)
        self._event("voter_change", action="requested", kind=kind, voter=subject)
        self._append_voters(state, state.voter_change, now)

    # ----------------------------------------------------------------- progress

    def _append_voters(self, state: Leader, change: VoterChange, now: int) -> None:
        if state.pending:
            self._drain(state, now)  # records appended before the change keep their order
        change.offset = self.log.end_offset()
        record = voters_record(change.voters)
        self._event(
            "voter_change",
            action="appended",
            kind=change.kind,
            voter=change.subject,
            offset=change.offset,
            voters=list(change.voters.ids),
        )
        self._write_batch(state, Batch(change.offset, state.epoch, (record,), True, now), now)

    def _poll_voter_change(self, state: Leader, now: int) -> None:
        """Carry the leader's voter change on: write it once the added voter caught up (or give up
        at its deadline), answer once it committed, and resign if it removed this leader."""
        change = state.voter_change
        if change is None:
            return
        if change.offset < 0:
            added = change.voters.voter(change.subject)
            # Kafka's isReplicaCaughtUp: the replica key added (id and directory id) must have
            # fetched — a replica of that id on another disk is another observer.
            progress = state.observers.get((change.subject, None if added is None else added.directory_id))
            caught_up = progress is not None and progress.last_caught_up_ms >= now - self.config.fetch_timeout_ms
            if caught_up:
                self._append_voters(state, change, now)
            elif now >= change.deadline:
                state.voter_change = None
                self._event("voter_change", action="timed_out", kind=change.kind, voter=change.subject)
                why = f"voter {change.subject} did not catch up (it must fetch from the leader as an observer)"
                self._out.messages.append(
                    m.Envelope(
                        self.node_id,
                        change.src,
                        m.VoterChangeResponse(m.Errors.REQUEST_TIMED_OUT, why, self.node_id, state.epoch),
                        change.ref,
                    )
                )
            return
        if self._hw <= change.offset:
            return
        state.voter_change = None
        self._event("voter_change", action="committed", kind=change.kind, voter=change.subject, offset=change.offset)
        response = m.VoterChangeResponse(m.Errors.NONE, None, self.node_id, state.epoch)
        self._out.messages.append(m.Envelope(self.node_id, change.src, response, change.ref))
        if self.bugs.on("removed-leader-keeps-leading"):
            return  # BUG ZOO: removed-leader-keeps-leading — it never resigns
        if not self.is_voter:
            # Removed itself: hand over to the most caught-up of the remaining voters.
            ranked = sorted(self.voter_set.others(self.node_id), key=lambda v: -state.voters[v].end_offset)
            self._set_state(self._resigned(state.epoch, tuple(ranked), now), now)

    def _abandon_voter_change(self, state: Leader) -> None:
        """A leader leaving office answers the change it was carrying out: it may still commit under
        the next leader (the client learns the outcome by describing the quorum). As Kafka's closing
        LeaderState, the answer names this leader in the epoch it led (an UpdateRaftVoter's CurrentLeader)."""
        change = state.voter_change
        if change is None:
            return
        state.voter_change = None
        why = "the leader lost its leadership"
        response = m.VoterChangeResponse(m.Errors.NOT_LEADER_OR_FOLLOWER, why, self.node_id, state.epoch)
        self._out.messages.append(m.Envelope(self.node_id, change.src, response, change.ref))


def _invalid_request(
    directory_id: uuid.UUID | None,
    endpoints: tuple[Endpoint, ...] | None,
    kraft_versions: tuple[int, int] | None,
) -> str | None:
    """What makes a voter change request invalid whatever the quorum's state (INVALID_REQUEST, as
    KafkaRaftClient checks before the handlers): no directory id (absent, or Kafka's zero UUID), a
    voter to add or update without an endpoint, a kraft.version range that is negative or empty."""
    if directory_id is None or directory_id.int == 0:
        return "the request names no directory id"
    if endpoints is not None and not endpoints:
        return "the voter has no endpoint"
    if kraft_versions is not None:
        low, high = kraft_versions
        if low < 0 or high < low:
            return f"kraft.version range [{low}, {high}]"
    return None
