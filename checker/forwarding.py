"""Request forwarding (KIP-590) over the brokers' journals: a broker forwards a client's admin write
(CreateTopics, DeleteTopics, config changes) to the active controller, and must not send it again
once a transmission reached the controller — answered or not, it may have taken effect there, and a
second one makes the client's own write answer as someone else's (TOPIC_ALREADY_EXISTS for a topic
it created itself).

- ForwardedOnce: within one broker process life, no `forward` event of a forward (`fwd`) follows one
  whose outcome was `answered` or `sent-unanswered` (the request was written to the controller's
  connection). `not-sent` transmissions may be retried until the client's timeout.

The `forward` events are written at the broker's I/O edge, from what its protocol client reports
(whether the request left the process), not by the broker core that decides to retry.
"""

from __future__ import annotations

from typing import Any

from kraftlab.checker.invariant import Violation, result
from kraftlab.checker.journal import Entry, Journals

INVARIANTS = ["ForwardedOnce"]
REACHED = ("answered", "sent-unanswered")


def check_forwarding(journals: Journals) -> dict[str, Any]:
    vs: list[Violation] = []
    forwards = 0
    for nid, entries in journals.by_node.items():
        reached: dict[Any, Entry] = {}  # fwd → the transmission that reached the controller
        for e in entries:
            if e.ev == "start":
                reached = {}
            elif e.ev == "forward":
                forwards += 1
                fwd = e.get("fwd")
                first = reached.get(fwd)
                if first is not None:
                    vs.append(Violation("ForwardedOnce", (
                        f"broker {nid} sent forwarded {e.get('api')} #{fwd} to the controller again after a "
                        f"transmission that reached it ({first.get('outcome')}): the controller may apply the "
                        "client's write twice and answer the second as if someone else had made the first"),
                        [first, e]))
                    reached.pop(fwd)  # one report per repeat
                elif e.get("outcome") in REACHED:
                    reached[fwd] = e
    if forwards == 0:
        return result([], [], {"ForwardedOnce": "no broker journalled `forward` events"})
    return result(vs, INVARIANTS, stats={"forward_transmissions": forwards})
