"""KIP-595's check-quorum bounds, judged by the Raft simulator on every step of a leader.

KIP-595 (and Kafka's `LeaderState`): a leader that has not received a Fetch from a majority of
the voters (itself counted) within the check-quorum timeout — `quorum.fetch.timeout.ms` × 1.5,
Kafka's `CHECK_QUORUM_TIMEOUT_FACTOR` — resigns. The simulator delivers every Fetch and
FetchSnapshot itself (`QuorumWitness` records, per leadership, when each replica last fetched in
the leader's epoch; a new leader counts every voter as heard from when it was elected), so it
knows the moment that timeout expires and judges both directions:

- CheckQuorumResigns: a leader still leading more than `TICK_MS` after the timeout expired;
- CheckQuorumEarly: a leader that resigned its epoch (went Resigned in it) while a majority's
  fetches were still within the timeout.

Expiry is the majority's oldest recent fetch plus the timeout: the voters' latest fetch times
(the leader's own is "now") sorted newest first, the majority-th of them, plus the timeout.

And `quorum.election.backoff.max.ms` (KIP-595, KIP-996): a voter whose (pre-)vote round failed
(it starts a new pre-vote round from a Prospective or Candidate state) waits a random backoff
before it asks again, never more than that maximum — ElectionBackoff: no pre-vote request sent
within the maximum plus a tick of the failed round's end, while the node stays in the new round.
(How the backoff grows with consecutive failures: `node.sim.backoff_growth`.) Below, the backoff
is random and may be 0 once, but not every time: the first BACKOFF_DRAWS failed rounds of a run
must not all ask again at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.states import Candidate, Prospective, Resigned
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.quorum_view import QuorumWitness

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
"""Kafka's `LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR`: the check-quorum timeout per fetch timeout."""

TICK_MS = 1

BACKOFF_DRAWS = 5
"""Failed rounds after which a run's backoffs must not all have been 0 ms: each draw is uniform in
[0, b] with b at least twice `controller.quorum.retry.backoff.ms` (20 ms), so 0 comes up with
probability at most 1/41, all five with at most 41^-5 (about 10^-8): the rule's false-alarm rate."""
"""The slack of a timing bound: the simulator's clock runs in whole milliseconds."""


def check_quorum_timeout_ms(fetch_timeout_ms: int) -> int:
    return int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)


class CheckQuorumBounds:
    """Judges each leader of a static voter set after each of its steps (`judge`)."""

    def __init__(self, witness: QuorumWitness, fetch_timeout_ms: int, fail: Callable[[str, str], None]) -> None:
        self.witness = witness
        self.timeout = check_quorum_timeout_ms(fetch_timeout_ms)
        self.fail = fail
        self.judging = True
        """False: judge nothing (a run whose voter set changes: the witness's fixed voters do not hold)."""
        self._leading: dict[int, tuple[object, int]] = {}
        """node id -> (the core, the epoch) it led after its last step."""

    def expiry(self, node_id: int, epoch: int, now: int) -> int | None:
        """When the leadership (node_id, epoch) must end unless more voters fetch; None: unknown."""
        lead = self.witness.leaderships.get((node_id, epoch))
        if lead is None:
            return None
        times = []
        for v in self.witness.voters:
            if v == node_id:
                times.append(now)
                continue
            seen = lead.replicas.get(v)
            times.append(seen.last_fetch if seen is not None and seen.last_fetch >= 0 else lead.began)
        times.sort(reverse=True)
        return times[self.witness.majority - 1] + self.timeout

    def judge(self, node: CheckedNode, now: int) -> None:
        """After a step of `node` at `now` (the witness has seen the step's deliveries)."""
        if not self.judging:
            return
        core = node.core
        nid = node.node_id
        before = self._leading.pop(nid, None)
        if core is None or nid not in self.witness.voters:
            return
        if core.is_leader:
            self._leading[nid] = (core, core.epoch)
            if len(self.witness.voters) == 1:
                return  # a lone voter never resigns for check-quorum
            expiry = self.expiry(nid, core.epoch, now)
            if expiry is not None and now > expiry + TICK_MS:
                self.fail(
                    "CheckQuorumResigns",
                    f"node {nid} still leads epoch {core.epoch} at t={now}: a majority of the voters "
                    f"last fetched by t={expiry - self.timeout}, so check-quorum ({self.timeout} ms) "
                    f"expired at t={expiry}",
                )
            return
        if before is None or before[0] is not core:
            return
        state = core.state
        if isinstance(state, Resigned) and state.epoch == before[1]:
            expiry = self.expiry(nid, before[1], now)
            if expiry is not None and now < expiry:
                self.fail(
                    "CheckQuorumEarly",
                    f"node {nid} resigned epoch {before[1]} at t={now} though a majority of the "
                    f"voters fetched within the check-quorum timeout ({self.timeout} ms): it "
                    f"expires at t={expiry}",
                )


