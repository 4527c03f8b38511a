"""Targeted nemesis schedules for the bug zoo: the interleaving that exposes a rare bug, repeated.

A random schedule reaches the rare interleavings (a lagging voter meeting a leader change, a node
learning an epoch it cannot fetch) too seldom for a bounded attempt. Each recipe here is one cycle
of explicit nemesis steps, made only of the nemesis's own operations (partitions with explicit
victims or grudges, kills and restarts of named nodes), like the simulator's zoo scenarios
(node/sim/zoo.py). The node and role of each victim are drawn from the seed, cycle after cycle,
and the steps are written as a normal nemesis schedule that the runner replays, so a finding is
reproduced by replaying its run's `nemesis-schedule.json`.

The recipes name hosts as every backend's fresh lab does (n1 … nN, controllers first: kraftlab.deploy.plan).
The active controller is resolved (DescribeQuorum) by asking the first running controller, so a
victim whose isolation must not mislead that question is never the first controller.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kraftlab.deploy import DEFAULT_TOPOLOGY, plan
from kraftlab.nemesis.schedule import Schedule, Step

Steps = list[tuple[float, str, str, dict[str, object]]]  # (seconds into the cycle, package, f, value)


@dataclass(frozen=True, slots=True)
class Roles:
    nodes: list[str]
    controllers: list[str]
    brokers: list[str]


def roles(nodes: int, topology: str = DEFAULT_TOPOLOGY) -> Roles:
    specs = plan(topology, {f"n{i}": "" for i in range(1, nodes + 1)})
    return Roles([s.name for s in specs], [s.name for s in specs if s.controller],
                 [s.name for s in specs if s.broker])


def _isolate(node: str) -> dict[str, object]:
    return {"topology": "isolate-node", "nodes": [node]}


def stale_epoch(rng: random.Random, r: Roles) -> Steps:
    """quorum-state-no-fsync: a voter `a` misses an election (isolated while `b` and `c`, killed and
    restarted, elect a new epoch), then hears of the new epoch while it can fetch nothing of it:
    every other voter refuses the connections `a` opens (an asymmetric cut, `drop: new-connections`),
    so the new leader's BeginQuorumEpoch (over a connection the leader opens) reaches `a`, which
    records the epoch (one quorum-state write), but `a`'s fetches never arrive. Only the quorum-state
    remembers the epoch, whichever voter won; a SIGKILL then brings back the previous epoch if that
    write was never made durable (MonotonicEpoch)."""
    a, b, c = rng.sample(r.controllers, 3)
    cut: dict[str, object] = {"grudge": {v: [a] for v in r.controllers if v != a}, "drop": "new-connections"}
    return [(0.0, "partition", "start-partition", _isolate(a)),
            (0.5, "kill", "kill", {"nodes": sorted([b, c])}),
            (1.0, "kill", "restart", {"nodes": sorted([b, c])}),
            (7.0, "partition", "start-partition", cut),
            (9.5, "kill", "kill", {"nodes": [a]}),
            (10.0, "kill", "restart", {"nodes": [a]}),
            (10.5, "partition", "stop-partition", {})]


def lagging_voter_meets_new_leader(rng: random.Random, r: Roles) -> Steps:
    """hw-before-leader-change: a voter `a` lags (isolated while the others commit), then rejoins at
    the moment the active controller is isolated: the remaining follower wins the next epoch with
    `a`'s vote, and `a`'s first fetch (at its old end offset) is what a majority holds when the new
    leader first computes its high-water mark (MonotonicHighWatermark)."""
    a = rng.choice(r.controllers[1:])
    return [(0.0, "partition", "start-partition", _isolate(a)),
            (5.0, "partition", "start-partition", {"topology": "isolate-controller"}),
            (10.0, "partition", "stop-partition", {})]


def lagging_voter_first_candidate(rng: random.Random, r: Roles) -> Steps:
    """vote-without-log-check: a voter `a` is down for 5 s while the others commit. Then `a` is made
    the only voter that can gather a majority: the others may no longer open connections to it
    (an asymmetric cut: it still reaches them over the connections it opens), the active controller
    is killed, and so are enough other voters that the up-to-date survivors are one vote short of a
    majority (none with 3 voters, one with 5). `a` restarts: no survivor can win (none can ask
    `a`), while `a`'s (pre-)vote requests reach them once their fetch timeout has made them give up
    on the dead leader. Granting them without the log check elects `a`, whose log lacks committed
    entries (LeaderCompleteness, CommittedPrefixAgreement); the correct node grants nothing and the
    quorum waits until the cut heals and the dead voters return."""
    a = rng.choice(r.controllers)
    others = sorted(c for c in r.controllers if c != a)
    majority = len(r.controllers) // 2 + 1
    extra = sorted(rng.sample(others, len(r.controllers) - majority - 1))  # down with `a`; the leader follows
    cut: dict[str, object] = {"grudge": {a: others}, "drop": "new-connections"}
    return [(0.0, "kill", "kill", {"nodes": sorted([a, *extra])}),
            (5.0, "partition", "start-partition", cut),
            (5.1, "kill", "kill", {"target": "controller"}),
            (5.3, "kill", "restart", {"nodes": [a]}),
            (13.0, "partition", "stop-partition", {}),
            (13.2, "kill", "restart", {})]


def resign_then_failover(rng: random.Random, r: Roles) -> Steps:
    """no-revert-on-resign: the active controller is isolated while clients' requests reach it (it
    appends, cannot commit, resigns after the check-quorum timeout), the partition heals, and the
    new active controller is killed so the resigned one may lead again, answering from its image.
    The same cycle exposes respond-before-commit (it answered before committing; its own plan
    makes more answers, leader_alone_with_brokers) and hw-before-truncate (at the heal the
    resigned leader's uncommitted tail diverges from the new leader's log, and it must truncate
    before it applies the new leader's HW)."""
    del rng
    return [(0.0, "partition", "start-partition", {"topology": "isolate-controller"}),
            (6.0, "partition", "stop-partition", {}),
            (7.0, "kill", "kill", {"target": "controller"}),
            (7.5, "kill", "restart", {})]


def leader_alone_with_brokers(rng: random.Random, r: Roles) -> Steps:
    """respond-before-commit: first every controller is cut from every other one while the brokers
    still reach them all, so the active controller keeps receiving the requests the brokers forward
    and its own clients' for 2.4 s, appends them and cannot commit any. Then, before check-quorum
    makes it resign (3 s), it is isolated from everyone (resolved by asking the first controller,
    which still names it): the others, past their fetch timeout, elect a leader at once without
    those records, which are lost. Every answer given before committing is one the new leader's
    history contradicts (linearizable-topics); the correct node answers none of them."""
    del rng
    controllers_cut: dict[str, object] = {"grudge": {c: [o for o in r.controllers if o != c] for c in r.controllers}}
    return [(0.0, "partition", "start-partition", controllers_cut),
            (2.4, "partition", "start-partition", {"topology": "isolate-controller"}),
            (5.0, "partition", "stop-partition", {})]


def isolate_leader(rng: random.Random, r: Roles) -> Steps:
    """no-check-quorum: the active controller cut off from everyone for 9 s, well past the
    check-quorum timeout (1.5 × fetch timeout) and two of its quorum samples (StaleLeader)."""
    del rng, r
    return [(0.0, "partition", "start-partition", {"topology": "isolate-controller"}),
            (9.0, "partition", "stop-partition", {})]


def leader_crash_loop(rng: random.Random, r: Roles) -> Steps:
    """resume-old-epoch: the active controller SIGKILLed (losing what it had not flushed: the
    plan runs on the disk-fault filesystem) and restarted at once, so it comes back while its followers
    still hold its epoch's tail; a restarted leader must never lead that epoch again."""
    del rng, r
    return [(0.0, "kill", "kill", {"target": "controller"}),
            (0.3, "kill", "restart", {})]


def isolate_broker(rng: random.Random, r: Roles) -> Steps:
    """no-self-fencing: a broker-only node cut off from every controller (clients still reach it)
    for 14 s, past its self-fence timeout (2 × session timeout; the plan shortens the session) plus
    the checker's slack and two failed-heartbeat samples (SelfFencing)."""
    brokers = [b for b in r.brokers if b not in r.controllers] or r.brokers
    return [(0.0, "partition", "start-partition", _isolate(rng.choice(brokers))),
            (14.0, "partition", "stop-partition", {})]


def registration_retry(rng: random.Random, r: Roles) -> Steps:
    """reregister-bumps-epoch: a broker-only node restarts (a fresh incarnation registers), and the
    active controller is paused (SIGSTOP) for 1.8 s three times while it does: a request sent in a
    pause times out (the plan's 1 s request timeout) and the broker retries the same incarnation;
    the controller, resumed within the followers' fetch timeout so it stays leader, then reads
    both. A retry of a registered incarnation must get the same epoch
    (EpochBumpedForSameIncarnation)."""
    brokers = [b for b in r.brokers if b not in r.controllers] or r.brokers
    b = rng.choice(brokers)
    steps: Steps = [(0.0, "kill", "kill", {"nodes": [b]}), (0.2, "kill", "restart", {"nodes": [b]})]
    for at in (1.0, 3.0, 5.0):
        steps += [(at, "pause", "pause", {"target": "controller"}), (at + 1.8, "pause", "resume", {})]
    return steps


def dead_broker_failover(rng: random.Random, r: Roles) -> Steps:
    """forget-leases-on-failover: a broker-only node is SIGKILLed and stays down while the active
    controller is isolated (it resigns; another takes over with the dead broker unfenced in its
    image). The new active controller must lease it and fence it one session timeout later; with
    the plan's 4 s session the checker's limit (session + slack + a second) passes within the 14 s
    the broker stays down (SessionNotFenced)."""
    brokers = [b for b in r.brokers if b not in r.controllers] or r.brokers
    b = rng.choice(brokers)
    return [(0.0, "kill", "kill", {"nodes": [b]}),
            (0.5, "partition", "start-partition", {"topology": "isolate-controller"}),
            (14.0, "partition", "stop-partition", {}),
            (14.5, "kill", "restart", {"nodes": [b]})]


def remove_active_controller(rng: random.Random, r: Roles) -> Steps:
    """removed-leader-keeps-leading: the active controller is removed from the voters (KIP-853 lets a
    leader commit its own removal), then added back when the window closes. Once its removal has
    committed it must resign; a leader that goes on appending, advancing its high-water mark or
    sampling its quorum after that is caught (RemovedLeaderResigns). Needs a dynamic quorum: a
    schedule with a `membership` step is replayed as one."""
    return [(0.0, "membership", "start-membership",
             {"change": "shrink", "to": 2, "target": "controller", "seed": rng.randrange(2**31)}),
            (8.0, "membership", "stop-membership", {})]


def voter_changes_together(rng: random.Random, r: Roles) -> Steps:
    """concurrent-voter-changes: two voter changes (two spares added, a spare added and a follower
    removed, or two followers removed) sent to the active controller at the same moment, each over
    its own connection; undone when the window closes. KIP-853's leader takes one and answers the
    other REQUEST_TIMED_OUT until the first one's VotersRecord commits; one that appends both
    changes the set twice with the first uncommitted (OneChangeAtATime)."""
    del r
    return [(0.0, "membership", "start-membership", {"change": "concurrent", "seed": rng.randrange(2**31)}),
            (6.0, "membership", "stop-membership", {})]


def replace_disk_then_elect(rng: random.Random, r: Roles) -> Steps:
    """replaced-disk-keeps-vote: a follower's disk replaced (killed, formatted anew: a new directory id,
    started) while its old (id, directory id) stays a voter, then the active controller paused for
    5.5 s (past the followers' fetch timeout: they campaign and ask the new disk for the old one's
    vote); the window's end removes the old voter and adds the new disk. The new disk must refuse;
    one that grants is caught (ReplacedDiskNeverVotes)."""
    del r
    return [(0.0, "membership", "start-membership",
             {"change": "replace-split", "elect_s": 5.5, "seed": rng.randrange(2**31)}),
            (12.0, "membership", "stop-membership", {})]


Recipe = Callable[[random.Random, Roles], Steps]
RECIPES: dict[str, tuple[Recipe, float]] = {  # recipe → cycle length (seconds)
    "stale-epoch": (stale_epoch, 13.0),
    "lagging-voter-meets-new-leader": (lagging_voter_meets_new_leader, 12.0),
    "lagging-voter-first-candidate": (lagging_voter_first_candidate, 15.0),
    "resign-then-failover": (resign_then_failover, 11.0),
    "leader-alone-with-brokers": (leader_alone_with_brokers, 6.5),
    "isolate-leader": (isolate_leader, 11.0),
    "leader-crash-loop": (leader_crash_loop, 5.0),
    "isolate-broker": (isolate_broker, 17.0),
    "registration-retry": (registration_retry, 9.0),
    "dead-broker-failover": (dead_broker_failover, 16.0),
    "remove-active-controller": (remove_active_controller, 12.0),
    "voter-changes-together": (voter_changes_together, 10.0),
    "replace-disk-then-elect": (replace_disk_then_elect, 16.0),
}


def targeted(recipe: str, *, seed: int, duration: float, nodes: int, topology: str = DEFAULT_TOPOLOGY) -> Schedule:
    """Cycles of `recipe` from the seed, every step before `duration`; the runner heals what is left."""
    make, cycle = RECIPES[recipe]
    r = roles(nodes, topology)
    if len(r.controllers) < 3:
        raise ValueError(f"recipe {recipe} needs at least 3 controllers, the topology has {r.controllers}")
    rng = random.Random(seed)
    sched = Schedule(seed, cycle, duration, sorted({"partition", "kill", "pause"}), r.nodes, r.controllers,
                     [b for b in r.brokers if b not in r.controllers] or r.brokers)
    start = 2.0  # the first cycle starts once the workload runs
    while start < duration:
        for at, package, f, value in make(rng, r):
            if start + at < duration:
                sched.steps.append(Step(round(start + at, 3), package, f, dict(value)))
        start += cycle
    used = {s.package for s in sched.steps}
    sched.packages = sorted(set(sched.packages) | used)
    if "membership" in used:  # voter changes: the runner deploys the lab as a dynamic quorum (KIP-853)
        sched.quorum = "dynamic"
    return sched
