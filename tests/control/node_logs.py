"""What an end-to-end test shows when it fails with a deployment up: each node's state and the last
lines of its log, read before the test's cleanup takes the lab away (a node that exited right after a
healthy deploy otherwise leaves nothing to read)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from kraftlab.deploy import Deployment

TAIL_LINES = 60


def node_logs(d: Deployment) -> str:
    """Every node's state and log tail; a node whose host cannot be read says why instead."""
    parts = []
    for node in d.nodes():
        try:
            state = "running" if d.running(node) else "not running"
            parts.append(f"--- {node} ({state}), last {TAIL_LINES} lines of {d.paths(node).log}:\n"
                         f"{d.log_tail(node, TAIL_LINES)}")
        except Exception as exc:  # diagnostics must never hide the test's own failure
            parts.append(f"--- {node}: its log could not be read: {exc}")
    return "\n".join(parts)


@contextmanager
def logs_on_failure(d: Deployment) -> Iterator[None]:
    """Print the nodes' logs (to stderr, shown in pytest's report) when the body raises, then re-raise."""
    try:
        yield
    except BaseException:
        print(f"node logs at the failure:\n{node_logs(d)}", file=sys.stderr)
        raise
