"""Raft's Log Matching property over logs given as epochs per offset — pure, shared by the journal
replay's LogMatching rule and the check of the logs the nodes stored on disk (`raft.stored`).

A log is compressed to its epoch runs; for each log, its epochs must never go down as offsets
rise, and two logs that hold the same epoch at an offset must hold the same epochs at every
offset below it that both hold (with one entry per offset and epoch, checked by the callers on
their own CRCs, that means the same entries).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

Runs = tuple[tuple[int, int, int], ...]
"""A log as epoch runs: (first offset, end offset (exclusive), epoch), ascending, split at gaps."""


@dataclass(frozen=True, slots=True)
class Breach:
    logs: tuple[str, ...]  # the names of the log(s) involved
    explanation: str
    before: str | None = None
    after: str | None = None


def runs_of(epochs: Mapping[int, int]) -> Runs:
    """The epoch runs of a log given as offset → epoch."""
    runs: list[tuple[int, int, int]] = []
    for o in sorted(epochs):
        ep = epochs[o]
        if runs and runs[-1][1] == o and runs[-1][2] == ep:
            runs[-1] = (runs[-1][0], o + 1, ep)
        else:
            runs.append((o, o + 1, ep))
    return tuple(runs)


def overlap(a: Runs, b: Runs) -> list[tuple[int, int, int, int]]:
    """The offsets both logs hold, as (first, end, epoch in a, epoch in b), ascending."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi, a[i][2], b[j][2]))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return out


def breaches(logs: Sequence[tuple[Runs, str]]) -> Iterator[Breach]:
    """Each log whose epochs go down, and each pair of logs that share an epoch at an offset but
    not below it (at most one breach per log and per pair)."""
    for runs, name in logs:
        for (_, end, ep), (nxt, _, later) in itertools.pairwise(runs):
            if later < ep:
                yield Breach((name,), f"{name} holds epoch {ep} up to offset {end - 1} and then the older epoch "
                                      f"{later} at offset {nxt}")
                break
    for (ra, na), (rb, nb) in itertools.combinations(logs, 2):
        both = overlap(ra, rb)
        shared = next((seg for seg in reversed(both) if seg[2] == seg[3]), None)
        if shared is None:
            continue
        top = shared[1] - 1
        differ = next((seg for seg in both if seg[0] <= top and seg[2] != seg[3]), None)
        if differ is not None:
            yield Breach((na, nb), (
                f"{na} and {nb} both hold offset {top} in epoch {shared[2]}, yet at offset {differ[0]} one holds "
                f"epoch {differ[2]} and the other epoch {differ[3]}"),
                before=f"offset {differ[0]}: epoch {differ[2]} vs {differ[3]}",
                after=f"offset {top}: epoch {shared[2]} in both")
