"""Every Raft request answered in its bound, and every answer true to its sender (KIP-595).

The simulator records each Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot it
delivers to a node, and judges each response when it takes it off the node's output, against
the responder's state at that moment (what the node holds once its step is over):

- Unanswered: a Vote, BeginQuorumEpoch, EndQuorumEpoch or FetchSnapshot is answered in the step
  that delivered it; a Fetch at once or, held by the leader (long poll), by its `max_wait_ms` plus
  a tick, and at once when the leader stops leading that epoch. Only a crash of the receiver
  (its requests are lost with the process) or a later Fetch of the same replica (the leader holds
  one per replica; the replica no longer waits for the earlier one) excuse a missing answer.
- Unsolicited: a response answers a request this node received from its destination (same
  `ref`) and has not answered yet, with the response type of that request.
- ErrorCode: its error is one Kafka's handler of that API returns.
- ExactError, ExactLeaderAndEpoch, ErrorAnswerFields: its error is the very one Kafka's handler
  returns for the state the request found (`raft_reference`, in Kafka's order of checks; a held
  Fetch is served or NOT_LEADER_OR_FOLLOWER), an answer made at once names the leader and epoch
  the responder has after its handler's own transition, and an error answer carries Kafka's
  defaults beside it (`exact`).
- LeaderAndEpoch: its (leaderId, leaderEpoch) are the responder's current leader and epoch, and
  a Fetch answer's high-water mark is no higher than the responder's (KIP-595: responses carry the
  sender's view; the high-water mark may move on within the step after the answer was made).
- FetchContent: a Fetch served without error either names the responder's latest snapshot, or
  a DivergingEpoch that is the responder's log end for the Fetch's last epoch (and does diverge
  from the Fetch's position), or batches that are the responder's own, back to back from the
  Fetch's offset; never two of these (KIP-595's FetchResponse; KIP-630's SnapshotId). A
  FetchSnapshot served carries the snapshot and position asked for, the snapshot's size, and at
  most the bytes asked for, which are the responder's from that position, none only at the end.
- ErrorMeaning: FENCED_LEADER_EPOCH carries an epoch above the request's (a pre-vote's: its
  candidate's own), UNKNOWN_LEADER_EPOCH one below it, NOT_LEADER_OR_FOLLOWER comes from a node
  not leading; a Fetch or FetchSnapshot served
  without error comes from the leader of the request's epoch; a vote granted (not a pre-vote) is
  the responder's vote in the candidate's epoch, and any vote (or pre-vote) granted goes to a log at
  least as up to date as the responder's; an answer with an error grants nothing; an accepted
  BeginQuorumEpoch leaves the responder following its sender in its epoch, an accepted
  EndQuorumEpoch in its epoch or a later one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import Output
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.invariants import CheckedNode
from kraftlab.node.sim.raft_reference import (
    Responder,
    error_fields,
    expected,
    leader_and_epoch,
    replica_epoch,
    responder,
)
from kraftlab.node.sim.timing_rules import TICK_MS

E = m.Errors

ANSWER_TYPES: dict[type, type] = {
    m.VoteRequest: m.VoteResponse,
    m.BeginQuorumEpochRequest: m.BeginQuorumEpochResponse,
    m.EndQuorumEpochRequest: m.EndQuorumEpochResponse,
    m.FetchRequest: m.FetchResponse,
    m.FetchSnapshotRequest: m.FetchSnapshotResponse,
}
"""The requests judged, and the response type that answers each."""

_ANY = frozenset({E.NONE, E.INVALID_REQUEST, E.INCONSISTENT_CLUSTER_ID})
_VOTERS_ONLY = _ANY | {E.FENCED_LEADER_EPOCH, E.INCONSISTENT_VOTER_SET, E.INVALID_VOTER_KEY}
_LEADER_ONLY = _ANY | {E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.NOT_LEADER_OR_FOLLOWER}

KAFKA_ERRORS: dict[type, frozenset[m.Errors]] = {
    m.VoteResponse: _VOTERS_ONLY,
    m.BeginQuorumEpochResponse: _VOTERS_ONLY,
    m.EndQuorumEpochResponse: _VOTERS_ONLY,
    m.FetchResponse: _LEADER_ONLY,
    m.FetchSnapshotResponse: _LEADER_ONLY | {E.SNAPSHOT_NOT_FOUND, E.POSITION_OUT_OF_RANGE},
}
"""The errors Kafka's KafkaRaftClient answers each API with (its voter-only and leader-only request
validation, KIP-853's voter key, KIP-630's snapshot errors); the topic-partition check is the wire
layer's (`node.raft.wire`), not the core's."""


class RunningNode(CheckedNode, Protocol):
    incarnation: int
    """Which process life of the node runs (a crash loses what the last one received)."""


@dataclass(slots=True)
class _Pending:
    request: Any
    incarnation: int
    delivered: int
    deadline: int
    """When it must be answered by (a held Fetch); the delivery time until it is held."""
    led_epoch: int
    """The epoch the receiver led when it held a Fetch (-1: not held)."""
    log_view: _LogView | None = None
    """A Fetch's: the receiver's storage as the Fetch found it."""
    found: tuple[int | None, int, bool] | None = None
    """The receiver's (leader, epoch, leading) as the request found it."""
    before: Responder | None = None
    """The receiver's state as the request found it, for Kafka's exact answer (`raft_reference`)."""


