"""A rogue client for the simulator: Raft requests a Kafka node must refuse, and the judgement of
every answer (bad input gets a clear error and changes nothing; the error is exactly Kafka's for the
state the request found, `node.sim.raft_reference`).

The requests come from `ROGUE_ID`, an id that is no node of the cluster, around the epoch the
target is in — the same (so no answer can be excused by fencing), one below (fenced) or one above
(unknown to a leader; never a voter-only request the target could take): a Fetch at a negative
offset, with a negative wait or a last fetched epoch beyond the request's epoch or below 0, or a
well-formed one to a node that does not lead; a FetchSnapshot asking for no bytes, at a negative
position, at or past the snapshot's end, for a snapshot that does not exist or for the bootstrap
checkpoint; BeginQuorumEpoch / EndQuorumEpoch naming a leader that is not a voter, a negative id or
the target itself; a Vote for a candidate that is not a voter, with a negative id, a log position
that cannot be (a negative offset or epoch, a last epoch not below the one asked for) or another
directory id than the target's; a DescribeQuorum (a read: answered by the leader, refused by any
other node). Each answer but a leader's DescribeQuorum must carry an error (a Vote's must not
grant); the simulator's invariants judge that nothing else changed.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.raft_reference import Responder, responder
from kraftlab.node.sim.response_rules import exact

ROGUE_ID = 1_000_000


@dataclass(frozen=True, slots=True)
class Ask:
    """A rogue request in flight (its envelope's `ref`): what it asked and the state it found."""

    request: m.Request
    before: Responder | None

    def __repr__(self) -> str:
        return repr(self.request)


def ask(rng: random.Random, node: CheckedNode, replica_ids: list[int]) -> Ask:
    """One request for `node`, with the state it finds (taken before `node` handles it)."""
    request = malformed(rng, node, replica_ids)
    return Ask(request, responder(node, request))


def malformed(rng: random.Random, node: CheckedNode, replica_ids: list[int]) -> m.Request:
    """One request `node` must refuse, drawn with `rng`; `replica_ids` are the ids it may claim."""
    core = node.core
    assert core is not None
    epoch = core.epoch
    replica = rng.choice([*replica_ids, ROGUE_ID])
    kind = rng.randrange(6)
    # An epoch below the target's is fenced; above, it is unknown to a leader-only API.
    shifted = max(epoch + rng.choice([-1, 1]), 0)
    if kind == 0:
        offset, wait, last = node.log.end_offset(), 0, node.log.last_epoch()
        flaw = rng.randrange(6)
        if flaw == 0:
            offset = -rng.randint(1, 3)
        elif flaw == 1:
            wait = -rng.randint(1, 500)
        elif flaw == 2:
            last = epoch + rng.randint(1, 3)
        elif flaw == 3:
            last = -1
        elif flaw == 4 and shifted != epoch:
            return m.FetchRequest(shifted, replica, offset, min(last, shifted), wait)
        elif not core.is_leader:
            return m.FetchRequest(epoch, replica, offset, last, wait)  # well formed, but no leader here
        else:
            last = -1
        return m.FetchRequest(epoch, replica, offset, last, wait)
    if kind == 1:
        sid = node.snapshots.latest()
        size = node.snapshots.size(sid) if sid is not None else 0
        position, max_bytes, at = 0, 1 << 10, epoch
        flaw = rng.randrange(7) if sid is not None else rng.choice([3, 4, 5])
        if flaw == 0:
            max_bytes = -rng.randint(0, 1)
        elif flaw == 1:
            position = -rng.randint(1, 3)
        elif flaw == 2:
            position = size + rng.randint(0, 3)
        elif flaw == 3:
            top = sid or OffsetAndEpoch(0, 0)
            sid = OffsetAndEpoch(top.offset + rng.randint(1, 50), top.epoch)
        elif flaw == 4:
            sid = OffsetAndEpoch(0, 0)  # the bootstrap checkpoint, never fetched
        elif flaw == 5 and shifted != epoch:
            at = shifted
        else:
            max_bytes = 0
        if sid is None:  # no snapshot here: ask for one that does not exist
            sid = OffsetAndEpoch(rng.randint(1, 50), epoch)
        return m.FetchSnapshotRequest(at, replica, sid, position, max_bytes)
    leader = rng.choice([ROGUE_ID, ROGUE_ID, -1, node.node_id])
    below = epoch - 1 if epoch > 0 and rng.random() < 0.3 else epoch
    if kind == 2:
        return m.BeginQuorumEpochRequest(below, leader)
    if kind == 3:
        return m.EndQuorumEpochRequest(below, leader, (ROGUE_ID,))
    if kind == 4:
        return m.DescribeQuorumRequest()
    pre_vote = rng.random() < 0.5
    candidate = rng.choice([ROGUE_ID, ROGUE_ID, -1])
    at = below + 1 if pre_vote else below  # a pre-vote asks for the epoch after the candidate's
    last, end, directory = min(node.log.last_epoch(), max(at - 1, 0)), node.log.end_offset(), None
    flaw = rng.randrange(5)
    if flaw == 0:
        end = -rng.randint(1, 3)
    elif flaw == 1:
        last = -1
    elif flaw == 2:
        last = at + rng.randint(0, 2)  # no log ends in the epoch it asks for
    elif flaw == 3:
        directory = uuid.UUID(int=rng.getrandbits(128))  # another disk than the target's
    return m.VoteRequest(at, candidate, last, end, pre_vote, directory)


def judge(env: m.Envelope, fail: Callable[[str, str], None]) -> None:
    """An answer to the rogue client: every one must refuse (but a leader's DescribeQuorum), with
    Kafka's exact error and an error answer's defaults (`response_rules.exact`)."""
    answer: Any = env.message
    if isinstance(answer, m.RequestFailed):
        return
    request = env.ref.request if isinstance(env.ref, Ask) else env.ref
    if isinstance(answer, m.VoteResponse) and answer.granted:
        fail("BadRequestRefused", f"node {env.src} granted a vote to {ROGUE_ID}, which is no voter")
    served = getattr(answer, "error", None) == m.Errors.NONE and not isinstance(answer, m.VoteResponse)
    if served and not isinstance(answer, m.DescribeQuorumResponse):
        fail("BadRequestRefused", f"node {env.src} accepted a request it must refuse: {request!r} → {answer!r}")
    before = env.ref.before if isinstance(env.ref, Ask) else None
    if before is not None:
        what = f"node {env.src}'s {type(answer).__name__} {answer} to {request} from the rogue client"
        exact(before, request, answer, True, before.log_start, lambda rule, why: fail(rule, f"{what}: {why}"))
