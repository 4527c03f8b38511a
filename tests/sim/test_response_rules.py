"""The answer rules the simulator judges (node.sim.response_rules): the real core keeps them over
many seeds, and cores that leave a request unanswered or answer untruthfully are caught."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.states import EpochState, Leader
from kraftlab.node.sim.cluster import SimParams
from kraftlab.node.sim.invariants import InvariantViolation
from kraftlab.node.sim.response_rules import KAFKA_ERRORS, ResponseRules

E = m.Errors
Rewrite = Callable[[m.Envelope, Any], Any]
"""(the request's envelope, the core's answer) -> the answer the wrong core sends instead (None: none)."""


def core_answering(rewrite: Rewrite) -> type[RaftCore]:
    """A core whose direct answers to requests go through `rewrite`."""

    class Core(RaftCore):
        def _reply(self, request: m.Envelope, message: Any) -> None:
            changed = rewrite(request, message)
            if changed is not None:
                super()._reply(request, changed)

    return Core


class ForgetsHeldFetches(RaftCore):
    """Leaving leadership, it drops the Fetches it holds instead of answering them."""

    def _set_state(self, state: EpochState, now: int) -> None:
        old = self.state
        if isinstance(old, Leader) and old is not state:
            old.parked.clear()
        super()._set_state(state, now)


class HoldsFetchesTwiceAsLong(RaftCore):
    """Holds a Fetch past the wait the replica asked for."""

    def _on_fetch_request(self, env: m.Envelope, req: m.FetchRequest, now: int) -> None:
        super()._on_fetch_request(env, req, now)
        state = self.state
        if isinstance(state, Leader) and env.src in state.parked:
            state.parked[env.src].deadline = now + 2 * req.max_wait_ms + 5


SLOW_APPENDS = {"voters": 3, "faults": ("partition", "oneway", "crash"), "append_interval_ms": 500}
"""Appends every half second on average: the leader holds Fetches with nothing new to their wait."""
CUT_OFF_LEADERS = {"voters": 5, "faults": ("partition", "oneway", "flapping"), "append_interval_ms": 200}
"""Leaders that hear from too few voters to stay, while they hold a Fetch of those they hear from."""


def first_violation(core_class: type[RaftCore], seeds: range, scenario: dict[str, Any]) -> InvariantViolation | None:
    return first_violation_of(core_class, (SimParams(seed=seed, observers=1, **scenario) for seed in seeds))


def swap_fenced_error_and_epoch(request: m.Envelope, answer: Any) -> Any:
    if getattr(answer, "error", None) == E.FENCED_LEADER_EPOCH:
        return dataclasses.replace(answer, error=answer.epoch, epoch=int(E.FENCED_LEADER_EPOCH))
    return answer


def fenced_with_the_requests_epoch(request: m.Envelope, answer: Any) -> Any:
    if getattr(answer, "error", None) == E.FENCED_LEADER_EPOCH:
        return dataclasses.replace(answer, epoch=getattr(request.message, "epoch", answer.epoch))
    return answer


def names_no_leader(request: m.Envelope, answer: Any) -> Any:
    return dataclasses.replace(answer, leader_id=None) if hasattr(answer, "leader_id") else answer


def ignores_refused_votes(request: m.Envelope, answer: Any) -> Any:
    return None if isinstance(answer, m.VoteResponse) and not answer.granted else answer


class LosesRefs(RaftCore):
    def _reply(self, request: m.Envelope, message: Any) -> None:
        super()._reply(dataclasses.replace(request, ref=None), message)


def test_every_error_the_core_uses_for_an_answer_is_kafkas() -> None:
    assert all(E.NONE in errors and E.INVALID_REQUEST in errors for errors in KAFKA_ERRORS.values())
    assert E.UNKNOWN_LEADER_EPOCH not in KAFKA_ERRORS[m.VoteResponse]  # a Vote is never refused for a later epoch


@pytest.mark.parametrize("scenario", [SLOW_APPENDS, CUT_OFF_LEADERS], ids=["slow-appends", "cut-off-leaders"])
def test_the_real_core_keeps_the_rules(scenario: dict[str, Any]) -> None:
    assert first_violation(RaftCore, range(10), scenario) is None


@pytest.mark.parametrize(
    ("core_class", "rules", "scenario"),
    [
        (core_answering(swap_fenced_error_and_epoch), {"ErrorCode", "LeaderAndEpoch"}, SLOW_APPENDS),
        (core_answering(fenced_with_the_requests_epoch), {"LeaderAndEpoch", "ErrorMeaning"}, SLOW_APPENDS),
        (core_answering(names_no_leader), {"LeaderAndEpoch"}, SLOW_APPENDS),
        (core_answering(ignores_refused_votes), {"Unanswered"}, SLOW_APPENDS),
        (LosesRefs, {"Unsolicited"}, SLOW_APPENDS),
        (ForgetsHeldFetches, {"Unanswered"}, CUT_OFF_LEADERS),
        (HoldsFetchesTwiceAsLong, {"Unanswered"}, SLOW_APPENDS),
    ],
    ids=[
        "fenced-swapped",
        "fenced-old-epoch",
        "no-leader",
        "refused-votes-unanswered",
        "lost-refs",
        "held-fetches-forgotten",
        "held-too-long",
    ],
)
def test_a_core_answering_wrongly_is_caught(
    core_class: type[RaftCore], rules: set[str], scenario: dict[str, Any]
) -> None:
    found = first_violation(core_class, range(10), scenario)
    assert found is not None and found.name in rules, found


def test_a_crash_excuses_the_requests_it_lost() -> None:
    failures: list[str] = []
    rules = ResponseRules(lambda name, detail: failures.append(name))

    @dataclasses.dataclass
    class Node:
        node_id: int
        incarnation: int
        core: Any = None

    node = Node(1, 1)
    request = m.Envelope(2, 1, m.VoteRequest(3, 2, 1, 10), -1)
    rules.delivered(node, request, 1, 5)  # type: ignore[arg-type]  # only node_id, incarnation, core are read
    node.incarnation = 2  # crashed before answering, restarted
    rules.sent(node, Output(), 2, 9)  # type: ignore[arg-type]
    assert failures == [] and not rules.pending.get(1)


def core_serving(rewrite: Callable[[m.FetchResponse], m.FetchResponse]) -> type[RaftCore]:
    """A core whose leader's Fetch answers (direct or held) go through `rewrite`."""

    class Core(RaftCore):
        def _answer_fetch(
            self, state: Leader, dst: int, ref: Any, offset: int, last_epoch: int, directory: uuid.UUID | None = None
        ) -> None:
            super()._answer_fetch(state, dst, ref, offset, last_epoch, directory)
            env = self._out.messages[-1]
            assert isinstance(env.message, m.FetchResponse)
            self._out.messages[-1] = dataclasses.replace(env, message=rewrite(env.message))

    return Core