@dataclass(frozen=True, slots=True)
class _LogView:
    """What a Fetch's answer is judged against, taken when it is delivered: the node takes a
    snapshot and lets retention cut its log after its step, so after the answer was made."""

    latest_snapshot: OffsetAndEpoch | None
    epoch_end: OffsetAndEpoch
    """The log's end for the Fetch's last fetched epoch."""


@dataclass(slots=True)
class _Described:
    """An answer named in a violation (formatted only then: answers carry whole batches)."""

    responder: int
    answer: Any
    request: Any
    requester: int

    def __str__(self) -> str:
        name = type(self.answer).__name__
        return f"node {self.responder}'s {name} {self.answer} to {self.request} from node {self.requester}"


class ResponseRules:
    def __init__(self, fail: Callable[[str, str], None], ignore: Iterable[int] = ()) -> None:
        self.fail = fail
        self.ignore = frozenset(ignore)
        """Peers that are no node of the cluster (a rogue client is judged on its own)."""
        self.judging = True
        self.pending: dict[int, dict[tuple[int, Any], _Pending]] = {}
        """node id -> (requester, ref) -> a request delivered to it and not answered yet."""
        self.superseded: dict[int, dict[tuple[int, Any], _Pending]] = {}
        """node id -> (requester, ref) -> a held Fetch a later Fetch of the same replica replaced."""
        self._incarnations: dict[int, int] = {}
        """node id -> the process life whose requests `pending` holds."""
        self._held: list[tuple[int, int, int, Any]] = []
        """(deadline, node, requester, ref) of every Fetch held, earliest first."""

    # ------------------------------------------------------------------ the simulator's hooks

    def delivered(self, node: CheckedNode, env: m.Envelope, incarnation: int, now: int) -> None:
        """Before `node` handles `env` (delivered by the simulator)."""
        if not self.judging or type(env.message) not in ANSWER_TYPES or env.src in self.ignore:
            return
        if self._incarnations.get(node.node_id) != incarnation:
            self._incarnations[node.node_id] = incarnation
            self.superseded.pop(node.node_id, None)
            self.pending.pop(node.node_id, None)
        pending = self.pending.setdefault(node.node_id, {})
        if isinstance(env.message, m.FetchRequest):
            # Superseded: the leader holds one Fetch per replica. The earlier one may still be
            # answered (a refused later Fetch leaves it held), but need not be.
            superseded = self.superseded.setdefault(node.node_id, {})
            for key in [k for k, p in pending.items() if k[0] == env.src and isinstance(p.request, m.FetchRequest)]:
                superseded[key] = pending.pop(key)
        view = None
        if isinstance(env.message, m.FetchRequest):
            view = _LogView(node.snapshots.latest(), node.log.end_offset_for_epoch(env.message.last_fetched_epoch))
        core = node.core
        found = None if core is None else (core.leader_id, core.epoch, core.is_leader)
        before = responder(node, env.message)
        pending[(env.src, env.ref)] = _Pending(env.message, incarnation, now, now, -1, view, found, before)

    def sent(self, node: CheckedNode, out: Output, incarnation: int, now: int) -> None:
        """The simulator takes `out` off `node` (after any step): judge every response in it."""
        if not self.judging:
            return
        nid = node.node_id
        if self._incarnations.get(nid) != incarnation:
            # A new process life: what the last one received is lost with it.
            self._incarnations[nid] = incarnation
            self.pending.pop(nid, None)
            self.superseded.pop(nid, None)
        pending = self.pending.get(nid)
        for env in out.messages:
            if env.dst in self.ignore or type(env.message) not in KAFKA_ERRORS:
                continue  # a request, or an answer to a request this module does not judge
            self._judge(node, env, pending, now)
        if pending:
            self._check_held(node, pending, now)

    def settled(self, node: CheckedNode, env: m.Envelope, now: int) -> None:
        """After the step that delivered `env` to `node`: its answer was due in that step, or it is held."""
        pending = self.pending.get(node.node_id, {})
        p = pending.get((env.src, env.ref))
        if p is None or p.delivered != now or p.led_epoch >= 0:
            return
        req = p.request
        core = node.core
        if isinstance(req, m.FetchRequest) and core is not None and core.is_leader and req.epoch == core.epoch:
            p.deadline = now + max(req.max_wait_ms, 0)
            p.led_epoch = core.epoch
            heapq.heappush(self._held, (p.deadline, node.node_id, env.src, env.ref))
            return
        del pending[(env.src, env.ref)]
        self.fail(
            "Unanswered",
            f"node {node.node_id} got {type(req).__name__} {req} from node {env.src} at t={now} and did "
            f"not answer it{' (it leads no epoch the Fetch could wait in)' if isinstance(req, m.FetchRequest) else ''}",
        )

    def overdue(self, nodes: Mapping[int, RunningNode], now: int) -> None:
        """Held Fetches past their bound, whichever node holds them (`nodes`: id -> node)."""
        held = self._held
        while held and held[0][0] + TICK_MS < now:
            deadline, nid, src, ref = heapq.heappop(held)
            p = self.pending.get(nid, {}).get((src, ref))
            node = nodes[nid]
            if p is None or p.deadline != deadline or node.core is None or node.incarnation != p.incarnation:
                continue
            self.fail(
                "Unanswered",
                f"node {nid} held {p.request} from node {src} (delivered at t={p.delivered}) past its "
                f"max wait: unanswered at t={now}, due by t={deadline}",
            )

    # ------------------------------------------------------------------ judging one response

    def _check_held(self, node: CheckedNode, pending: dict[tuple[int, Any], _Pending], now: int) -> None:
        core = node.core
        for (src, _), p in pending.items():
            if p.led_epoch < 0:
                continue
            if core is None or not core.is_leader or core.epoch != p.led_epoch:
                self.fail(
                    "Unanswered",
                    f"node {node.node_id} stopped leading epoch {p.led_epoch} at t={now} without answering "
                    f"the Fetch {p.request} from node {src} it held since t={p.delivered}",
                )

    def _judge(
        self, node: CheckedNode, env: m.Envelope, pending: dict[tuple[int, Any], _Pending] | None, now: int
    ) -> None:
        resp: Any = env.message
        nid = node.node_id
        key = (env.dst, env.ref)
        p = None if pending is None else pending.pop(key, None)
        if p is None:
            p = self.superseded.get(nid, {}).pop(key, None)
        if p is None:
            self.fail("Unsolicited", f"node {nid} sent {resp} to node {env.dst} answering no request it holds from it")
            return
        req = p.request
        answers_it = type(resp) is ANSWER_TYPES[type(req)]
        if not answers_it:
            self.fail("Unsolicited", f"node {nid} answered {req} from node {env.dst} with {resp}")
            return
        core = node.core
        assert core is not None  # a response comes out of a running core
        what = _Described(nid, resp, req, env.dst)
        error = resp.error
        if error not in KAFKA_ERRORS[type(resp)]:
            self.fail("ErrorCode", f"{what}: error {error!r} is none Kafka answers {type(req).__name__} with")
            return
        # The responder's state when it answered: as the step left it, or (an answer made in the
        # step that delivered the request, before the step's own timers moved the node on, e.g. a
        # resigned leader starting its pre-vote) as the request found it.
        states = [(core.leader_id, core.epoch, core.is_leader)]
        if p.delivered == now and p.found is not None:
            states.append(p.found)
        if all((resp.leader_id, resp.epoch) != (leader, epoch) for leader, epoch, _ in states):
            self.fail(
                "LeaderAndEpoch",
                f"{what}: it names leader {resp.leader_id} in epoch {resp.epoch}, but the responder's "
                f"leader is {core.leader_id} in epoch {core.epoch}",
            )
        if isinstance(resp, m.FetchResponse) and resp.high_watermark > core.high_watermark:
            self.fail(
                "LeaderAndEpoch",
                f"{what}: it carries high-water mark {resp.high_watermark}, "
                f"above the responder's {core.high_watermark}",
            )
        wrong = self._meaning(node, req, resp, core, all(leading for _, _, leading in states))
        if wrong is not None:
            self.fail("ErrorMeaning", f"{what}: {wrong}")
        if error == E.NONE and isinstance(resp, m.FetchResponse | m.FetchSnapshotResponse):
            if isinstance(resp, m.FetchResponse):
                assert p.log_view is not None  # taken for every Fetch
                wrong = fetch_content(node, p.log_view, req, resp)
            else:
                wrong = chunk_content(node, req, resp)
            if wrong is not None:
                self.fail("FetchContent", f"{what}: {wrong}")
        if p.before is not None:  # the exact answer last: the looser rules above name a gross error first
            start = node.log.start_offset()
            exact(p.before, req, resp, p.led_epoch < 0, start, lambda rule, why: self.fail(rule, f"{what}: {why}"))

    @staticmethod
    def _meaning(node: CheckedNode, req: Any, resp: Any, core: Any, leading: bool) -> str | None:
        """What the answer's error (or success) claims that the request and responder contradict."""
        nid = node.node_id
        error = resp.error
        asked = replica_epoch(req) if isinstance(req, m.VoteRequest) else req.epoch  # a pre-vote's: its candidate's
        if error == E.FENCED_LEADER_EPOCH and resp.epoch <= asked:
            return f"FENCED_LEADER_EPOCH with epoch {resp.epoch}, not above the request's {asked}"
        if error == E.UNKNOWN_LEADER_EPOCH and resp.epoch >= req.epoch:
            return f"UNKNOWN_LEADER_EPOCH with epoch {resp.epoch}, not below the request's {req.epoch}"
        if error == E.NOT_LEADER_OR_FOLLOWER and leading:
            return "NOT_LEADER_OR_FOLLOWER from a leader"
        served = isinstance(resp, m.FetchResponse | m.FetchSnapshotResponse) and error == E.NONE
        if served and (resp.leader_id, resp.epoch) != (nid, req.epoch):
            return f"served without error by a node that does not lead the request's epoch {req.epoch}"
        accepted = isinstance(resp, m.BeginQuorumEpochResponse) and error == E.NONE
        if accepted and (resp.leader_id, resp.epoch) != (req.leader_id, req.epoch):
            return f"accepted, but the responder does not follow node {req.leader_id} in epoch {req.epoch}"
        if isinstance(resp, m.EndQuorumEpochResponse) and error == E.NONE and resp.epoch < req.epoch:
            return f"accepted, but the responder stays in epoch {resp.epoch}, below the request's {req.epoch}"
        if isinstance(resp, m.VoteResponse):
            if error != E.NONE and resp.granted:
                return "an error that grants the vote"
            if resp.granted and not req.pre_vote and (resp.epoch != req.epoch or core.voted_id != req.candidate_id):
                return f"granted, but the responder's vote in epoch {resp.epoch} is {core.voted_id}"
            log = (node.log.last_epoch(), node.log.end_offset())
            if resp.granted and (req.last_epoch, req.end_offset) < log:
                return f"granted to a log ending at {req.end_offset} in epoch {req.last_epoch}, behind {log}"
        return None


