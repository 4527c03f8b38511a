"""The election backoff's growth (KIP-595, Kafka's `KafkaRaftClient` and `QuorumState`), judged by
the Raft simulator on every draw a voter makes.

A voter whose (pre-)vote round failed waits a random backoff before it asks again. Kafka draws it
binary-exponentially in the number of rounds failed in a row: the r-th retry waits a random
multiple of its base below `base · 2^r`, capped at `controller.quorum.election.backoff.max.ms`;
the count starts again at one whenever a round does not follow a failed one (a round begun from
a follower, an unattached voter of a later epoch, a resigned leader: `transitionToProspective`
counts `retries + 1` only from a Candidate). The node's base is its
`controller.quorum.retry.backoff.ms` (Kafka's is a constant 100 ms); the simulator reads that key,
counts the failed rounds itself from the states it watched (a Prospective that follows a
Prospective or a Candidate of the same core is the next round after a failure; any other state in
between starts the count afresh, as does a restart), and reads each draw off the new round's
declared first ask (`send_at`):

- BackoffGrowth (bound): the k-th failed round in a row waits at most min(max, base · 2^k) — a
  backoff that grows too fast, or that does not start afresh when the count should, draws
  above it;
- BackoffGrowth (growth): the draws of a run grow — not every one of them stays within the base
  (the first failure's range in Kafka): for a uniform draw from [0, c] that happens with
  probability (base + 1) / (c + 1), so once the product of those probabilities over a run's draws
  falls below `GROWTH_FALSE_ALARM` (one in a million) while every draw stayed within the base,
  the backoff never grew (a count that never moves, a backoff that shrinks). The rule's
  false-alarm rate is at most that product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kraftlab.node.raft.states import Candidate, EpochState, Prospective
from kraftlab.node.sim.invariants import CheckedNode

GROWTH_FALSE_ALARM = 1e-6
"""The growth rule fails a run whose draws all stayed within the base, once a correct backoff
would have done so with at most this probability."""


@dataclass(slots=True)
class _Seen:
    core: object
    state: EpochState
    failed: int
    """Rounds failed in a row, counted from the states watched."""


class BackoffGrowth:
    """Judges every voter after each of its steps (`judge`)."""

    def __init__(self, base_ms: int, max_ms: int, fail: Callable[[str, str], None]) -> None:
        self.base_ms = base_ms
        self.max_ms = max_ms
        self.fail = fail
        self.judging = True
        self._seen: dict[int, _Seen] = {}
        self.draws: list[tuple[int, int]] = []
        """(rounds failed in a row, backoff drawn) for each draw of the run, in order."""
        self._within = 1.0
        """The probability that a correct backoff drew every draw so far within the base."""
        self._grew = False
        """A draw went past the base."""

    def cap(self, failed: int) -> int:
        """The longest backoff after `failed` rounds failed in a row."""
        return min(self.max_ms, self.base_ms << min(failed, 30))

    def judge(self, node: CheckedNode, now: int) -> None:
        if not self.judging:
            return
        nid = node.node_id
        core = node.core
        if core is None:
            self._seen.pop(nid, None)
            return
        state = core.state
        seen = self._seen.get(nid)
        if seen is not None and seen.core is core and seen.state is state:
            return
        before = seen.state if seen is not None and seen.core is core else None
        failed = seen.failed if before is not None and seen is not None else 0
        if isinstance(state, Prospective) and isinstance(before, Prospective | Candidate):
            failed += 1
            self._drawn(nid, failed, state.send_at - now, now)
        elif not isinstance(state, Prospective | Candidate):
            failed = 0
        self._seen[nid] = _Seen(core, state, failed)

    def _drawn(self, nid: int, failed: int, backoff: int, now: int) -> None:
        cap = self.cap(failed)
        self.draws.append((failed, backoff))
        if not 0 <= backoff <= cap:
            self.fail(
                "BackoffGrowth",
                f"node {nid} backs off {backoff} ms at t={now} after {failed} failed round(s) in a row: "
                f"the backoff lies in [0, {cap}] (min(election.backoff.max {self.max_ms}, "
                f"{self.base_ms} · 2^{failed}))",
            )
            return
        if self._grew or cap <= self.base_ms:
            return
        if backoff > self.base_ms:
            self._grew = True
            return
        self._within *= (self.base_ms + 1) / (cap + 1)
        if self._within < GROWTH_FALSE_ALARM:
            self._grew = True  # judged once
            self.fail(
                "BackoffGrowth",
                f"the run's {len(self.draws)} election backoffs (the last node {nid}'s at t={now}, after "
                f"{failed} failed rounds in a row) all stayed within the base {self.base_ms} ms: a backoff "
                f"growing as base · 2^k does so with probability {self._within:.1e}",
            )