def skips_a_batch(resp: m.FetchResponse) -> m.FetchResponse:
    return dataclasses.replace(resp, batches=resp.batches[1:]) if len(resp.batches) > 1 else resp


def diverges_one_earlier(resp: m.FetchResponse) -> m.FetchResponse:
    d = resp.diverging_epoch
    if d is None or d.offset == 0:
        return resp
    return dataclasses.replace(resp, diverging_epoch=OffsetAndEpoch(d.offset - 1, d.epoch))


@pytest.mark.parametrize("rewrite", [skips_a_batch, diverges_one_earlier], ids=["skips-a-batch", "diverges-earlier"])
def test_a_leader_serving_what_its_log_does_not_hold_is_caught(
    rewrite: Callable[[m.FetchResponse], m.FetchResponse],
) -> None:
    found = first_violation(core_serving(rewrite), range(10), CUT_OFF_LEADERS)
    assert found is not None and found.name == "FetchContent", found


def corrupts_snapshot_chunks(request: m.Envelope, answer: Any) -> Any:
    if isinstance(answer, m.FetchSnapshotResponse) and answer.data:
        return dataclasses.replace(answer, data=bytes([answer.data[0] ^ 1]) + answer.data[1:])
    return answer


def test_a_leader_serving_bytes_its_snapshot_does_not_hold_is_caught() -> None:
    found = first_violation(core_answering(corrupts_snapshot_chunks), range(10), CUT_OFF_LEADERS)
    assert found is not None and found.name == "FetchContent", found


def grants_every_vote(request: m.Envelope, answer: Any) -> Any:
    return dataclasses.replace(answer, granted=True) if isinstance(answer, m.VoteResponse) else answer


class AcceptsBeginWithoutFollowing(RaftCore):
    """Answers every BeginQuorumEpoch with success and changes nothing."""

    def _on_begin_request(self, env: m.Envelope, req: m.BeginQuorumEpochRequest, now: int) -> None:
        self._reply(env, m.BeginQuorumEpochResponse(E.NONE, self.epoch, self.leader_id))


@pytest.mark.parametrize(
    "core_class", [core_answering(grants_every_vote), AcceptsBeginWithoutFollowing], ids=["grants-all", "begin-ignored"]
)
def test_an_answer_claiming_what_the_responder_did_not_do_is_caught(core_class: type[RaftCore]) -> None:
    found = first_violation(core_class, range(10), CUT_OFF_LEADERS)
    assert found is not None and found.name == "ErrorMeaning", found
