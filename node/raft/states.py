"""The epoch states of a Raft node (KIP-595 + KIP-996): plain data plus small pure predicates.

Transitions between them live in `node.raft.core`; these classes only hold what one state
remembers (its epoch, its leader or vote, its timers) so the core stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.raft.voters import majority as majority  # re-exported: the simulator counts majorities with it


class Role(StrEnum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"
    OBSERVER = "observer"


@dataclass(slots=True)
class Unattached:
    """No known leader in `epoch`. `voted_id` is the candidate this node voted for, if any.
    `deadline`: when a voter starts a pre-vote; for an observer, when it retries a bootstrap Fetch."""

    epoch: int
    voted_id: int | None
    deadline: int
    role = Role.UNATTACHED

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(slots=True)
class Prospective:
    """Pre-vote (KIP-996): asks for votes for `epoch + 1` without changing anyone's state.
    Keeps the vote and leader it had in `epoch` (it may go back to following that leader)."""

    epoch: int
    voted_id: int | None
    leader_id: int | None
    send_at: int
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    role = Role.PROSPECTIVE


@dataclass(slots=True)
class Candidate:
    epoch: int
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    role = Role.CANDIDATE

    @property
    def voted_id(self) -> int | None:
        return None  # set by the core: a candidate always votes for itself

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(slots=True)
class Progress:
    """What the leader knows of one replica."""

    end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    # The high-water mark the last Fetch response to this replica carried: a Fetch from an observer
    # that has not been told the current one is answered at once, never parked (the HW must reach
    # brokers promptly, as Kafka's KIP-1166 does with the replica's HW in its Fetch). Voters keep
    # parking: their HW comes with the next batch, and an extra response per commit would cost the
    # leader's commit path (a voter's HW gates nothing).
    hw_sent: int = -1


@dataclass(slots=True)
class ParkedFetch:
    """A Fetch the leader holds (long poll) until new data, a high-water mark change or `deadline`."""

    src: int
    fetch_offset: int
    last_fetched_epoch: int
    ref: object
    deadline: int


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int
    voters: dict[int, Progress]
    voter_set: VoterSet
    observers: dict[int, Progress] = field(default_factory=dict)
    # Voters that have not fetched in this epoch yet: they are sent BeginQuorumEpoch.
    unacknowledged: set[int] = field(default_factory=set)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    # Records appended but not yet written as a batch (the append linger).
    pending: list = field(default_factory=list)
    pending_since: int = -1
    # When check-quorum fires unless more voters fetch; recomputed by every poll.
    check_quorum_at: int = 0
    role = Role.LEADER

    @property
    def voted_id(self) -> int | None:
        return None

    def quorum_end_offset(self, local_id: int, local_end: int) -> int:
        """The largest offset a majority of voters (counting the leader's durable end) hold."""
        ends = {v: p.end_offset for v, p in self.voters.items()}
        ends[local_id] = local_end
        return self.voter_set.majority_value(ends)

    def check_quorum_deadline(self, local_id: int, now: int, timeout: int) -> int:
        """When this leader must resign unless more voters fetch (the majority's oldest recent fetch + timeout)."""
        times = {v: p.last_fetch_ms for v, p in self.voters.items()}
        times[local_id] = now  # the leader counts itself as fetching now
        return self.voter_set.majority_value(times) + timeout


@dataclass(slots=True)
class SnapshotFetch:
    snapshot_id: OffsetAndEpoch
    position: int = 0


@dataclass(slots=True)
class Follower:
    """Fetches from `leader_id`; `deadline` is the fetch timeout (reset by every successful response)."""

    epoch: int
    leader_id: int
    voted_id: int | None
    deadline: int
    retry_at: int = 0
    has_fetched: bool = False
    snapshot: SnapshotFetch | None = None
    role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    """A former leader of `epoch` (after check-quorum, a graceful resignation or a restart): it
    sends EndQuorumEpoch, serves nothing, and starts a pre-vote at `deadline`."""

    epoch: int
    deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int] = field(default_factory=set)
    role = Role.RESIGNED

    @property
    def voted_id(self) -> int | None:
        return None


EpochState = Unattached | Prospective | Candidate | Leader | Follower | Resigned
