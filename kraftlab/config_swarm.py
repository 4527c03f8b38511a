"""Swarm over the node's configuration: when a run does not fix a key, each seed draws its value
from a small table of values valid for Kafka (swarm testing, Groce et al., ISSTA 2012: a seed that
leaves the defaults behind reaches timings, and so interleavings, the defaults never do).

`TABLE` holds one row per server.properties key, under Kafka's name; add a row to swarm another key.
`RELATIONS` are the orderings Kafka's keys keep between them (a follower's fetch timeout is longer
than an election timeout); a draw only picks values that keep every relation with the keys known
so far — the user's own and the rows drawn before it. A key the user set (`--config KEY=VALUE`) is
never drawn, and a key no value of whose row can keep the relations is left to the node's default.

The draw is a function of the seed alone (its own random stream, so the workload's and the
nemesis's draws of the same seed are unchanged).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    key: str
    values: tuple[str, ...]
    why: str


TABLE: tuple[Row, ...] = (
    Row("controller.quorum.election.backoff.max.ms", ("1000", "200", "50"),
        "Kafka's default, and shorter: after a split vote candidates stand again quickly, so contested "
        "elections (two candidates in one epoch) come back to back"),
    Row("controller.quorum.election.timeout.ms", ("1000", "500", "300"),
        "Kafka's default and shorter: more elections per fault window, candidates timing out together"),
    Row("controller.quorum.fetch.timeout.ms", ("2000", "1000", "3000"),
        "Kafka's default, shorter (followers give up on a leader sooner: elections while a leader "
        "still serves) and longer (a cut-off leader keeps writing an uncommitted tail for longer)"),
    Row("metadata.max.retention.bytes", ("104857600", "32768", "0"),
        "Kafka's default (a run's whole log kept behind its snapshots: a deposed leader or a lagging "
        "follower is cut back by a diverging epoch), about two of the lab's 16-KiB segments kept (some "
        "come back within the log, some below its start), and none (every one that falls behind a "
        "snapshot loads it)"),
)
"""The keys a seed draws and the values it draws from (strings, as server.properties holds them)."""

RELATIONS: tuple[tuple[str, str], ...] = (
    ("controller.quorum.fetch.timeout.ms", "controller.quorum.election.timeout.ms"),
)
"""(longer, shorter): the first key's value must exceed the second's (Kafka's relation between them)."""


def _keeps_relations(key: str, value: str, known: Mapping[str, str]) -> bool:
    for longer, shorter in RELATIONS:
        try:
            if key == longer and shorter in known and not float(value) > float(known[shorter]):
                return False
            if key == shorter and longer in known and not float(known[longer]) > float(value):
                return False
        except ValueError:  # a user's value that is not a number: the node refuses it, not the draw
            continue
    return True


def draw_config(seed: int, fixed: Mapping[str, str]) -> dict[str, str]:
    """The keys of `TABLE` that `fixed` (the user's overrides) leaves open, with the values seed
    `seed` draws for them."""
    rng = random.Random(f"kraftlab.config_swarm:{seed}")
    known = dict(fixed)
    drawn: dict[str, str] = {}
    for row in TABLE:
        pick = rng.random()  # one number per row even when it is fixed: fixing a key leaves the others' draws
        if row.key in fixed:
            continue
        allowed = [v for v in row.values if _keeps_relations(row.key, v, known)]
        if allowed:
            drawn[row.key] = known[row.key] = allowed[int(pick * len(allowed))]
    return drawn
