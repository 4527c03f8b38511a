"""The zoo's plans: for each bug of the node's registry (node/bugs.py, read through node.admin),
how to expose it end to end — a workload, and random faults of the nemesis packages or a targeted
recipe (kraftlab.zoo.recipes) — plus the node config it needs and a per-attempt length. Every bug
of the registry has a plan and every plan names a bug of it (`missing_plans`, tested)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlab.node.admin import bug_names
from kraftlab.zoo.recipes import RECIPES

# Snapshots often, and no log kept behind them: a node that falls behind or restarts loads one.
SNAPSHOT_OFTEN = {"metadata.snapshot.max.new.record.bytes": "4096", "metadata.max.retention.bytes": "0"}
LAG_SHORT = {"replica.lag.time.max.ms": "3000"}  # a follower cut for 3 s leaves the ISR
SHORT_SESSION = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}  # self-fence at 8 s


@dataclass(frozen=True, slots=True)
class Plan:
    """How to expose one bug end to end: a workload, and either random faults from the nemesis
    packages or, with `recipe`, a targeted schedule (kraftlab.zoo.recipes) of those packages."""

    workload: str
    nemesis: str
    config: dict[str, str] = field(default_factory=dict)
    recipe: str | None = None
    attempt_s: float = 60.0
    """Workload seconds per attempt unless the zoo is told otherwise: a targeted recipe exposes its
    bug in its first cycles, so a short attempt gives the verdict sooner."""
    diskfs: bool = False
    """Run on the disk-fault filesystem, where every kill is a power loss: how a durability bug
    shows, through the disk as on real machines (the node has no switch that loses writes)."""

    def __post_init__(self) -> None:
        if self.recipe is not None and self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; known: {', '.join(RECIPES)}")


PLANS: dict[str, Plan] = {
    "hw-before-leader-change": Plan("mixed", "partition", recipe="lagging-voter-meets-new-leader",
                                    attempt_s=25),
    "resume-old-epoch": Plan("mixed", "kill", recipe="leader-crash-loop", attempt_s=25, diskfs=True),
    "ack-before-fsync": Plan("mixed", "kill", attempt_s=30, diskfs=True),
    "quorum-state-no-fsync": Plan("mixed", "partition,kill", recipe="stale-epoch",
                                  attempt_s=28, diskfs=True),
    "no-check-quorum": Plan("topics", "partition", recipe="isolate-leader", attempt_s=25),
    # one forced cycle (15 s from 2 s in): the lagging voter is the only one that can win, so it does
    "vote-without-log-check": Plan("mixed", "partition,kill", recipe="lagging-voter-first-candidate",
                                   attempt_s=17),
    # the resigned leader's diverging tail meets the new leader's HW (random faults: 1 seed in 2 within 60 s)
    "hw-before-truncate": Plan("mixed", "partition,kill", recipe="resign-then-failover", attempt_s=25),
    # the leader answers what the brokers forward while cut from the other controllers, then a new one takes over;
    # three 6.5 s cycles per attempt (the first one found it in 5 seed bases of 5)
    "respond-before-commit": Plan("topics", "partition", recipe="leader-alone-with-brokers", attempt_s=21),
    "no-revert-on-resign": Plan("topics", "partition,kill", recipe="resign-then-failover", attempt_s=25),
    "accept-stale-broker-epoch": Plan("registry", "partition", attempt_s=30),  # its zombie agents send old epochs
    # the targeted "registration-retry" recipe missed in 3 attempts; random packet faults found it in 2
    "reregister-bumps-epoch": Plan("registry", "partition,packet", attempt_s=30),
    "fenced-stays-in-isr": Plan("isr", "kill,partition", attempt_s=30),
    # random kills rarely leave a broker down across a failover for a whole session: a targeted cycle does
    "forget-leases-on-failover": Plan("mixed", "kill,partition", SHORT_SESSION, recipe="dead-broker-failover",
                                      attempt_s=18),
    "no-self-fencing": Plan("mixed", "partition", SHORT_SESSION, recipe="isolate-broker", attempt_s=24),
    # found by a generic run: the acl workload's probes meet a broker that every nemesis package's
    # isolating partitions cut past its self-fencing bound (checker.authorization: StaleAuthorization)
    "stale-acls-while-fenced": Plan("acl", "all", SHORT_SESSION, attempt_s=60),
    "snapshot-id-off-by-one": Plan("mixed", "kill", SNAPSHOT_OFTEN, attempt_s=30),
    "stuck-in-recovery": Plan("mixed", "kill", attempt_s=25),  # any broker restart; the recovery checker judges
    # the data path (queue workload; checker.queue and the journal rules of checker.dataplane): any leader change
    # of a partition with records in flight, from kills and partitions of brokers
    "hw-back-on-leader-change": Plan("queue", "kill,partition", attempt_s=30),
    "truncate-to-hw-on-leader": Plan("queue", "kill,partition", attempt_s=30),
    # an ISR below min.insync.replicas needs followers cut from a leader that still reaches the controller for
    # longer than replica.lag.time.max.ms (30 s by default: longer than an attempt)
    "acks-all-below-min-insync": Plan("queue", "partition", LAG_SHORT, attempt_s=40),
    # KIP-853: the membership nemesis (on a dynamic quorum) grows, shrinks and replaces disks while clients
    # write; the raft checker counts each HW's majority of the voter set the journals show in force (found by
    # the first attempt, seed 1: MajorityReachedHighWatermark)
    "voters-at-commit": Plan("mixed", "membership", attempt_s=30),
    # two cycles: the active controller removed at 2 s and 14 s, added back 8 s later
    "removed-leader-keeps-leading": Plan("mixed", "membership", recipe="remove-active-controller", attempt_s=25),
    # three cycles: two voter changes sent at the same moment at 2, 12 and 22 s, undone 6 s later
    "concurrent-voter-changes": Plan("mixed", "membership", recipe="voter-changes-together", attempt_s=25),
    # two cycles: a follower's disk replaced with its old voter kept through a 5.5 s pause of the leader
    "replaced-disk-keeps-vote": Plan("mixed", "membership", recipe="replace-disk-then-elect", attempt_s=30),
}
CONTROL = Plan("mixed", "all")


def targeted_plans() -> dict[str, Plan]:
    """Each targeted recipe's plan (by recipe name): run without its bug, it is the control of
    the recipe (a schedule that only a checker's false alarm could fail)."""
    return {p.recipe: p for p in PLANS.values() if p.recipe is not None}


def missing_plans() -> tuple[list[str], list[str]]:
    """(bugs of the node's registry without a plan, plans naming no bug of it): both empty when the
    zoo covers exactly the node's switches that an end-to-end run can expose (the registry says
    which it cannot yet: those are caught in the simulator only)."""
    names = bug_names()
    return [b for b in bug_names(end_to_end_only=True) if b not in PLANS], [p for p in PLANS if p not in names]
