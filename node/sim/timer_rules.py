"""Every timer of the Raft core fires within Kafka's window, judged by the Raft simulator at the
moment it falls due — not at the node's next step, which never comes to a node that forgot its
timer and hears nothing.

The core is woken only by messages and by `tick` at the `Output.deadline` it declares (as the
real node's driver sleeps until it). The simulator watches each node's epoch states from the
outside — when each began, what was delivered to it during it, what it sent — and knows from
Kafka's configuration when each must end, and when it may not end yet (KIP-595, Kafka's
`QuorumState`, `FollowerState`, `CandidateState`, `ResignedState`, `BatchAccumulator`):

- TimerDeclared: every step declares its next timer (`Output.deadline`), never in the past; only a
  leader that is the only voter and holds nothing lingering may declare none.
- FetchTimeout: a follower that has not had a successful Fetch (or FetchSnapshot) response from
  its leader for `controller.quorum.fetch.timeout.ms` leaves it — a voter for a pre-vote, an
  observer to look for the leader — at that moment (late: judged a tick after), and not before it
  (early), unless its leader told it with EndQuorumEpoch to go sooner.
- ElectionTimeout: a timer drawn from `controller.quorum.election.timeout.ms` (T) lies in [T, 2T)
  (Kafka's `randomElectionTimeoutMs`): a Candidate's round and a Resigned leader's wait end by
  the state's start plus 2T − 1 (late) and, without a rejection or failure to excuse it, not
  before its start plus T (early); so does an Unattached voter's wait (its very first start, when
  the quorum's bootstrap begins at once, is excused from the early bound and ends within the retry
  backoff: KIP-595's bootstrap, a short random delay instead of an election) and a Prospective
  round's, counted from its first pre-vote request (its backoff, at most
  `quorum.election.backoff.max.ms`, comes first). The draws a run makes (a Candidate's and a
  Resigned leader's declared deadline, read when the state begins) lie in [T, 2T) and
  (ElectionTimeoutSpread) the first 8 are not all in its lowest or highest quarter, the first 16
  not all in one half: uniform draws do either with probability 2·4⁻⁸ + 2·2⁻¹⁶ ≈ 6·10⁻⁵ per
  run, the rule's false-alarm rate.
- AppendLinger (`controller.quorum.append.linger.ms`): a leader's appended records wait in their
  batch for the linger counted from the batch's first record, and are written then (late: a
  tick after) and not before (early) unless the batch filled (`max_batch_records`) or a control
  batch (a voter change) was written right after it (Kafka force-drains the batch first).

And the timers of the core's own requests (`node.sim.request_timers`: RequestTimeout,
RetryBackoff, FetchRetry). And the bounds the simulator already judged at a node's step (`timing_rules`: check-quorum,
the election backoff's maximum) get the moment they fall due as an event of their own.

Every moment a bound falls due is an event in the simulator's queue (`wake`), so a node that is
never woken is judged all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.states import Candidate, EpochState, Follower, Leader, Prospective, Resigned, Unattached
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.request_timers import RequestTimers
from kraftlab.node.sim.timing_rules import TICK_MS, CheckQuorumBounds, ElectionBackoff

SPREAD_DRAWS = (8, 16)
"""The spread of a run's election timeouts is judged once it drew 8 (all in one outer quarter of
[T, 2T): false-alarm rate 2 * 4^-8, about 3e-5 per run) and once it drew 16 (all in one half:
2 * 2^-16, 3e-5): about 6e-5 per run in all."""


@dataclass(slots=True)
class Life:
    """One epoch state of one node, as the simulator watched it."""

    core: object
    state: EpochState
    began: int
    voter: bool
    first: bool
    """The first state of its core (the node just started)."""
    heard_surely: int
    """A follower: the latest response from its leader the core surely took as a fetch (a lower
    estimate of its fetch timer's start)."""
    heard_maybe: int
    """The latest one it may have taken (an upper estimate)."""
    excused: bool = False
    """A rejection, a failed request or an EndQuorumEpoch was delivered: it may end early."""
    asked: int | None = None
    """A Prospective round: when it sent its first pre-vote request."""
    sent: dict[int, tuple[object, int, m.Message]] = field(default_factory=dict)
    """Destination -> (ref, when, request) of the latest request sent to it and not yet answered."""
    batch: tuple[int, int, int] | None = None
    """A leader: (when its first record was appended, its base offset, records) of the lingering batch."""


class TimerRules:
    """Watches each node's states (`delivered` before a message is handled, `stepped` after each
    step, `appended` after a client append) and judges the bounds that fall due (`overdue`, on
    every event of the simulator; `wake(at)` queues an event at `at`)."""

    def __init__(
        self,
        config: RaftConfig,
        fail: Callable[[str, str], None],
        wake: Callable[[int], None],
        check_quorum: CheckQuorumBounds | None = None,
        backoff: ElectionBackoff | None = None,
    ) -> None:
        self.config = config
        self.fail = fail
        self._wake = wake
        self.check_quorum = check_quorum
        self.backoff = backoff
        self.judging = True
        self.lives: dict[int, Life] = {}
        self._wakes: set[int] = set()
        self._check_quorum_due: dict[int, int] = {}
        self._told_to_end: dict[int, int] = {}
        """node id -> when an EndQuorumEpoch was last delivered to it."""
        self.draws: list[int] = []
        """The election timeouts drawn this run (ms past T), in order."""
        self.requests = RequestTimers(config, fail, self.arm)
        self._armed: dict[int, int] = {}
        """node id -> the next moment it is judged at (`arm`)."""
        """The timers of the core's own requests (`node.sim.request_timers`)."""

    # ------------------------------------------------------------------ what the simulator saw

    def wake(self, at: int) -> None:
        if at not in self._wakes:
            self._wakes.add(at)
            self._wake(at)

    def arm(self, node_id: int, at: int) -> None:
        """Judge node `node_id` at `at`, unless it is judged sooner: then it is armed again for what
        is still due (`_next_due`). Bounds that move later at every message (a follower's fetch
        timeout, check-quorum, a request's timeout) cost one event per node, not one per message."""
        pending = self._armed.get(node_id)
        if pending is not None and pending <= at:
            return
        self._armed[node_id] = at
        self.wake(at)

    def _next_due(self, node: CheckedNode, now: int) -> int | None:
        """The earliest bound of `node` not yet judged at `now` (None: none)."""
        nid = node.node_id
        dues = [self.requests.next_due(nid), self._check_quorum_due.get(nid)]
        if self.backoff is not None:
            dues.append(self.backoff.due(nid))
        life = self.lives.get(nid)
        if life is not None and life.core is node.core and node.core is not None and node.core.state is life.state:
            dues.append(self._due(life))
            if life.batch is not None:
                dues.append(life.batch[0] + self.config.append_linger_ms)
        pending = [d for d in dues if d is not None and d + TICK_MS + 1 > now]
        return min(pending) if pending else None

    def delivered(self, node: CheckedNode, env: m.Envelope, now: int) -> None:
        """`env` is about to be handled by `node`."""
        if not self.judging:
            return
        self.requests.delivered(node, env, now)
        msg = env.message
        if isinstance(msg, m.EndQuorumEpochRequest):
            self._told_to_end[node.node_id] = now  # the state it leads to in this step may end early too
        life = self.lives.get(node.node_id)
        if life is None or life.core is not node.core:
            return
        if isinstance(msg, m.EndQuorumEpochRequest):
            life.excused = True
            return
        sent = life.sent.get(env.src)
        if sent is None or sent[0] != env.ref or m.is_request(msg):
            return
        del life.sent[env.src]
        _, at, request = sent
        if isinstance(msg, m.RequestFailed) or (
            isinstance(msg, m.VoteResponse) and (msg.error != m.Errors.NONE or not msg.granted)
        ):
            life.excused = True
            return
        state = life.state
        if not isinstance(state, Follower) or env.src != state.leader_id:
            return
        if not isinstance(msg, m.FetchResponse | m.FetchSnapshotResponse) or msg.error != m.Errors.NONE:
            return
        if msg.epoch != state.epoch:
            return
        expires = at + self.config.request_timeout_ms
        if now <= expires:
            life.heard_maybe = now
            self.arm(node.node_id, now + self.config.fetch_timeout_ms + TICK_MS + 1)
        surely = now < expires and (
            isinstance(msg, m.FetchResponse)
            or (
                isinstance(request, m.FetchSnapshotRequest)
                and msg.snapshot_id == request.snapshot_id
                and msg.position == request.position
            )
        )
        if surely:
            life.heard_surely = now

    def appended(self, node: CheckedNode, base: int, count: int, now: int) -> None:
        """The client appended `count` records at offset `base` to leader `node` (before its step's output)."""
        life = self.lives.get(node.node_id)
        if life is None or life.core is not node.core or not isinstance(life.state, Leader):
            return
        if life.batch is None:
            life.batch = (now, base, count)
            self.arm(node.node_id, now + self.config.append_linger_ms + TICK_MS + 1)
        else:
            life.batch = (life.batch[0], life.batch[1], life.batch[2] + count)

    def stepped(self, node: CheckedNode, out: Output, now: int) -> None:
        """After a step of `node` at `now` whose output is `out`."""
        if not self.judging:
            return
        core = node.core
        nid = node.node_id
        if core is None:
            self.lives.pop(nid, None)
            self.requests.stepped(node, out, now)
            return
        state = core.state
        self._declared(nid, state, out, now)
        self.requests.stepped(node, out, now)
        life = self.lives.get(nid)
        if life is None or life.core is not core or life.state is not state:
            if life is not None and life.core is core:
                self._ended(nid, life, state, now)
            life = Life(core, state, now, core.is_voter, life is None or life.core is not core, now, now)
            life.excused = self._told_to_end.get(nid) == now
            self.lives[nid] = life
            self._began(nid, life, now)
        for env in out.messages:
            msg = env.message
            if m.is_request(msg):
                life.sent[env.dst] = (env.ref, now, msg)
                if life.asked is None and isinstance(msg, m.VoteRequest) and msg.pre_vote:
                    life.asked = now
                    self.arm(nid, now + 2 * self.config.election_timeout_ms - 1 + TICK_MS + 1)
        if life.batch is not None:
            self._batch_written(nid, life, node, now)
        self._schedule_others(node, now)

    # ------------------------------------------------------------------ the bounds

    def _declared(self, nid: int, state: EpochState, out: Output, now: int) -> None:
        deadline = out.deadline
        if deadline is None:
            if isinstance(state, Leader) and state.alone and not state.pending:
                return
            self.fail("TimerDeclared", f"node {nid} ({type(state).__name__}) declared no timer at t={now}")
        elif deadline < now:
            self.fail("TimerDeclared", f"node {nid} declared a timer at t={deadline}, in the past at t={now}")

    def _due(self, life: Life) -> int | None:
        """When `life`'s state must have ended at the latest (None: not judged)."""
        state = life.state
        t = self.config.election_timeout_ms
        if isinstance(state, Follower):
            return life.heard_maybe + self.config.fetch_timeout_ms
        if isinstance(state, Unattached) and life.voter and self._fresh(life):
            return life.began + max(1, self.config.retry_backoff_ms) - 1
        if isinstance(state, Candidate | Resigned) or (isinstance(state, Unattached) and life.voter):
            return life.began + 2 * t - 1
        if isinstance(state, Prospective):
            if life.asked is None:
                return life.began + self.config.election_backoff_max_ms + 2 * t - 1
            return life.asked + 2 * t - 1
        return None

    @staticmethod
    def _fresh(life: Life) -> bool:
        """The quorum's first start: a voter's first state, at the run's start, in epoch 0."""
        return life.first and life.began == 0 and life.state.epoch == 0

    def _began(self, nid: int, life: Life, now: int) -> None:
        state = life.state
        due = self._due(life)
        if due is not None:
            self.arm(nid, due + TICK_MS + 1)
        if isinstance(state, Candidate | Resigned) and not self._alone(life):
            t = self.config.election_timeout_ms
            drawn = state.deadline - now
            if not t <= drawn < 2 * t:
                self.fail(
                    "ElectionTimeout",
                    f"node {nid} drew an election timeout of {drawn} ms at t={now} "
                    f"({type(state).__name__}), outside [{t}, {2 * t}) ms",
                )
            self._spread(drawn - t, t)

    def _spread(self, past: int, t: int) -> None:
        draws = self.draws
        draws.append(past)
        n = len(draws)
        if n not in SPREAD_DRAWS:
            return
        parts = 4 if n == SPREAD_DRAWS[0] else 2  # outer quarters of 8 draws, halves of 16
        ends = {
            "lowest": all(parts * d < t for d in draws),
            "highest": all(parts * d >= (parts - 1) * t for d in draws),
        }
        for end, alone in ends.items():
            if alone:
                self.fail(
                    "ElectionTimeoutSpread",
                    f"the first {n} election timeouts drawn all lie in the {end} 1/{parts} of "
                    f"[{t}, {2 * t}) ms: {sorted(d + t for d in draws)}",
                )

    def _alone(self, life: Life) -> bool:
        core = life.core
        voter_set = getattr(core, "voter_set", None)
        node_id = getattr(core, "node_id", None)
        return voter_set is None or voter_set.is_only_voter(node_id)

    def _ended(self, nid: int, life: Life, state: EpochState, now: int) -> None:
        """`life` ended at `now` in `state`: judge an end by timeout that came too soon."""
        old = life.state
        t = self.config.election_timeout_ms
        timed_out = isinstance(state, Prospective) or (
            isinstance(state, Unattached) and isinstance(old, Follower) and state.epoch == old.epoch
        )
        if not timed_out or life.excused or self._alone(life):
            return
        if isinstance(old, Follower):
            earliest: int | None = life.heard_surely + self.config.fetch_timeout_ms
        elif isinstance(old, Prospective):
            earliest = None if life.asked is None else life.asked + t
        elif isinstance(old, Candidate | Resigned) or (
            isinstance(old, Unattached) and life.voter and not (life.first and old.epoch == 0)
        ):
            earliest = life.began + t
        else:
            earliest = None
        if earliest is not None and now < earliest:
            rule, what = ("FetchTimeout", "fetch") if isinstance(old, Follower) else ("ElectionTimeout", "election")
            self.fail(
                rule,
                f"node {nid} left {type(old).__name__} (epoch {old.epoch}, from t={life.began}) for "
                f"{type(state).__name__} at t={now}: its {what} timeout ends at t={earliest} at the earliest",
            )

    def _batch_written(self, nid: int, life: Life, node: CheckedNode, now: int) -> None:
        assert life.batch is not None
        since, base, count = life.batch
        if node.log.end_offset() <= base:
            return
        life.batch = None
        linger = self.config.append_linger_ms
        # Another batch written after it in the same step is a control batch (the leader writes no
        # other): Kafka's `BatchAccumulator.appendControlMessages` force-drains the batch first.
        followed = node.log.end_offset() > base + count
        if now < since + linger and count < self.config.max_batch_records and not followed:
            self.fail(
                "AppendLinger",
                f"leader {nid} wrote the batch of {count} records appended from t={since} at t={now}, "
                f"before controller.quorum.append.linger.ms ({linger} ms) and not full",
            )

    def _schedule_others(self, node: CheckedNode, now: int) -> None:
        """Queue the moments the step-judged bounds (`timing_rules`) fall due for `node`."""
        nid = node.node_id
        core = node.core
        cq = self.check_quorum
        if cq is not None and cq.judging and core is not None and core.is_leader:
            expiry = cq.expiry(nid, core.epoch, now)
            if expiry is not None:
                self._check_quorum_due[nid] = expiry
                self.arm(nid, expiry + TICK_MS + 1)
        else:
            self._check_quorum_due.pop(nid, None)
        if self.backoff is not None:
            due = self.backoff.due(nid)
            if due is not None:
                self.arm(nid, due + TICK_MS + 1)

    # ------------------------------------------------------------------ on time

    def overdue(self, nodes: Mapping[int, CheckedNode], now: int) -> None:
        """Judge every bound that fell due before `now` (called on every event of the simulator)."""
        if now not in self._wakes or not self.judging:
            return
        self._wakes.discard(now)
        self.requests.overdue(nodes, now)
        for nid, life in list(self.lives.items()):
            node = nodes[nid]
            core = node.core
            if core is not life.core or core is None:
                del self.lives[nid]
                continue
            if core.state is not life.state:
                continue
            due = self._due(life)
            if due is not None and now > due + TICK_MS:
                name = "FetchTimeout" if isinstance(life.state, Follower) else "ElectionTimeout"
                self.fail(
                    name,
                    f"node {nid} is still {type(life.state).__name__} (epoch {core.epoch}, from "
                    f"t={life.began}) at t={now}: its timer fell due by t={due}",
                )
            if life.batch is not None:
                since, _, count = life.batch
                if now > since + self.config.append_linger_ms + TICK_MS:
                    self.fail(
                        "AppendLinger",
                        f"leader {nid} still holds the {count} records appended from t={since} at t={now}, "
                        f"past controller.quorum.append.linger.ms ({self.config.append_linger_ms} ms)",
                    )
        for nid in [n for n, at in self._armed.items() if at == now]:
            del self._armed[nid]
            due = self._next_due(nodes[nid], now)
            if due is not None:
                self.arm(nid, due + TICK_MS + 1)
        cq = self.check_quorum
        if cq is not None:
            for nid, expiry in list(self._check_quorum_due.items()):
                if now > expiry + TICK_MS:
                    del self._check_quorum_due[nid]
                    cq.judge(nodes[nid], now)
