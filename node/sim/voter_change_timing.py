"""When a leader answers a voter change it took (KIP-853), judged by the dynamic-quorum simulator
on the time of each answer and on every step while the change is pending.

KIP-853's AddRaftVoter carries TimeoutMs, "the maximum time to wait for the request to complete":
the leader waits for the new replica to catch up before it writes the VotersRecord, and gives up
with REQUEST_TIMED_OUT when that time ends (Kafka's `LeaderState.maybeExpirePendingOperation`: a
pending operation whose timer expired completes REQUEST_TIMED_OUT at the leader's next poll). So
(AddVoterTimeout):

- early: an add the leader took is answered REQUEST_TIMED_OUT before its TimeoutMs has passed
  since the leader took it;
- late: the leader that took it still leads that epoch, has not written its VotersRecord and has
  not answered it more than `TICK_MS` after the timeout ended — whether or not anything wakes it
  (judged at every step of any node, and when the answer comes).

An add whose record was written waits for its commit (the answer then is NONE, judged with the
rest of the answers by `node.sim.voter_requests`); an add its leader gave up office on is answered
NOT_LEADER_OR_FOLLOWER at the transition (idem).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.states import Leader
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.timing_rules import TICK_MS


@dataclass(slots=True)
class _Pending:
    node_id: int
    core: object
    epoch: int
    taken: int
    deadline: int
    request: m.AddRaftVoterRequest


class VoterChangeTiming:
    """The adds leaders took, by the client's reference, until answered."""

    def __init__(self, fail: Callable[[str, str], None]) -> None:
        self.fail = fail
        self._pending: dict[int, _Pending] = {}
        self.timed_out = 0
        """Adds answered REQUEST_TIMED_OUT after they were taken (how often the rule had a timeout to judge)."""

    def asked(self, ref: int, request: object, refused: bool, node: CheckedNode, now: int) -> None:
        """The client sends `request` to `node` at `now`; `refused`: Kafka refuses it at once."""
        core = node.core
        if refused or core is None or not isinstance(request, m.AddRaftVoterRequest) or not core.is_leader:
            return
        deadline = now + max(0, request.timeout_ms)
        self._pending[ref] = _Pending(node.node_id, core, core.epoch, now, deadline, request)

    def answered(self, env: m.Envelope, now: int) -> None:
        pending = self._pending.pop(env.ref, None) if isinstance(env.ref, int) else None
        message = env.message
        if pending is None or not isinstance(message, m.VoterChangeResponse):
            return
        if message.error is not m.Errors.REQUEST_TIMED_OUT:
            return
        self.timed_out += 1
        if now < pending.deadline:
            self._fail(pending, f"answered REQUEST_TIMED_OUT at t={now}, before its timeout ended")
        elif now > pending.deadline + TICK_MS:
            self._fail(pending, f"answered REQUEST_TIMED_OUT only at t={now}")

    def overdue(self, nodes: Mapping[int, CheckedNode], now: int) -> None:
        """Adds still waiting for their voter past their timeout at a leader that took them."""
        for ref, pending in list(self._pending.items()):
            if now <= pending.deadline + TICK_MS:
                continue
            core = nodes[pending.node_id].core
            state = None if core is None or core is not pending.core else core.state
            change = state.voter_change if isinstance(state, Leader) and state.epoch == pending.epoch else None
            if change is None or change.ref != ref or change.offset >= 0:
                del self._pending[ref]  # answered otherwise, written, or its leader left office
                continue
            del self._pending[ref]
            self._fail(pending, f"still waits for its voter at t={now}, unanswered")

    def _fail(self, pending: _Pending, what: str) -> None:
        self.fail(
            "AddVoterTimeout",
            f"node {pending.node_id} (leader in epoch {pending.epoch}) took {pending.request!r} at "
            f"t={pending.taken}: its timeout ({pending.request.timeout_ms} ms) ends at t={pending.deadline}, "
            f"and it {what}",
        )
