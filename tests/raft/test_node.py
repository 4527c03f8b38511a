"""RaftNode: updates reach the state machine in order, and snapshots are taken on schedule."""

from __future__ import annotations

import random

from raft_harness import KEEP_NO_LOG

from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.sim.machine import CounterMachine
from kraftlab.node.sim.memory import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


def single_voter(snapshot_every: int) -> tuple[RaftNode, CounterMachine, MemoryLog, MemorySnapshotStore]:
    log, snapshots, machine = MemoryLog(), MemorySnapshotStore(), CounterMachine()
    config = RaftConfig(append_linger_ms=0, retention=KEEP_NO_LOG)
    core = RaftCore(config, 1, (1,), log, MemoryQuorumStateStore(), snapshots, random.Random(0))
    return RaftNode(core, machine, snapshot_every), machine, log, snapshots


def test_commits_reach_the_machine_and_snapshots_replace_the_log() -> None:
    node, machine, log, snapshots = single_voter(snapshot_every=4)
    node.start(0)
    assert machine.leader == (1, 1, True)
    for i in range(10):
        node.append([Record(None, b"%d" % i)], i + 1)
    assert machine.count == 10 and machine.applied == 11
    latest = snapshots.latest()
    assert latest is not None and latest.offset > 0
    assert log.start_offset() == latest.offset
    assert snapshots.ids() == [latest]  # older ones deleted


def test_restart_loads_the_snapshot_then_replays_the_log() -> None:
    node, machine, log, snapshots = single_voter(snapshot_every=3)
    node.start(0)
    for i in range(7):
        node.append([Record(None, b"%d" % i)], i + 1)
    digest, count = machine.digest, machine.count
    quorum = node.core.quorum
    again = CounterMachine()
    core = RaftCore(RaftConfig(append_linger_ms=0), 1, (1,), log, quorum, snapshots, random.Random(1))
    RaftNode(core, again).start(100)
    assert snapshots.latest() == OffsetAndEpoch(again.snapshot_offset, 1)
    assert (again.count, again.digest) == (count, digest)
    assert again.leader == (1, 2, True)  # a new epoch, never the old leader's
