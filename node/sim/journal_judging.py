"""Judging a step's journal lines one by one: the machinery every journal-as-witness rule shares.

A witness rule (the Raft core's in `node.sim.journal_truth`, the controllers' and brokers' in
`node.sim.controller_truth`) folds a step's events, in order, over what the node held before the
step. Each event kind has a `Judge`: the fields the checkers of real runs read from it (each must be
there) and a check of the line against where the fold stands (which also moves the fold on). An
event of a kind no judge knows, or missing a field its judge reads, is itself a false line: a new
event cannot slip past its checker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Judge(Generic[S]):
    reads: tuple[str, ...]
    """The fields of the event the checkers read (each must be there)."""
    check: Callable[[S, dict[str, Any]], str | None]
    """What is false in the event where the fold (of step type S) stands (None: true); moves the fold on."""


def judge_lines(judges: Mapping[str, Judge[S]], reads: Callable[[dict[str, Any]], tuple[str, ...] | None], step: S,
                events: Iterable[dict[str, Any]], report: Callable[[str], None]) -> None:
    """Fold `events` over `step` in order, `report`ing each false line (`reads`: the fields an event
    must carry, None for a kind no judge knows)."""
    for e in events:
        wanted = reads(e)
        if wanted is None:
            report(f"journalled `{e.get('ev')}`, a kind no rule knows: {e}")
            continue
        missing = [k for k in wanted if k not in e]
        if missing:
            report(f"journalled a `{e['ev']}` line that lacks {missing}: {e}")
            continue
        problem = judges[e["ev"]].check(step, e)
        if problem is not None:
            report(f"journalled {problem}: {e}")
