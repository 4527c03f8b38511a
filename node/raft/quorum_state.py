"""QuorumState: the one place that changes a node's election state and persists it (KIP-595).

Every transition goes through `transition_to`: it installs the new state, writes the
quorum-state file (epoch, leader, vote and voters) whenever what it holds changed — durably,
before anything the step sends can imply it (a granted vote, a candidacy) — journals the `role`
event, and tells the state machine of a new leader or epoch (`LeaderChange`). What a state must do
before it is left (a leader's unflushed tail and parked fetches) is the core's, done before it
calls here.
"""

from __future__ import annotations

import uuid

from kraftlab.node.raft.output import LeaderChange, Output
from kraftlab.node.raft.ports import QuorumStateData, QuorumStateStore
from kraftlab.node.raft.states import EpochState, Leader, Role, Unattached
from kraftlab.node.raft.voters import VoterHistory


class QuorumState:
    __slots__ = ("_announced", "_persisted", "directory_id", "local_id", "state", "store", "voters")

    def __init__(
        self, local_id: int, store: QuorumStateStore, voters: VoterHistory, directory_id: uuid.UUID | None = None
    ) -> None:
        self.local_id = local_id
        self.directory_id = directory_id
        self.store = store
        self.voters = voters
        self.state: EpochState = Unattached(0, None, 0)
        self._persisted: tuple[int, int | None, int | None] | None = None
        self._announced: tuple[int | None, int, bool] | None = None

    def read(self) -> QuorumStateData | None:
        """What the quorum-state file holds (on start); a later transition to the same epoch,
        leader and vote does not write it again."""
        stored = self.store.read()
        if stored is not None:
            self._persisted = (stored.leader_epoch, stored.leader_id, stored.voted_id)
        return stored

    def transition_to(self, state: EpochState, out: Output, journal: bool) -> None:
        self.state = state
        leader = state.leader_id
        voted = state.voted_id
        persisted = (state.epoch, leader, voted)
        if persisted != self._persisted:
            self.store.write(QuorumStateData(state.epoch, leader, voted, self.voters.latest.ids))
            self._persisted = persisted
        if journal:
            role = state.role if self.voters.latest.holds(self.local_id, self.directory_id) else Role.OBSERVER
            out.events.append(
                {"role": role.value, "epoch": state.epoch, "leader": leader, "voted_for": voted, "ev": "role"}
            )
        announced = (leader, state.epoch, isinstance(state, Leader))
        if announced != self._announced:
            self._announced = announced
            out.updates.append(LeaderChange(*announced))

    def zoo_resume_unpersisted(self, state: Unattached) -> None:
        """BUG ZOO: resume-old-epoch — take a state without persisting or announcing it (the
        restarted leader then leads its old epoch again)."""
        self.state = state