class ElectionBackoff:
    """Judges every voter's output (`judge`, on each step): a failed round is retried within the
    maximum backoff."""

    def __init__(self, backoff_max_ms: int, fail: Callable[[str, str], None]) -> None:
        self.backoff_max_ms = backoff_max_ms
        self.fail = fail
        self.judging = True
        self._rounds: dict[int, object] = {}
        """node id -> the (pre-)vote round state it is in after its last step."""
        self._failed: dict[int, tuple[object, int]] = {}
        self.waits: list[int] = []
        """How long each failed round's node waited before asking again, in order."""
        """node id -> (the round that began after a failed one, when it began), until it asks."""

    def overdue(self, nodes: Mapping[int, CheckedNode], now: int) -> None:
        """Rounds past their backoff whose node has not stepped since (`nodes`: id -> node)."""
        if not self._failed:
            return
        for nid, (state, began) in list(self._failed.items()):
            core = nodes[nid].core
            if core is None or core.state is not state:
                del self._failed[nid]
            elif now > began + self.backoff_max_ms + TICK_MS:
                del self._failed[nid]
                self._late(nid, began, now)

    def _waited(self, wait: int) -> None:
        """A failed round's node asked again `wait` ms after the round ended: judge the first draws' spread."""
        self.waits.append(wait)
        if len(self.waits) == BACKOFF_DRAWS and not any(self.waits):
            self.fail(
                "ElectionBackoff",
                f"the first {BACKOFF_DRAWS} rounds after a failed one all asked at once: no backoff was drawn",
            )

    def due(self, node_id: int) -> int | None:
        """When the failed round `node_id` is in must have asked again at the latest (None: none)."""
        failed = self._failed.get(node_id)
        return None if failed is None else failed[1] + self.backoff_max_ms

    def _late(self, nid: int, began: int, now: int) -> None:
        self.fail(
            "ElectionBackoff",
            f"node {nid}'s round failed at t={began} and it has not asked for votes again at t={now}, "
            f"past quorum.election.backoff.max.ms ({self.backoff_max_ms} ms)",
        )

    def judge(self, node: CheckedNode, out: Output, now: int) -> None:
        if not self.judging:
            return
        nid = node.node_id
        core = node.core
        state = None if core is None else core.state
        before = self._rounds.get(nid)
        if isinstance(state, Prospective | Candidate):
            self._rounds[nid] = state
        else:
            self._rounds.pop(nid, None)
        if isinstance(state, Prospective) and state is not before and isinstance(before, Prospective | Candidate):
            self._failed[nid] = (state, now)
        failed = self._failed.get(nid)
        if failed is None:
            return
        if failed[0] is not state:
            del self._failed[nid]  # it left the round
            return
        if any(isinstance(e.message, m.VoteRequest) and e.message.pre_vote for e in out.messages):
            del self._failed[nid]  # it asked again
            self._waited(now - failed[1])
            return
        if now > failed[1] + self.backoff_max_ms + TICK_MS:
            del self._failed[nid]
            self._late(nid, failed[1], now)
