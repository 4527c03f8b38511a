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
  above it; so does the backoff of a Candidate its voters rejected (Kafka's
  `CandidateState.startBackingOff`: its deadline brought forward to the backoff's end), counted
  with the rounds failed before it (at most base · 2^k after k);
- BackoffGrowth (growth): the draws of a run grow — not every one of them stays within the base
  (the first failure's range in Kafka): for a uniform draw from [0, c] that happens with
  probability (base + 1) / (c + 1), so once the product of those probabilities over a run's draws
  falls below `GROWTH_FALSE_ALARM` (one in a million) while every draw stayed within the base,
  the backoff never grew (a count that never moves, a backoff that shrinks); and likewise not every
  draw below the maximum stays in the lower half of its range (probability (c/2 + 1) / (c + 1)
  each): a backoff growing slower than base · 2^k (a failure left uncounted, half the base). The rule's
  false-alarm rate is at most twice that bound.
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
    deadline: int
    """A Candidate's deadline after the step (0 for any other state)."""


class _LowTail:
    """The draws of a run all in the low part of their ranges ([0, `low(cap)`] of [0, cap]): the
    probability a uniform draw does so, multiplied over the run's draws until one lies above it."""

    def __init__(self, what: str, low: Callable[[int], int]) -> None:
        self.what = what
        self.low = low
        self.p = 1.0
        self.done = False

    def drawn(self, cap: int, backoff: int, fail: Callable[[str, float], None]) -> None:
        low = self.low(cap)
        if self.done or low >= cap:
            return
        if backoff > low:
            self.done = True
            return
        self.p *= (low + 1) / (cap + 1)
        if self.p < GROWTH_FALSE_ALARM:
            self.done = True  # judged once
            fail(self.what, self.p)


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
        self._tails = (
            _LowTail(f"the base {base_ms} ms", lambda cap: base_ms),
            # Only below the maximum: a backoff growing slower reaches the same cap there.
            _LowTail("the lower half of their ranges", lambda cap: cap // 2 if cap < max_ms else cap),
        )

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
        deadline = state.deadline if isinstance(state, Candidate) else 0
        if seen is not None and seen.core is core and seen.state is state:
            if deadline < seen.deadline:  # a rejected Candidate backs off before its next round
                self._bounded(nid, seen.failed, deadline - now, now)
            seen.deadline = deadline
            return
        before = seen.state if seen is not None and seen.core is core else None
        failed = seen.failed if before is not None and seen is not None else 0
        if isinstance(state, Prospective) and isinstance(before, Prospective | Candidate):
            failed += 1
            self._drawn(nid, failed, state.send_at - now, now)
        elif not isinstance(state, Prospective | Candidate):
            failed = 0
        self._seen[nid] = _Seen(core, state, failed, deadline)

    def _bounded(self, nid: int, failed: int, backoff: int, now: int) -> bool:
        """The backoff a node draws after `failed` rounds failed in a row lies in [0, cap]."""
        cap = self.cap(failed)
        if 0 <= backoff <= cap:
            return True
        self.fail(
            "BackoffGrowth",
            f"node {nid} backs off {backoff} ms at t={now} after {failed} failed round(s) in a row: "
            f"the backoff lies in [0, {cap}] (min(election.backoff.max {self.max_ms}, "
            f"{self.base_ms} · 2^{failed}))",
        )
        return False

    def _drawn(self, nid: int, failed: int, backoff: int, now: int) -> None:
        cap = self.cap(failed)
        self.draws.append((failed, backoff))
        if not self._bounded(nid, failed, backoff, now):
            return
        for tail in self._tails:
            tail.drawn(cap, backoff, lambda what, p: self._low(nid, failed, now, what, p))

    def _low(self, nid: int, failed: int, now: int, what: str, p: float) -> None:
        self.fail(
            "BackoffGrowth",
            f"the run's {len(self.draws)} election backoffs (the last node {nid}'s at t={now}, after {failed} "
            f"failed rounds in a row) all stayed within {what}: a backoff growing as base · 2^k, drawn "
            f"uniformly, does so with probability {p:.1e}",
        )
