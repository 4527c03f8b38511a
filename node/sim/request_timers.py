"""The timers of the Raft core's own requests, judged by the Raft simulator (with
`node.sim.timer_rules`, which feeds it what it delivers and what each step sends).

Kafka's `RequestManager` (KIP-595's raft client) keeps one request in flight per peer: a request
unanswered is given up after `controller.quorum.request.timeout.ms`, a failed one (the connection
refused) is retried after `controller.quorum.retry.backoff.ms`, and so is a Fetch the leader
answered with an error. Within one epoch state of a node (a transition starts every peer afresh,
as Kafka's `resetConnections` does):

- RequestTimeout: no request to a peer while the last one to it is unanswered and younger than
  the request timeout;
- RetryBackoff: none within the retry backoff of that peer's failure (RequestFailed), or of its
  leader's Fetch/FetchSnapshot error answer to a follower in its epoch (not an error Kafka's
  `maybeHandleCommonResponse` takes as news of another epoch or leader: those are retried at once);
- FetchRetry: a follower asks its leader again (Fetch or FetchSnapshot) at once after a good
  answer, within the retry backoff after an error answer, within `quorum.election.backoff.max.ms`
  after a failure (the node's backoff grows with consecutive failures up to that maximum), and
  within the request timeout of an unanswered request — each a tick late at most, judged when it
  falls due (a follower that stops fetching is seen before its fetch timeout ends it).
- BootstrapRetry: an observer that knows no leader (Unattached) asks some voter with a Fetch at
  once, and again within the retry backoff of each answer or of its last request's timeout (the
  maximum election backoff after a failure, when every voter may be backing off), as Kafka's
  observers do.
- BeginQuorumEpochRetry / EndQuorumEpochRetry: so does a leader to each voter that has neither
  fetched nor answered its BeginQuorumEpoch (KIP-595: the leader tells every voter of its epoch),
  and a resigned leader to each voter that has not answered its EndQuorumEpoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.states import EpochState, Follower, Leader, Resigned, Unattached
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.timing_rules import TICK_MS

_HANDLED = frozenset({m.Errors.UNKNOWN_LEADER_EPOCH, m.Errors.FENCED_LEADER_EPOCH, m.Errors.NOT_LEADER_OR_FOLLOWER})
"""Errors Kafka's `maybeHandleCommonResponse` takes as handled (the epoch or leader moved on): no
backoff follows them, nor one from another epoch."""


@dataclass(slots=True)
class Peer:
    """What one node's current state owes one peer."""

    ref: object = None
    """The ref of the request outstanding to it (None: none)."""
    not_before: int = 0
    why: str = ""
    """Why no request may go to it before `not_before`."""
    by: int | None = None
    """A follower's leader: when the next request to it is due (None: one is outstanding)."""


_OWED: dict[type, tuple[str, str]] = {
    Follower: ("FetchRetry", "its next Fetch"),
    Leader: ("BeginQuorumEpochRetry", "BeginQuorumEpoch again"),
    Resigned: ("EndQuorumEpochRetry", "EndQuorumEpoch again"),
}
"""The states that keep asking a peer until it hears them, the rule judging each, what they owe."""


@dataclass(slots=True)
class Watched:
    core: object
    state: EpochState
    peers: dict[int, Peer] = field(default_factory=dict)
    owed: set[int] = field(default_factory=set)
    seek_by: int | None = None
    """An observer that knows no leader (Unattached): when its next bootstrap Fetch to some voter
    is due while none is outstanding (None: not such an observer)."""
    """Peers this state asks again and again until they hear it: a follower's leader; the voters a
    leader (BeginQuorumEpoch) or a resigned leader (EndQuorumEpoch) has not heard from yet."""


