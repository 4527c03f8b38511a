"""The epoch states of a Raft node (KIP-595 + KIP-996), each its own class with what it owns.

As in Kafka's raft module, every state knows its epoch, its leader and its vote, and keeps the
behaviour that belongs to it: whether it can grant a (pre-)vote, the (pre-)vote tally of a
Prospective or Candidate node, the follower's fetch timer, the leader's replica progress, quorum
end offset and check-quorum deadline. A state never changes the node's state itself:
`QuorumState` makes every transition (and persists it), and the core's handlers decide which one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.raft.voters import majority as majority  # re-exported: the simulator counts majorities with it

ReplicaKey = tuple[int, uuid.UUID | None]
"""KIP-853: a replica is its node id and its directory id (None: not sent, the static mode)."""


class Role(StrEnum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"
    OBSERVER = "observer"


def _voted_elsewhere(voted_id: int | None, candidate_id: int) -> str | None:
    return None if voted_id in (None, candidate_id) else f"voted for {voted_id}"


class VoteTally:
    """The votes of one (pre-)vote round: the voters that granted (the node itself first) and
    those that rejected or could not be reached."""

    __slots__ = ()
    granted: set[int]
    rejected: set[int]

    def record_vote(self, voter_id: int, granted: bool) -> None:
        (self.granted if granted else self.rejected).add(voter_id)

    def won(self, voters: VoterSet) -> bool:
        return voters.is_majority(self.granted)

    def lost(self, voters: VoterSet) -> bool:
        """Rejected by a majority (explicitly or unreachable): the round can no longer be won."""
        return voters.is_majority(self.rejected)


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

    def pre_vote_refusal(self) -> str | None:
        """Why this state refuses any pre-vote whatever the candidate's log (None: it judges the log)."""
        return None

    def vote_refusal(self, candidate_id: int) -> str | None:
        """Why this state refuses a vote in its own epoch whatever the candidate's log."""
        return _voted_elsewhere(self.voted_id, candidate_id)

    def next_timer(self, now: int) -> int:
        return self.deadline


@dataclass(slots=True)
class Prospective(VoteTally):
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

    def pre_vote_refusal(self) -> str | None:
        return None

    def vote_refusal(self, candidate_id: int) -> str | None:
        if self.leader_id is not None:
            return f"already {self.role.value} in epoch"
        return _voted_elsewhere(self.voted_id, candidate_id)

    def next_timer(self, now: int) -> int:
        return min(self.deadline, self.send_at) if self.send_at > now else self.deadline


@dataclass(slots=True)
class Candidate(VoteTally):
    """Asks for votes in `epoch`, having voted for itself (`local_id`)."""

    epoch: int
    local_id: int
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    role = Role.CANDIDATE

    @property
    def voted_id(self) -> int | None:
        return self.local_id

    @property
    def leader_id(self) -> int | None:
        return None

    def pre_vote_refusal(self) -> str | None:
        return None

    def vote_refusal(self, candidate_id: int) -> str | None:
        return f"already {self.role.value} in epoch"

    def next_timer(self, now: int) -> int:
        return self.deadline


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
    directory_id: uuid.UUID | None = None


@dataclass(slots=True)
class VoterChange:
    """The one voter change (KIP-853: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) a leader is
    carrying out: the requester to answer, the voter set it writes, until when an added voter may
    take to catch up, and the offset of its VotersRecord once appended (-1 before)."""

    kind: str
    src: int
    ref: object
    voters: VoterSet
    subject: int
    """The voter added, removed or updated."""
    deadline: int
    offset: int = -1


