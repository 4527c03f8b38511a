"""The controller's answers held to Kafka's QuorumController, judged by the cluster simulator from
what it observes: the requests it delivers to a controller, the controller's outputs (answers and
journal lines, in the order it emits them) and its committed offset after each of its steps.

Kafka's controller runs every request as an event on one queue. An *active* controller decides a
write against its uncommitted state, appends the records, and parks the request's future on the
last offset it wrote (`ControllerResultAndOffset`; a request that wrote nothing parks on the last
offset written before it); the future completes when the committed offset passes that offset
(`DeferredEventQueue.completeUpTo` from `handleCommit`), or fails NOT_CONTROLLER when the
controller renounces. A controller that is not active answers NOT_CONTROLLER at once. So:

- DecisionPerAnswer: every answer an active controller gives to a request that changes or could
  change metadata (every controller API but ListPartitionReassignments) is followed by its
  `decision` lines: one per item it answers (one when it refuses the request as a whole), each of
  the request's API and naming what the request asked about (its broker and broker epoch, topic,
  resource or user); the errors the decisions name are the errors the response carries (beyond
  NONE), so a refusal is journalled as the refusal it was (the controller's decisions are what the
  fencing rules read); a broker's registration and heartbeat decisions tell exactly what it asked
  (incarnation, previous broker epoch; metadata offset, WantFence, WantShutDown) and what the answer
  gave (the broker epoch; fenced, shut down), and a decision's `at_ms` is the controller's clock
  when the request arrived (`TOLD`). No decision line without an answer before it.
- AnsweredAtCommit: an accepted write is answered only once the controller's committed offset has
  passed the decision's `offset` (never before commit: a client would see a write a new leader may
  truncate), and in the very step that moved the committed offset past it, or in the step that
  delivered the request if it was already past (never held for a later event: a client would wait
  for a tick that may not come).
  And once a controller has committed everything it wrote, it holds nothing: every request waits
  at most for an offset it wrote.
- NotActiveRefuses: a request delivered to a controller that is not active is answered in that
  step, every error NOT_CONTROLLER, with no decision; a controller that stops being active has
  answered (NOT_CONTROLLER) every request it held; decisions other than NOT_CONTROLLER come only
  from a controller that was active when the request arrived.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from kraftlab.node.controller import Reply
from kraftlab.node.controller.messages import api_name, error_name
from kraftlab.node.metadata.journal import JournalEvent


def _broker(request: Any) -> set[str]:
    return {str(request.broker_id)}


def _broker_epoch(request: Any) -> set[str]:
    return {str(request.broker_epoch)}


def _named(*lists: str, attr: str = "name") -> Callable[[Any], set[str]]:
    return lambda request: {str(getattr(x, attr)) for name in lists for x in getattr(request, name) or ()}


def _elected(request: Any) -> set[str] | None:
    return None if request.topic_partitions is None else {str(tp.topic) for tp in request.topic_partitions}


REQUEST_KEYS: dict[str, tuple[tuple[str, Callable[[Any], set[str] | None]], ...]] = {
    "BrokerRegistration": (("broker", _broker),),
    "BrokerHeartbeat": (("broker", _broker), ("broker_epoch", _broker_epoch)),
    "UnregisterBroker": (("broker", _broker),),
    "AlterPartition": (("broker", _broker), ("broker_epoch", _broker_epoch)),
    "AllocateProducerIds": (("broker", _broker), ("broker_epoch", _broker_epoch)),
    "CreateTopics": (("topic", _named("topics")),),
    "CreatePartitions": (("topic", _named("topics")),),
    "AlterPartitionReassignments": (("topic", _named("topics")),),
    "ElectLeaders": (("topic", _elected),),
    "IncrementalAlterConfigs": (("resource", _named("resources", attr="resource_name")),),
    "AlterConfigs": (("resource", _named("resources", attr="resource_name")),),
    "AlterUserScramCredentials": (("user", _named("deletions", "upsertions")),),
}
"""API → the decision fields that name what the request asked about, each with what the request
names (None: the request names none, as an ElectLeaders of all partitions)."""



def _registration(request: Any, response: Any) -> dict[str, Any]:
    told = {"incarnation": str(request.incarnation_id),
            "previous_broker_epoch": int(getattr(request, "previous_broker_epoch", -1))}
    return told | ({"broker_epoch": int(response.broker_epoch)} if error_name(response.error_code) == "NONE" else {})


def _heartbeat(request: Any, response: Any) -> dict[str, Any]:
    told = {"broker_epoch": int(request.broker_epoch), "metadata_offset": int(request.current_metadata_offset),
            "want_fence": bool(request.want_fence), "want_shut_down": bool(request.want_shut_down)}
    if error_name(response.error_code) == "NONE":
        told |= {"fenced": bool(response.is_fenced), "shut_down": bool(response.should_shut_down)}
    return told


TOLD: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    "BrokerRegistration": _registration,
    "BrokerHeartbeat": _heartbeat,
}
"""API → the fields each of its decisions must carry with exactly these values, from (request, answer)."""

READ_ONLY_APIS = frozenset({"ListPartitionReassignments"})
"""Controller APIs that never change metadata: no decision is journalled for them."""
NOT_CONTROLLER = "NOT_CONTROLLER"


def _is_entity(value: Any) -> bool:
    return is_dataclass(value) and not isinstance(value, type)


def answered_items(response: Any) -> int:
    """How many decisions an answer stands for: one when it refuses the request as a whole (a
    top-level error) or has no items; else one per item of its shallowest level of items that
    carry an error (a CreateTopics per topic, an ElectLeaders per partition, a DeleteAcls per
    filter — not per matching ACL below it)."""
    top = getattr(response, "error_code", None)
    lists = [getattr(response, f.name) for f in fields(response) if isinstance(getattr(response, f.name), tuple)]
    if (top is not None and error_name(top) != "NONE") or not lists:
        return 1
    level: list[Any] = [x for items in lists for x in items if _is_entity(x)]
    while level:
        codes = [x for x in level if any(f.name == "error_code" for f in fields(x))]
        if codes:
            return len(codes)
        level = [y for x in level for f in fields(x) if isinstance(v := getattr(x, f.name), tuple)
                 for y in v if _is_entity(y)]
    return 0


def response_errors(entity: Any) -> set[str]:
    """Every error name a response carries (its own `error_code` and its items')."""
    out: set[str] = set()
    if isinstance(entity, tuple | list):
        for item in entity:
            out |= response_errors(item)
    elif _is_entity(entity):
        for f in fields(entity):
            value = getattr(entity, f.name)
            if f.name == "error_code":
                out.add(error_name(value))
            else:
                out |= response_errors(value)
    return out


@dataclass
class _Asked:
    request: Any
    active: bool
    """Whether the controller was active when the request arrived."""
    at: int | None = None
    """The controller's clock when it arrived (None: not told)."""
    fresh: bool = True
    """Delivered in the step now running (cleared once that step's outputs are judged)."""


@dataclass
class _Life:
    """What the judge knows of one process life of one controller."""

    asked: dict[Any, list[_Asked]] = field(default_factory=dict)
    committed: int = 0
    """The committed offset at the end of the controller's last step."""


class ControllerAnswers:
    """The judge: feed it `delivered` before a controller handles a request, `observe` with each
    batch of outputs taken from it, `settle` once a step of the controller is over (outputs taken
    while it is still within an append are observed, not settled), `restarted` when its process
    starts anew. Each call returns the violations it found (empty when none)."""

    def __init__(self) -> None:
        self._lives: dict[int, _Life] = {}
        self.judged: Counter[str] = Counter()
        """Answers judged, by kind: `refused by a standby`, `failed on renouncing`, `accepted`, `refused`."""

    def restarted(self, node: int) -> None:
        self._lives[node] = _Life()

    def delivered(self, node: int, token: Any, request: Any, active: bool, now: int | None = None) -> None:
        """`request` reaches controller `node` at `now` (its clock, which its decisions' `at_ms` names)."""
        life = self._lives.setdefault(node, _Life())
        life.asked.setdefault(token, []).append(_Asked(request, active, now))

    def observe(self, node: int, outputs: Sequence[Reply | JournalEvent], committed: int) -> list[str]:
        life = self._lives.setdefault(node, _Life())
        problems: list[str] = []
        answer: tuple[_Asked, Reply] | None = None
        decisions: list[JournalEvent] = []
        for out in outputs:
            if isinstance(out, Reply):
                problems += self._judge(node, life, answer, decisions, committed)
                answer, decisions = self._take(life, out), []
                if answer is None:
                    problems.append(f"controller {node} answers a request it was never asked ({out.token})")
            elif out.ev == "decision":
                if answer is None:
                    problems.append(f"controller {node} journals a {out.fields.get('api')} decision that answers "
                                    "no request (a decision is journalled with its answer)")
                decisions.append(out)
        problems += self._judge(node, life, answer, decisions, committed)
        return problems

    def settle(self, node: int, committed: int, active: bool, written: int) -> list[str]:
        """The end of a step of `node` (its outputs all observed): what it left unanswered.
        `written`: the end of its log (everything it wrote is committed once `committed` reaches it)."""
        life = self._lives.setdefault(node, _Life())
        problems: list[str] = []
        for token, waiting in life.asked.items():
            for asked in waiting:
                if asked.fresh and not asked.active:
                    problems.append(f"controller {node}, not active, leaves {api_name(asked.request)} ({token}) "
                                    "unanswered: a controller that is not active answers NOT_CONTROLLER at once")
                elif asked.active and not active:
                    problems.append(f"controller {node} stopped being active and still holds "
                                    f"{api_name(asked.request)} ({token}): a renouncing controller fails every "
                                    "held request NOT_CONTROLLER")
                elif asked.active and committed >= written:
                    problems.append(f"controller {node} has committed all it wrote (offset {committed}) and still "
                                    f"holds {api_name(asked.request)} ({token}): a request waits only for the "
                                    "offset it or the writes before it ended at")
                asked.fresh = False
        life.asked = {t: w for t, w in life.asked.items() if w}
        life.committed = committed
        return problems

    @staticmethod
    def _take(life: _Life, reply: Reply) -> tuple[_Asked, Reply] | None:
        waiting = life.asked.get(reply.token)
        return (waiting.pop(0), reply) if waiting else None

    def _judge(self, node: int, life: _Life, answer: tuple[_Asked, Reply] | None,
               decisions: list[JournalEvent], committed: int) -> list[str]:
        if answer is None:
            return []
        asked, reply = answer
        api = api_name(asked.request)
        errors = response_errors(reply.response)
        said = {str(d.fields.get("error")) for d in decisions}
        what = f"controller {node}'s answer to {api} ({reply.token})"
        if not asked.active:
            self.judged["refused by a standby"] += 1
            if not _not_controller(errors, reply) or decisions or not asked.fresh:
                return [f"{what}, asked while not active, must come at once, every error NOT_CONTROLLER, with no "
                        f"decision: errors {sorted(errors)}, {len(decisions)} decisions"
                        + ("" if asked.fresh else ", answered in a later step")]
            return []
        problems = [f"{what} journals a decision of another API ({d.fields.get('api')})"
                    for d in decisions if d.fields.get("api") != api][:1]
        problems += self._keys(what, api, asked.request, decisions)
        problems += self._told(what, asked, reply, decisions)
        if api in READ_ONLY_APIS:
            return problems + ([f"{what} journals decisions of a request that changes nothing"] if decisions else [])
        failed = said <= {NOT_CONTROLLER} and _not_controller(errors, reply) and bool(said or errors)
        self.judged["failed on renouncing" if failed else "accepted" if errors <= {"NONE"} else "refused"] += 1
        if failed:
            return problems  # failed on renouncing (whenever that happened), each decision so journalled
        items = answered_items(reply.response)
        if len(decisions) != items:
            problems.append(f"{what} (errors {sorted(errors)}) stands for {items} decisions, {len(decisions)} "
                            "journalled: each decision the controller took, accepted or refused, is journalled "
                            "with its answer")
            return problems
        if errors - {"NONE"} != said - {"NONE"}:
            problems.append(f"{what} carries errors {sorted(errors)}, its decisions say {sorted(said)}")
        if not decisions:
            return problems  # nothing asked, nothing decided (an election of all partitions, none to elect)
        problems += self._timing(what, asked, _offsets(decisions), life.committed, committed)
        return problems

    @staticmethod
    def _keys(what: str, api: str, request: Any, decisions: list[JournalEvent]) -> list[str]:
        """Each decision names what the request asked about (its broker, epoch, topic, resource, user)."""
        for key, asked_for in REQUEST_KEYS.get(api, ()):
            names = asked_for(request)
            if names is None:
                continue
            for d in decisions:
                if str(d.fields.get(key)) not in names:
                    return [f"{what} journals a decision on {key} {d.fields.get(key)!r}, which the request does not "
                            f"name (it names {sorted(names)}): a reader cannot tell what was decided"]
        return []

    @staticmethod
    def _told(what: str, asked: _Asked, reply: Reply, decisions: list[JournalEvent]) -> list[str]:
        """Each decision tells what the request asked and the answer gave (`TOLD`), at the clock it arrived at."""
        told = TOLD.get(api_name(asked.request), lambda _, __: {})
        for d in decisions:
            wanted = told(asked.request, reply.response) if d.fields.get("error") != NOT_CONTROLLER else {}
            if asked.at is not None and "at_ms" in d.fields:
                wanted["at_ms"] = asked.at
            wrong = {k: d.fields.get(k) for k, v in wanted.items() if d.fields.get(k) != v}
            if wrong:
                return [f"{what} journals a decision telling {wrong} where the request and its answer give "
                        f"{ {k: wanted[k] for k in wrong} }"]
        return []

    @staticmethod
    def _timing(what: str, asked: _Asked, offsets: Iterable[int], before: int, committed: int) -> list[str]:
        last = max(offsets, default=None)
        if last is None:
            return [f"{what}: its decisions carry no offset (the last offset its write waited for)"]
        if last >= committed:
            return [f"{what} goes out before its write is committed: the decisions' offset {last}, committed "
                    f"offset {committed} (a new leader may truncate what the client was told)"]
        if not asked.fresh and last < before:
            return [f"{what} is held past the step that committed it: offset {last} was committed already "
                    f"(committed offset {before}) before this step"]
        return []


def _not_controller(errors: set[str], reply: Reply) -> bool:
    """Whether an answer is Kafka's NOT_CONTROLLER answer: the code on everything it names (an
    ElectLeaders v0 of all partitions names nothing and has no top-level code: it is empty)."""
    return errors == {NOT_CONTROLLER} or (not errors and answered_items(reply.response) == 0)


def _offsets(decisions: Iterable[JournalEvent]) -> list[int]:
    return [o for d in decisions if isinstance(o := d.fields.get("offset"), int) and not isinstance(o, bool)]