def exact(
    before: Responder, req: Any, resp: Any, at_once: bool, log_start: int, fail: Callable[[str, str], None]
) -> None:
    """ExactError and ErrorAnswerFields (`raft_reference`) for an answer to `req` made `at_once` (in
    the step that delivered it; a held Fetch is answered later, as Kafka's purgatory completes it:
    served, or NOT_LEADER_OR_FOLLOWER once its leader left office) by a responder found `before`
    (its log start may have moved on within the step: `log_start`)."""
    error = resp.error
    if at_once:
        want = expected(req, before)
        if want is not None and error != want.error:
            fail("ExactError", f"error {error.name}, where Kafka answers {want.error.name} ({want.branch})")
        named = leader_and_epoch(req, before, error)
        if named is not None and (resp.leader_id, resp.epoch) != named:
            fail(
                "ExactLeaderAndEpoch",
                f"leader {resp.leader_id} in epoch {resp.epoch}, where Kafka's answer names leader {named[0]} in "
                f"epoch {named[1]} (the responder's after its handler's own transition)",
            )
    if error != E.NONE:
        wrong = error_fields(resp, before)
        if wrong is not None and log_start != before.log_start:
            wrong = error_fields(resp, replace(before, log_start=log_start))
        if wrong is not None:
            fail("ErrorAnswerFields", f"{error.name}, but {wrong}")