class RequestTimers:
    def __init__(
        self, config: RaftConfig, fail: Callable[[str, str], None], arm: Callable[[int, int], None]
    ) -> None:
        """`arm(node_id, at)`: judge that node's bounds at `at` (`overdue`), or sooner."""
        self.config = config
        self.fail = fail
        self.arm = arm
        self._watched: dict[int, Watched] = {}

    def delivered(self, node: CheckedNode, env: m.Envelope, now: int) -> None:
        """`env` is about to be handled by `node`."""
        watched = self._watched.get(node.node_id)
        msg = env.message
        if watched is None or watched.core is not node.core:
            return
        if isinstance(msg, m.FetchRequest | m.FetchSnapshotRequest | m.BeginQuorumEpochResponse):
            watched.owed.discard(env.src)  # a voter that fetches (or answers) has heard of the leader
        if isinstance(msg, m.EndQuorumEpochResponse):
            watched.owed.discard(env.src)
        if m.is_request(msg):
            return
        peer = watched.peers.get(env.src)
        if peer is None or peer.ref is None or peer.ref != env.ref:
            return
        peer.ref = None
        state = watched.state
        leader = isinstance(state, Follower) and env.src == state.leader_id
        owed = env.src in watched.owed
        if watched.seek_by is not None:
            failed = isinstance(msg, m.RequestFailed)
            wait = self.config.election_backoff_max_ms if failed else self.config.retry_backoff_ms
            watched.seek_by = max(watched.seek_by, now + wait)
            self.arm(node.node_id, watched.seek_by + TICK_MS + 1)
        retry = self.config.retry_backoff_ms
        if isinstance(msg, m.RequestFailed):
            peer.not_before, peer.why = now + retry, f"its request failed at t={now}"
            due = now + self.config.election_backoff_max_ms
        elif leader and isinstance(msg, m.FetchResponse | m.FetchSnapshotResponse) and msg.error != m.Errors.NONE:
            due = now + retry
            if msg.epoch == state.epoch and msg.error not in _HANDLED:
                peer.not_before, peer.why = now + retry, f"it answered {msg.error.name} at t={now}"
            else:
                peer.not_before = now
        else:
            peer.not_before, due = now, now
        if owed:
            peer.by = due
            self.arm(node.node_id, due + TICK_MS + 1)

    def stepped(self, node: CheckedNode, out: Output, now: int) -> None:
        """After a step of `node` at `now` whose output is `out`."""
        core = node.core
        nid = node.node_id
        if core is None:
            self._watched.pop(nid, None)
            return
        state = core.state
        watched = self._watched.get(nid)
        if watched is None or watched.core is not core or watched.state is not state:
            watched = Watched(core, state)
            self._watched[nid] = watched
            if isinstance(state, Follower):
                watched.owed = {state.leader_id}
            elif isinstance(state, Leader | Resigned):
                watched.owed = set(core.voter_set.others(nid))
            for v in watched.owed:
                watched.peers[v] = Peer(by=now)
            if isinstance(state, Unattached) and not core.is_voter:
                watched.seek_by = now
                self.arm(nid, now + TICK_MS + 1)
        timeout = self.config.request_timeout_ms
        for env in out.messages:
            if not m.is_request(env.message):
                continue
            peer = watched.peers.get(env.dst)
            if peer is not None and now < peer.not_before:
                rule = "RetryBackoff" if peer.ref is None else "RequestTimeout"
                self.fail(
                    rule,
                    f"node {nid} sent {type(env.message).__name__} to {env.dst} at t={now}, before "
                    f"t={peer.not_before}: {peer.why}",
                )
            watched.peers[env.dst] = Peer(
                env.ref, now + timeout, f"its request of t={now} is unanswered", None
            )
            if env.dst in watched.owed:
                self.arm(nid, now + timeout + TICK_MS + 1)
            if watched.seek_by is not None:
                watched.seek_by = now + self.config.retry_backoff_ms
                self.arm(nid, now + timeout + self.config.retry_backoff_ms + TICK_MS + 1)

    def _seek_due(self, watched: Watched) -> int:
        """When an observer without a leader must ask a voter next: it asks while none is
        outstanding, so after the last outstanding request is given up."""
        assert watched.seek_by is not None
        outstanding = [p.not_before for p in watched.peers.values() if p.ref is not None]
        return max([watched.seek_by, *(o + self.config.retry_backoff_ms for o in outstanding)])

    def _seeking(self, nid: int, watched: Watched, now: int) -> None:
        """An observer with no leader asks some voter again within the retry backoff of its last
        answer or of its last request's timeout (the maximum election backoff after a failure)."""
        retry = self.config.retry_backoff_ms
        due = self._seek_due(watched)
        if now > due + TICK_MS:
            self.fail(
                "BootstrapRetry",
                f"observer {nid} (no leader in epoch {watched.state.epoch}) has asked no voter since "
                f"t={due - retry} at t={now}: controller.quorum.retry.backoff.ms is {retry} ms",
            )
            watched.seek_by = now

    def next_due(self, node_id: int) -> int | None:
        """The earliest request `node_id` owes (None: none)."""
        watched = self._watched.get(node_id)
        if watched is None:
            return None
        dues = [p.by if p.ref is None else p.not_before for v, p in watched.peers.items() if v in watched.owed]
        if watched.seek_by is not None:
            dues.append(self._seek_due(watched))
        known = [d for d in dues if d is not None]
        return min(known) if known else None

    def overdue(self, nodes: Mapping[int, CheckedNode], now: int) -> None:
        """A node that owes a peer a request past its due time (called at each wake)."""
        for nid, watched in list(self._watched.items()):
            state = watched.state
            core = nodes[nid].core
            if core is not watched.core or core is None or core.state is not state:
                continue
            if watched.seek_by is not None:
                self._seeking(nid, watched, now)
            for v in watched.owed:
                peer = watched.peers[v]
                due = peer.by if peer.ref is None else peer.not_before
                if due is None or now <= due + TICK_MS or (not isinstance(state, Follower) and v not in core.voter_set):
                    continue
                rule, what = next(v for k, v in _OWED.items() if isinstance(state, k))
                self.fail(
                    rule,
                    f"node {nid} ({type(state).__name__}, epoch {state.epoch}) has not sent {what} to {v} "
                    f"at t={now}: it was due by t={due}",
                )
                peer.by, peer.ref, peer.not_before = None, None, now
