"""A rogue client for the simulator: Raft requests a Kafka node must refuse, and the judgement of
every answer (bad input gets a clear error and changes nothing).

The requests come from `ROGUE_ID`, an id that is no node of the cluster, in the epoch the target
is in (so no answer can be excused by fencing): a Fetch at a negative offset, with a negative
wait or a last fetched epoch beyond the request's epoch or below 0; a FetchSnapshot asking for no
bytes, at a negative position or past the snapshot's end, or for a snapshot that does not exist;
BeginQuorumEpoch / EndQuorumEpoch naming a leader that is not a voter; a Vote for a candidate that
is not a voter. Each answer must carry an error (a Vote's must not grant); the simulator's
invariants judge that nothing else changed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.invariants import CheckedNode

ROGUE_ID = 1_000_000


def malformed(rng: random.Random, node: CheckedNode, replica_ids: list[int]) -> m.Request:
    """One request `node` must refuse, drawn with `rng`; `replica_ids` are the ids it may claim."""
    core = node.core
    assert core is not None
    epoch = core.epoch
    replica = rng.choice([*replica_ids, ROGUE_ID])
    kind = rng.randrange(4)
    if kind == 0:
        offset, wait, last = node.log.end_offset(), 0, node.log.last_epoch()
        flaw = rng.randrange(4)
        if flaw == 0:
            offset = -rng.randint(1, 3)
        elif flaw == 1:
            wait = -rng.randint(1, 500)
        elif flaw == 2:
            last = epoch + rng.randint(1, 3)
        else:
            last = -1
        return m.FetchRequest(epoch, replica, offset, last, wait)
    if kind == 1:
        sid = node.snapshots.latest()
        size = node.snapshots.size(sid) if sid is not None else 0
        position, max_bytes = 0, 1 << 10
        flaw = rng.randrange(4) if sid is not None else 3
        if flaw == 0:
            max_bytes = -rng.randint(0, 1)
        elif flaw == 1:
            position = -rng.randint(1, 3)
        elif flaw == 2:
            position = size + rng.randint(1, 3)
        else:
            top = sid or OffsetAndEpoch(0, 0)
            sid = OffsetAndEpoch(top.offset + rng.randint(1, 50), top.epoch)
        assert sid is not None
        return m.FetchSnapshotRequest(epoch, replica, sid, position, max_bytes)
    if kind == 2:
        return m.BeginQuorumEpochRequest(epoch, ROGUE_ID)
    if kind == 3 and rng.random() < 0.5:
        return m.EndQuorumEpochRequest(epoch, ROGUE_ID, (ROGUE_ID,))
    return m.VoteRequest(epoch, ROGUE_ID, node.log.last_epoch(), node.log.end_offset(), rng.random() < 0.5)


def judge(env: m.Envelope, fail: Callable[[str, str], None]) -> None:
    """An answer to the rogue client: every one must refuse."""
    answer = env.message
    if isinstance(answer, m.RequestFailed):
        return
    if isinstance(answer, m.VoteResponse):
        if answer.granted:
            fail("BadRequestRefused", f"node {env.src} granted a vote to {ROGUE_ID}, which is no voter")
        return
    if getattr(answer, "error", None) == m.Errors.NONE:
        fail("BadRequestRefused", f"node {env.src} accepted a request it must refuse: {env.ref!r} → {answer!r}")
