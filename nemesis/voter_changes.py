"""One voter change of a dynamic quorum (KIP-853), carried out as Kafka's tools do it and retried
until the quorum shows it in force or refuses it for good — with its outcome.

An AddRaftVoter / RemoveRaftVoter answered `REQUEST_TIMED_OUT` was not applied (the leader refused:
another change not committed yet, no commit in its epoch yet, the new voter not caught up) and is
sent again. One answered `NOT_LEADER_OR_FOLLOWER`, or that no controller took (`UNREACHABLE`), may
still commit under the next leader: the change's outcome is then learnt by describing the quorum,
and is `info` (unknown, may take effect later) if the quorum never showed it. A definite refusal
(`DUPLICATE_VOTER`, `VOTER_NOT_FOUND`, `INVALID_REQUEST`, …) is `fail`, unless the quorum shows the
change in force after all (an earlier attempt committed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftlab.control.host import HostError
from kraftlab.nemesis.ports import QuorumView, VoterAnswer, VoterControl, VoterRequest

ADD, REMOVE = "add", "remove"
RETRIED = frozenset({"REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "UNREACHABLE", "NOT_CONTROLLER",
                     "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH"})
"""Answers after which the change is sent again."""
AMBIGUOUS = frozenset({"NOT_LEADER_OR_FOLLOWER", "UNREACHABLE"})
"""Answers after which the change may still commit (a leader abandoned it, or no answer came)."""
BACKOFF_S = 0.25


@dataclass
class Change:
    """One voter change and what became of it."""

    kind: str  # add | remove
    node: str
    directory_id: str | None
    outcome: str = "fail"  # ok | fail | info (Jepsen's meaning)
    error: str | None = None
    attempts: int = 0
    elapsed_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change": self.kind, "node": self.node, "directory_id": self.directory_id,
                               "outcome": self.outcome, "attempts": self.attempts,
                               "elapsed_s": round(self.elapsed_s, 3)}
        if self.error is not None:
            out["error"] = self.error
        return out


def in_force(kind: str, node: str, directory_id: str | None, view: QuorumView) -> bool:
    """Whether `view` shows the change done: the node a voter with that directory (add), or the
    node's (id, directory) no longer a voter (remove)."""
    held = view.voters.get(node)
    if kind == ADD:
        return held is not None and (directory_id is None or held == directory_id)
    return held is None or held != directory_id


def look(control: VoterControl) -> QuorumView | None:
    """The voter set now, None when no controller answers."""
    try:
        return control.describe_voters()
    except HostError:
        return None


def carry_out(control: VoterControl, kind: str, node: str, directory_id: str | None, *, deadline_s: float,
              catch_up_s: float, sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic, first: VoterAnswer | None = None) -> Change:
    """Send the change until the quorum shows it (ok), refuses it for good (fail), or `deadline_s`
    passes (fail; info if an attempt may still commit). `first`: the answer to an attempt already
    sent (voter_races sends several together), taken as this change's first."""
    change = Change(kind, node, directory_id)
    start = clock()
    maybe_sent = False

    def done(outcome: str, error: str | None = None) -> Change:
        change.outcome, change.error, change.elapsed_s = outcome, error, clock() - start
        return change

    answer = first
    change.attempts = int(first is not None)
    while True:
        if answer is not None:
            if answer.ok:
                return done("ok")
            change.error = f"{answer.error}: {answer.message}".rstrip(": ")
            maybe_sent = maybe_sent or answer.error in AMBIGUOUS
            if answer.error not in RETRIED:
                view = look(control)
                if view is not None and in_force(kind, node, directory_id, view):
                    return done("ok")
                return done("info" if maybe_sent else "fail", change.error)
            sleep(BACKOFF_S)
        view = look(control)
        if view is not None and in_force(kind, node, directory_id, view):
            return done("ok")
        left = deadline_s - (clock() - start)
        if left <= 0:
            why = change.error or "no controller answered DescribeQuorum"
            return done("info" if maybe_sent else "fail", f"not in force after {deadline_s:g}s: {why}")
        change.attempts += 1
        answer = send(control, VoterRequest(kind, node, directory_id), min(catch_up_s, left))


def send(control: VoterControl, request: VoterRequest, timeout_s: float) -> VoterAnswer:
    """One attempt: AddRaftVoter or RemoveRaftVoter through the lab's tool, its answer."""
    if request.kind == ADD:
        return control.add_controller(request.node, timeout_s)
    if request.directory_id is None:
        return VoterAnswer("INVALID_REQUEST", f"{request.node}: no directory id to remove")
    return control.remove_controller(request.node, request.directory_id, timeout_s)
