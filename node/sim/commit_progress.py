"""CommitProgress: a liveness bound the Raft simulator judges once its faults are healed — a
leader with a connected majority commits what it appends within a bound derived from the
configuration, so a core that is safe but stuck (or merely slow) is caught.

KIP-595 and Kafka's `KafkaRaftClient`: a leader writes its batch when the append linger ends
(`controller.quorum.append.linger.ms`), answers the Fetches its voters hold in purgatory as soon as
it appends (a held Fetch waits at most `fetch.max.wait.ms` only when there is nothing new), and
moves the high-water mark once a majority of voters, itself counted once flushed, hold an offset.
So with the network healed (messages take at most `max_delay_ms` each way) an offset at the
leader's log end at time t is committed by

    t + flush delay + 2 × (the held Fetch's answer + the next Fetch) + a tick,

the leader's own flush running beside the round trip. The simulator judges this from a request
timeout and a retry backoff after the heal, or after a leadership begins if later — a request the
faults lost before the heal is outstanding until it times out, and the followers catch up (a
snapshot transfer, a truncation) meanwhile — for as long as that leadership lasts. And only while
a majority of the leader's voters (itself counted) can take records by Fetch: up, on the voter's
disk, in the leader's epoch, and holding the leader's log start (a voter below it copies a snapshot
first, which takes as long as the snapshot is large) — a voter set that grew, or voters still
copying a snapshot after the heal, make the leader wait for them, as Kafka's leader does; the
bound runs from the moment such a majority is there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.sim.invariants import CheckedNode

Fail = Callable[[str, str], None]

TICK_MS = 1


def commit_bound_ms(config: RaftConfig, flush_delay_ms: int, max_delay_ms: int) -> int:
    """How long after it reaches the leader's log end an offset may wait to be committed."""
    return flush_delay_ms + 4 * max_delay_ms + TICK_MS


class CommitProgress:
    def __init__(
        self, config: RaftConfig, flush_delay_ms: int, max_delay_ms: int, fail: Fail, nodes: Mapping[int, CheckedNode]
    ) -> None:
        self.nodes = nodes
        self.bound = commit_bound_ms(config, flush_delay_ms, max_delay_ms)
        self.quiet = config.request_timeout_ms + config.retry_backoff_ms
        """From the heal, how long until nothing lost before it counts: a request the faults lost is
        outstanding until its timeout (then retried after the backoff)."""
        self.fail = fail
        self.healed_at: int | None = None
        """When the faults were healed (None: not yet: nothing is judged)."""
        self.judging = True
        self._leadership: tuple[int, int] | None = None
        self._from = 0
        """When the current leadership's appends start to be judged."""
        self._ready_since: int | None = None
        """Since when a majority of the leader's voters can take records by Fetch (None: not now)."""
        self._due: deque[tuple[int, int]] = deque()
        """(log end offset, when the leader's log first reached it), oldest first, not yet committed."""
        self.judged = 0
        self.worst_ms = 0
        """The longest wait judged (from an offset's append to its commit)."""

    def healed(self, now: int) -> None:
        self.healed_at = now

    def stepped(self, node: CheckedNode, now: int) -> None:
        """After a step of `node` at `now`."""
        if self.healed_at is None or not self.judging:
            return
        core = node.core
        if core is not None and core.is_leader:
            lead = (node.node_id, core.epoch)
            if lead != self._leadership:
                self._leadership = lead
                self._from = max(now, self.healed_at) + self.quiet
                self._ready_since = None
                self._due.clear()
            if now < self._from:
                return
            if not self._majority_fetching(node, core):
                self._ready_since = None
            elif self._ready_since is None:
                self._ready_since = now
            hw, end = core.high_watermark, node.log.end_offset()
            due = self._due
            while due and due[0][0] <= hw:
                self.judged += 1
                self.worst_ms = max(self.worst_ms, now - due.popleft()[1])
            if end > hw and (not due or due[-1][0] < end):
                due.append((end, now))
        elif self._leadership == (node.node_id, core.epoch if core is not None else -1):
            self._leadership = None
            self._due.clear()
        ready = self._ready_since
        if self._due and ready is not None and now > max(self._due[0][1], ready) + self.bound:
            offset, since = self._due[0]
            leader = self._leadership
            self._due.clear()
            self.fail(
                "CommitProgress",
                f"leader {leader} has not committed offset {offset}, at its log end since t={since}, by t={now}: "
                f"past the bound of {self.bound} ms with the faults healed",
            )

    def _majority_fetching(self, leader: CheckedNode, core: RaftCore) -> bool:
        """Whether a majority of the leader's voters (itself counted) can take its records by Fetch now."""
        voters = core.voter_set
        start = leader.log.start_offset()
        fetching = 0
        for v in voters:
            node = self.nodes.get(v)
            other = None if node is None else node.core
            if node is None or other is None or not voters.holds(v, other.directory_id):
                continue
            if v == leader.node_id or (other.epoch == core.epoch and node.log.end_offset() >= start):
                fetching += 1
        return 2 * fetching > len(voters)