@dataclass(slots=True)
class Leader:
    """Leads `epoch` (from `epoch_start_offset`, its LeaderChange) for the voters of `voter_set`:
    owns every replica's progress, the parked fetches, the append linger and check-quorum."""

    epoch: int
    local_id: int
    epoch_start_offset: int
    voters: dict[int, Progress]
    """Progress of exactly the voters of `voter_set` (the leader's own entry is unused: it counts
    its durable end)."""
    voter_set: VoterSet
    observers: dict[ReplicaKey, Progress] = field(default_factory=dict)
    """Progress of every other replica that fetched, by replica key: a replaced disk (the voter's
    id, another directory id) is an observer, as in Kafka's LeaderState (KIP-853)."""
    # Voters that have not fetched in this epoch yet: they are sent BeginQuorumEpoch.
    unacknowledged: set[int] = field(default_factory=set)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    # Records appended but not yet written as a batch (the append linger).
    pending: list[Record] = field(default_factory=list)
    pending_since: int = -1
    # When check-quorum fires unless more voters fetch; recomputed by every poll.
    check_quorum_at: int = 0
    voter_change: VoterChange | None = None
    # Whether this leader has moved the high-water mark in its epoch: until then Kafka's LeaderState
    # holds none, and its Fetch answers and DescribeQuorum say -1.
    hw_known: bool = False
    role = Role.LEADER

    @classmethod
    def elected(cls, epoch: int, local_id: int, epoch_start_offset: int, voter_set: VoterSet, now: int) -> Leader:
        """A new leader: every voter counted as heard from now (check-quorum starts in full), none
        of the others acknowledged yet."""
        progress = {v: Progress(0, now, -1) for v in voter_set}
        return cls(
            epoch, local_id, epoch_start_offset, progress, voter_set, unacknowledged=set(voter_set.others(local_id))
        )

    @property
    def leader_id(self) -> int | None:
        return self.local_id

    @property
    def voted_id(self) -> int | None:
        return None

    def pre_vote_refusal(self) -> str | None:
        return "leader"

    def vote_refusal(self, candidate_id: int) -> str | None:
        return f"already {self.role.value} in epoch"

    @property
    def alone(self) -> bool:
        """The only voter: no check-quorum, nobody to tell."""
        return self.voter_set.is_only_voter(self.local_id)

    def update_voters(self, voter_set: VoterSet, now: int) -> None:
        """The leader appended a voter set (KIP-853: in force at once): a new voter keeps the
        progress it made as an observer with the voter's key (one never seen counts as heard from
        now, as a new leader counts every voter, so check-quorum does not fire at once); a removed
        one, or one the new set names with another directory, is tracked as an observer by the key
        it had."""
        old, old_set = self.voters, self.voter_set
        progress: dict[int, Progress] = {}
        for v in voter_set:
            directory = _directory(voter_set, v)
            if v in old and old_set.holds(v, directory):
                known: Progress | None = old.pop(v)
            else:
                known = self.observers.pop((v, directory), None)
            progress[v] = known if known is not None else Progress(0, now, -1)
        for rid, p in old.items():
            if rid != self.local_id:
                self.observers.setdefault((rid, _directory(old_set, rid)), p)
        self.unacknowledged &= set(voter_set)
        self.voters = progress
        self.voter_set = voter_set

    def progress_of(self, replica_id: int, directory_id: uuid.UUID | None = None) -> Progress | None:
        """The progress of a replica that fetched (a voter has now acknowledged the epoch; an
        observer is tracked from its first fetch); None for a replica id below 0 (a consumer). A
        fetch is the voter's only with the voter's key: the id, and the directory id the set names."""
        known = self.known(replica_id, directory_id)
        if known is not None:
            if replica_id in self.voters:
                self.unacknowledged.discard(replica_id)
            return known
        if replica_id < 0:
            return None
        return self.observers.setdefault((replica_id, directory_id), Progress())

    def known(self, replica_id: int, directory_id: uuid.UUID | None) -> Progress | None:
        """The progress tracked for replica (replica_id, directory_id), voter or observer (None: none)."""
        if replica_id in self.voters and self.voter_set.holds(replica_id, directory_id):
            return self.voters[replica_id]
        return self.observers.get((replica_id, directory_id))

    def quorum_end_offset(self, local_end: int) -> int:
        """The largest offset a majority of voters (counting the leader's durable end) hold."""
        local = self.local_id
        ends = [local_end if v == local else p.end_offset for v, p in self.voters.items()]
        ends.sort(reverse=True)
        return ends[self.voter_set.majority - 1]

    def majority_acknowledged(self) -> bool:
        """Whether a majority of voters (the leader included) have fetched in this epoch."""
        return len(self.voter_set) - len(self.unacknowledged) >= self.voter_set.majority

    def check_quorum_deadline(self, now: int, timeout: int) -> int:
        """When this leader must resign unless more voters fetch (the majority's oldest recent fetch + timeout)."""
        local = self.local_id
        # The leader counts itself as fetching now.
        times = [now if v == local else p.last_fetch_ms for v, p in self.voters.items()]
        times.sort(reverse=True)
        return times[self.voter_set.majority - 1] + timeout

    def next_timer(self, now: int, linger_ms: int) -> int | None:
        times = []
        if self.pending:
            times.append(self.pending_since + linger_ms)
        if self.parked:
            times.append(min(p.deadline for p in self.parked.values()))
        if not self.alone:
            times.append(self.check_quorum_at)
        if self.voter_change is not None and self.voter_change.offset < 0:
            times.append(self.voter_change.deadline)
        return min(times) if times else None


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

    def pre_vote_refusal(self) -> str | None:
        """A follower still hearing from its leader refuses to help unseat it (KIP-996)."""
        return "following a live leader" if self.has_fetched else None

    def vote_refusal(self, candidate_id: int) -> str | None:
        return f"already {self.role.value} in epoch"

    def fetched(self, now: int, fetch_timeout_ms: int) -> None:
        """A successful response from the leader: the fetch timer starts over."""
        self.deadline = now + fetch_timeout_ms
        self.has_fetched = True

    def next_timer(self, now: int, fetch_outstanding: bool) -> int:
        return self.deadline if fetch_outstanding else min(self.deadline, max(self.retry_at, now))


@dataclass(slots=True)
class Resigned:
    """A former leader of `epoch` (after check-quorum, a graceful resignation or a restart): it
    sends EndQuorumEpoch, serves nothing, and starts a pre-vote at `deadline`."""

    epoch: int
    local_id: int
    deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int] = field(default_factory=set)
    role = Role.RESIGNED

    @property
    def leader_id(self) -> int | None:
        return self.local_id

    @property
    def voted_id(self) -> int | None:
        return None

    def pre_vote_refusal(self) -> str | None:
        return None

    def vote_refusal(self, candidate_id: int) -> str | None:
        return f"already {self.role.value} in epoch"

    def next_timer(self, now: int) -> int:
        return self.deadline


EpochState = Unattached | Prospective | Candidate | Leader | Follower | Resigned


def _directory(voter_set: VoterSet, node_id: int) -> uuid.UUID | None:
    voter = voter_set.voter(node_id)
    return None if voter is None else voter.directory_id
