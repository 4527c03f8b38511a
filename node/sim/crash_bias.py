"""Faults aimed at the moments durability is decided: a share of the Raft simulator's seeds crash a
node right after it installs (or takes) a snapshot at its log end, right after it truncates its
log, right after it grants a vote, and in the middle of a snapshot fetch — where the fetch may
instead lose its leader for a while (the leader isolated), so the transfer meets an epoch change.

A scheduled crash falls at a random instant, so it rarely lands in those windows, which are a step
wide; these land in them. They are drawn from the seed's own generator (runs without them draw
what they did before), only within the fault window and only in runs with `crash` faults, at
most two of each kind per run, each healed after a while (a crashed node restarts, an isolated
one rejoins) and all by the final heal.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.output import Output
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.faults import FaultEvent
from kraftlab.node.sim.invariants import CheckedNode

SHARE = 0.4
"""The share of seeds (of runs with crash faults) that get these faults."""
PER_KIND = 2
"""At most this many of each kind of moment per run (so that the frequent ones — votes, snapshots —
leave room for the rare ones: truncations, snapshot fetches)."""
CHANCE = 0.35
"""The chance each moment seen gets one."""


class LivingNode(CheckedNode, Protocol):
    """A simulated node with its process life."""

    incarnation: int


def enabled(seed: int, faults: tuple[str, ...]) -> bool:
    return "crash" in faults and random.Random(seed ^ 0xD0_5EED).random() < SHARE


class MomentFaults:
    """Watches every step (`observe`) and pushes the faults it draws into the simulator's queue."""

    def __init__(
        self,
        seed: int,
        faults: tuple[str, ...],
        fault_ms: int,
        config: RaftConfig,
        push: Callable[[FaultEvent], None],
    ) -> None:
        self.on = enabled(seed, faults)
        self.rng = random.Random(seed ^ 0xC4A5_0E)
        self.fault_ms = fault_ms
        self.config = config
        self.push = push
        self.injected: dict[str, int] = {}
        self._seen: dict[int, tuple[int, int, OffsetAndEpoch | None]] = {}
        """node id -> (incarnation, log end, latest snapshot) after its last step."""

    def observe(self, node: LivingNode, out: Output, now: int) -> None:
        """After a step of `node`: is it at one of the moments?"""
        if not self.on:
            return
        log = node.log
        nid = node.node_id
        latest = node.snapshots.latest()
        before = self._seen.get(nid)
        self._seen[nid] = (node.incarnation, log.end_offset(), latest)
        if now + 2 * self.config.election_timeout_ms >= self.fault_ms:
            return
        moment = None
        if before is not None and before[0] == node.incarnation:
            if latest != before[2] and latest is not None and log.end_offset() == latest.offset:
                moment = "snapshot"
            elif log.end_offset() < before[1]:
                moment = "truncate"
        for env in out.messages:
            msg = env.message
            if isinstance(msg, m.VoteResponse) and msg.granted and not msg.pre_vote:
                moment = moment or "vote"
            elif isinstance(msg, m.FetchSnapshotRequest) and msg.position > 0:
                moment = moment or ("fetch-isolate" if self.rng.random() < 0.5 else "fetch-crash")
                leader = env.dst
        if moment is None or self.injected.get(moment, 0) >= PER_KIND or self.rng.random() >= CHANCE:
            return
        self.injected[moment] = self.injected.get(moment, 0) + 1
        token = f"moment{sum(self.injected.values())}"
        if moment == "fetch-isolate":
            back = now + self.config.fetch_timeout_ms + self.rng.randint(0, 2 * self.config.election_timeout_ms)
            self.push(FaultEvent(now, "isolate", (leader, token)))
            self.push(FaultEvent(min(back, self.fault_ms), "rejoin", (token,)))
            return
        back = now + self.rng.randint(1, 2 * self.config.election_timeout_ms)
        self.push(FaultEvent(now, "crash", (nid, token)))
        self.push(FaultEvent(min(back, self.fault_ms), "restart", (nid, token)))
