"""Voter changes in flight together: two AddRaftVoter / RemoveRaftVoter sent to the quorum's leader
at the same moment, each over its own connection, as when two operators' tools race.

KIP-853 lets a leader carry out one voter change at a time: it takes one and answers the other
`REQUEST_TIMED_OUT` until the first one's VotersRecord has committed (the tool retries). A leader
that takes the second while the first is uncommitted appends two voter sets in a row; the journals
show it (OneChangeAtATime, and MajoritiesIntersect when the two sets differ by two voters). Here
only the first attempts go out together; every change not done by its first answer is then carried
on alone (`voter_changes.carry_out`), so the window ends with each change in force or its outcome
known. The first answers are kept: on a correct leader at most one of them is `NONE` before the
other is retried.

`send_in_threads` is the generic way to send them together (one thread per request, released by one
barrier), for labs where the tools run on the nodes' hosts; a lab whose runner reaches the leader
itself sends them from one process (kraftlab.deploy).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from kraftlab.nemesis.ports import VoterAnswer, VoterControl, VoterRequest
from kraftlab.nemesis.voter_changes import ADD, REMOVE, Change, carry_out, send

PAIRS: tuple[tuple[str, str], ...] = ((ADD, ADD), (ADD, REMOVE), (REMOVE, REMOVE))


def send_in_threads(control: VoterControl, requests: Sequence[VoterRequest], timeout_s: float) -> list[VoterAnswer]:
    """Each request sent by its own thread, all released at once; the answers in order."""
    barrier = threading.Barrier(len(requests))
    answers: list[VoterAnswer] = [VoterAnswer("UNREACHABLE", "not sent")] * len(requests)

    def one(i: int, request: VoterRequest) -> None:
        barrier.wait()
        answers[i] = send(control, request, timeout_s)

    threads = [threading.Thread(target=one, args=(i, r), name=f"voter-change-{r.node}", daemon=True)
               for i, r in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def carry_out_together(control: VoterControl, requests: Sequence[VoterRequest], *, deadline_s: float,
                       catch_up_s: float,
                       clock: Callable[[], float] = time.monotonic) -> tuple[list[VoterAnswer], list[Change]]:
    """The first attempts sent together, then each change carried on alone until in force, refused for
    good or `deadline_s` (from the start) passes: (the first answers, each change's outcome)."""
    start = clock()
    first = control.change_voters_together(requests, catch_up_s)
    changes: list[Change] = []
    for request, answer in zip(requests, first, strict=True):
        left = max(0.0, deadline_s - (clock() - start))
        change = carry_out(control, request.kind, request.node, request.directory_id, deadline_s=left,
                           catch_up_s=catch_up_s, first=answer, clock=clock)
        change.elapsed_s = clock() - start
        changes.append(change)
    return first, changes
