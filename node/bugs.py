"""The bug zoo's registry: test-only switches that re-introduce real KRaft bug classes.

A core never reads a global: it is handed a `BugSet` (immutable; empty by default) and asks
`bugs.on("name")`. The simulator runs many clusters in one process, each with its own set.
Every switch point in the cores is a small branch marked `# BUG ZOO: <name>`; with the empty
set every core runs its correct code. The server accepts a bug only with
`kraftlab.unsafe.test.mode=true` (see node.config) — never in production.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bug:
    name: str
    ticket: str
    """The Apache Kafka ticket (or the ticket whose pattern the bug follows)."""
    layer: str
    """Where the switch lives: raft | storage | controller | broker."""
    description: str
    end_to_end: bool = True
    """Whether the suite's end-to-end zoo can expose it yet (False: the simulator only, until the
    nemesis it needs exists)."""
    simulated: bool = True
    """Whether the whole-cluster or Raft simulator runs it (False: the data-path bugs, whose
    simulator has no partition data; their scripts drive the replication core wired in memory)."""


BUGS: tuple[Bug, ...] = (
    Bug("hw-before-leader-change", "KAFKA-12619", "raft",
        "a new leader sets its high-water mark from the majority before its own LeaderChange is replicated"),
    Bug("resume-old-epoch", "KAFKA-10527", "raft",
        "a restarted leader resumes leadership of the epoch it led before the restart"),
    Bug("ack-before-fsync", "KAFKA-10533", "raft",
        "replicas acknowledge (and the leader counts) appended offsets before they are flushed"),
    Bug("quorum-state-no-fsync", "KAFKA-15312", "storage",
        "quorum-state is renamed into place before it is fsynced, so a crash forgets a granted vote"),
    Bug("no-check-quorum", "KAFKA-15489", "raft",
        "a leader cut off from the majority never resigns and keeps serving as leader"),
    Bug("vote-without-log-check", "Raft §5.4.1", "raft",
        "a voter grants its vote without comparing the candidate's log with its own"),
    Bug("hw-before-truncate", "KAFKA-14704", "raft",
        "a follower applies the leader's high-water mark before truncating its diverging tail"),
    Bug("respond-before-commit", "KIP-631", "controller",
        "the controller answers a request before the records it wrote are committed"),
    Bug("no-revert-on-resign", "KAFKA-13114", "controller",
        "uncommitted controller state is kept (not reverted) when the controller loses leadership"),
    Bug("accept-stale-broker-epoch", "KIP-631", "controller",
        "heartbeats and AlterPartition carrying an old broker epoch are accepted"),
    Bug("reregister-bumps-epoch", "KAFKA-16952", "controller",
        "a re-registration of the same incarnation gets a new broker epoch"),
    Bug("fenced-stays-in-isr", "KAFKA-13173", "controller",
        "fencing a broker leaves it in ISRs, where it can be elected partition leader"),
    Bug("forget-leases-on-failover", "KAFKA-18138", "controller",
        "a new active controller grants no leases to brokers it inherits, so a dead broker is never fenced"),
    Bug("no-self-fencing", "KIP-631", "broker",
        "a broker that cannot reach the quorum keeps serving as unfenced"),
    Bug("stale-acls-while-fenced", "KIP-801", "broker",
        "a broker that fenced itself keeps answering reads, authorized by the ACLs of its last image"),
    Bug("snapshot-id-off-by-one", "KAFKA-14618", "raft",
        "a snapshot's id names its last included offset (inclusive) instead of the exclusive end offset"),
    Bug("trust-unclean-return", "KIP-966", "controller",
        "a broker back from an unclean shutdown (no proof of a clean stop: a crash, a lost disk) stays among "
        "a partition's remembered last ISR members and is elected from them with a log that may lack "
        "acknowledged records", end_to_end=False),
    Bug("stuck-in-recovery", "KIP-631", "broker",
        "a broker restarted over an existing log never finishes its log recovery: it stays in RECOVERY"),
    Bug("hw-back-on-leader-change", "KAFKA-2143", "broker",
        "a new partition leader recomputes its high-water mark from the ISR's log ends it knows, with no "
        "never-goes-back guard: before its followers fetch, the HW falls back to the log start", simulated=False),
    Bug("acks-all-below-min-insync", "KAFKA-1555", "broker",
        "acks=all is appended and acknowledged whatever the ISR's size: min.insync.replicas is never compared",
        simulated=False),
    Bug("truncate-to-hw-on-leader", "KAFKA-1211 (KIP-101)", "broker",
        "a replica becoming partition leader truncates its log to its own high-water mark (which lags the "
        "old leader's), dropping records the old leader had acknowledged", simulated=False),
    # Membership (KIP-853): end to end they need a nemesis that adds, removes and replaces voters.
    Bug("voters-at-commit", "Raft dissertation §4.1", "raft",
        "a replica acts on a new voter set only once its VotersRecord has committed, not once appended"),
    Bug("concurrent-voter-changes", "Raft dissertation §4.1 (one change at a time)", "raft",
        "the leader accepts a second voter change while the first one's VotersRecord is uncommitted"),
    Bug("removed-leader-keeps-leading", "Raft dissertation §4.2.2", "raft",
        "a leader that removed itself keeps leading after the VotersRecord without it committed"),
    Bug("replaced-disk-keeps-vote", "KIP-853 (voter directory ids)", "raft",
        "a replica with a new directory id is taken for the voter of the old one: it grants votes"),
)

BY_NAME: dict[str, Bug] = {b.name: b for b in BUGS}


class UnknownBug(ValueError):
    """A name that is not in the zoo: the node must refuse to start rather than run correct code."""


@dataclass(frozen=True, slots=True)
class BugSet:
    names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(self.names - BY_NAME.keys())
        if unknown:
            raise UnknownBug(f"unknown bug(s) {', '.join(unknown)} (known: {', '.join(sorted(BY_NAME))})")

    @classmethod
    def of(cls, names: Iterable[str] | str | None) -> BugSet:
        """From a name, a comma-separated list, an iterable of names, or None (no bugs)."""
        if names is None:
            return NO_BUGS
        if isinstance(names, str):
            names = [n for n in (p.strip() for p in names.split(",")) if n]
        return cls(frozenset(names))

    def on(self, name: str) -> bool:
        if name not in BY_NAME:
            raise UnknownBug(f"no bug named {name!r} in the zoo")
        return name in self.names

    def __bool__(self) -> bool:
        return bool(self.names)

    def __str__(self) -> str:
        return ",".join(sorted(self.names)) or "none"


NO_BUGS = BugSet()


def bugs_in(layer: str) -> list[Bug]:
    return [b for b in BUGS if b.layer == layer]