def fetch_content(node: CheckedNode, view: _LogView, req: m.FetchRequest, resp: m.FetchResponse) -> str | None:
    """What a Fetch served without error claims about the responder's log that its log contradicts:
    the snapshot and diverging epoch as `view` (the Fetch's delivery) saw them, the batches as the
    log holds them after the step (a leader only appends; retention may cut below, not judged)."""
    log = node.log
    if resp.snapshot_id is not None:
        latest = view.latest_snapshot
        if resp.snapshot_id != latest:
            return f"names snapshot {resp.snapshot_id}, the responder's latest is {latest}"
        if resp.diverging_epoch is not None or resp.batches:
            return "names a snapshot and also a diverging epoch or batches"
        return None
    diverging = resp.diverging_epoch
    if diverging is not None:
        end = view.epoch_end
        if diverging != end:
            return f"diverging epoch {diverging}, but the responder's log ends epoch {req.last_fetched_epoch} at {end}"
        if end.epoch == req.last_fetched_epoch and end.offset >= req.fetch_offset:
            return f"diverging epoch {diverging}, but the Fetch's position continues the responder's log"
        if resp.batches:
            return "a diverging epoch and batches"
        return None
    offset = req.fetch_offset
    for batch in resp.batches:
        if batch.base_offset != offset:
            return f"a batch at {batch.base_offset} where the answer's batches should continue at {offset}"
        if offset >= log.start_offset():
            held = log.read(offset, 1) if offset < log.end_offset() else []
            if not held or held[0] != batch:
                return f"the batch at {offset} is not the responder's"
        offset = batch.next_offset
    return None


def chunk_content(node: CheckedNode, req: m.FetchSnapshotRequest, resp: m.FetchSnapshotResponse) -> str | None:
    """What a FetchSnapshot served without error claims about the responder's snapshot that it contradicts."""
    sid = req.snapshot_id
    if (resp.snapshot_id, resp.position) != (sid, req.position):
        return f"snapshot {resp.snapshot_id} at {resp.position} where {sid} at {req.position} was asked for"
    if len(resp.data) > req.max_bytes:
        return f"{len(resp.data)} bytes where at most {req.max_bytes} were asked for"
    snapshots = node.snapshots
    if sid not in snapshots.ids():
        return None  # deleted after the answer, in the same step (a newer snapshot was taken)
    size = snapshots.size(sid)
    if resp.size != size:
        return f"size {resp.size}, the snapshot's is {size}"
    if resp.data != snapshots.read_bytes(sid, req.position, len(resp.data)):
        return f"bytes at {req.position} that are not the snapshot's"
    if not resp.data and req.position < size:
        return f"no bytes at {req.position} of a snapshot of {size}"
    return None
