"""Voter sets as the journals tell them (KIP-853), for the Raft rules that count majorities.

A dynamic quorum's node journals `voters` whenever the set in force at its log's end changes:
appended (a set is in force as soon as it is appended, committed or not), rolled back by a
truncation, replaced by a snapshot, and once at start. Each carries the offset of the VotersRecord
that brought it into force (-1: the bootstrap checkpoint or a snapshot) and the voters as
(id, directory id) pairs: a replaced disk (same id, new directory id) is another voter.

`History` is one node's record of those sets, oldest first: the checker rebuilds it from the
journal alone (never from the node's own opinion of which set counts), and the rules ask it which
set was in force at an offset, and which sets a leader may have counted.
"""

from __future__ import annotations

from typing import Any

Voter = tuple[int, str | None]
"""(node id, directory id as Kafka's base64 text; None in a static quorum or an old journal)."""
VoterSet = frozenset[Voter]
History = tuple[tuple[int, VoterSet], ...]
"""(offset of the record that brought the set into force, the set), by offset."""


def voter_set(fields: Any) -> VoterSet:
    """The set a `voters` event names (its `voters` and, one per voter, `directory_ids`)."""
    ids = [int(v) for v in fields.get("voters") or []]
    dirs = list(fields.get("directory_ids") or [])
    dirs += [None] * (len(ids) - len(dirs))
    return frozenset(zip(ids, dirs, strict=True))


def static_set(ids: list[int]) -> VoterSet:
    return frozenset((i, None) for i in ids)


def after_event(history: History, offset: int, voters: VoterSet) -> History:
    """The history once a node journalled that `voters` is in force from `offset`: every set of a
    later offset is gone (truncated away, or replaced by a snapshot)."""
    return (*(x for x in history if x[0] < offset), (offset, voters))


def ids(voters: VoterSet) -> list[int]:
    return sorted({v[0] for v in voters})


def holds(voters: VoterSet, node: int, directory: str | None) -> bool:
    """Whether `voters` names this node with this directory (any directory when either is unknown)."""
    return any(v == node and (d is None or directory is None or d == directory) for v, d in voters)


def named_directory(voters: VoterSet, node: int) -> str | None:
    return next((d for v, d in voters if v == node), None)


def majority(voters: VoterSet) -> int:
    return len(voters) // 2 + 1


def in_force(history: History, offset: int) -> int:
    """The index in `history` of the set in force at `offset` (the last one appended at or before
    it; the first one when every set came later, as after a snapshot)."""
    i = 0
    for j, (at, _) in enumerate(history):
        if at <= offset:
            i = j
    return i


def counted_at(history: History, offset: int) -> list[VoterSet]:
    """The sets a leader may have counted a majority of to commit `offset`: from the one in force at
    `offset` to the one at its log's end (a set takes effect when appended, so a leader counts the
    newest set it holds, which may be later than the entry it commits)."""
    if not history:
        return []
    return [s for _, s in history[in_force(history, offset):]]


def majorities_intersect(before: VoterSet, after: VoterSet) -> bool:
    """Whether every majority of `before` meets every majority of `after`: two disjoint majorities
    exist exactly when each can be filled from its own voters outside the other set first and the
    shared voters left over suffice for both."""
    shared = len(before & after)
    need_before = max(0, majority(before) - len(before - after))
    need_after = max(0, majority(after) - len(after - before))
    return need_before + need_after > shared
