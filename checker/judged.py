"""Which operations of a run's history the linearizability checkers judge.

Kafka's brokers serve metadata reads from their own image, which is only eventually consistent,
so a read a broker served during the run (`"broker_read": true` in its invocation value) is not
judged for linearizability — `checker.broker_reads` judges it against the committed log instead. The final reads
(`"final": true`), taken after heal and recovery once every node has caught up, are judged where
a model can take them: the topic list and describe reads, the ACL list (registry and isr reads from brokers lack
the broker and partition epochs Kafka's broker APIs never expose) — one broker's (the others say
`"judged": false`: an op that ended in doubt may land while the final reads run, and brokers apply it
apart, see `workloads.ops.judged_final_broker`). Nemesis ops are never judged.

A final topic `list` is projected onto one `describe` per topic the history names, so the topics
check stays per key (P-compositionality) instead of folding every topic into one search; the
describes are concurrent (distinct processes), which only weakens the check — never a false alarm.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kraftlab.checker.history import Event, History

JUDGED_FINAL_READS = frozenset({("topics", "list"), ("topics", "describe"), ("acl", "list")})


def judged(invocation: Event) -> bool:
    """Whether the op this invocation starts goes to the linearizability checker."""
    v = invocation.value
    if not isinstance(v, dict) or not v.get("broker_read"):
        return True
    return bool(v.get("final")) and v.get("judged", True) is not False and \
        (invocation.extra.get("workload"), invocation.f) in JUDGED_FINAL_READS


def client_events(events: Iterable[Event], nemesis: list[Event] | None = None) -> Iterator[Event]:
    """The judged events, streaming: no nemesis ops (appended to `nemesis` when given), no
    unjudged reads nor their completions."""
    skipped: set[Any] = set()
    for e in events:
        if e.process == "nemesis":
            if nemesis is not None:
                nemesis.append(e)
            continue
        if e.type == "invoke":
            if not judged(e):
                skipped.add(e.process)
                continue
            skipped.discard(e.process)
        elif e.process in skipped:
            skipped.discard(e.process)
            continue
        yield e


def project_final_lists(events: list[Event]) -> list[Event]:
    """Replace each final topics `list` (invocation + completion) by one `describe` per topic."""
    topics = sorted({e.value["topic"] for e in events
                     if e.extra.get("workload") == "topics" and isinstance(e.value, dict) and "topic" in e.value})
    out: list[Event] = []
    pending: dict[Any, Event] = {}
    for e in events:
        if e.extra.get("workload") != "topics" or e.f != "list":
            out.append(e)
            continue
        if e.type == "invoke":
            pending[e.process] = e
            continue
        inv = pending.pop(e.process, None)
        if inv is None or e.type != "ok" or not isinstance(e.value, dict):
            continue  # an unknown-outcome read observes nothing
        listed = set(e.value.get("topics", []))
        for i, t in enumerate(topics):
            process = f"{inv.process}/{i}"
            out.append(Event(inv.index, process, "invoke", "describe", {**inv.value, "topic": t}, inv.time, inv.node,
                             None, inv.line, dict(inv.extra)))
            out.append(Event(e.index, process, "ok", "describe", {"exists": t in listed}, e.time, e.node, None, e.line,
                             dict(e.extra)))
    return out


def linearizable_part(history: History) -> History:
    """The part of a run's history the linearizability checkers judge (see the module docstring)."""
    return History(project_final_lists(list(client_events(history.events))), history.source, history.format)
