"""The `topics` workload: create-if-absent, delete, describe and list over a small name pool.

Ops (checker model `topics`, history field `workload: "topics"`):
- `create` {"topic", ["partitions", "replication_factor"] | ["assignment": [[broker ids]...]],
  ["via": "controller"]}: CreateTopics through the process's broker (which forwards to the active
  controller), or to the active controller itself with `via` (as a broker's forward does). ok;
  fail TOPIC_ALREADY_EXISTS (an observation: the topic existed) or another definite refusal
  (INVALID_*: no effect); info on NOT_CONTROLLER / REQUEST_TIMED_OUT / a lost connection.
- `delete` {"topic"}: DeleteTopics likewise (ok → {"topic", "topic_id"}); fail UNKNOWN_TOPIC_OR_PARTITION is an
  observation.
- a create or delete with `"read_back": true` (most of them: READ_BACK) is followed at once by Metadata for its topic
  on the broker it went through, as Kafka's tools do after a create: its output adds `acked_ms` and
  `read_back` ({"exists", "topic_id", "partitions"}, or None when the broker did not answer), which
  `checker.broker_reads` judges (read-your-writes on the forwarding broker).
- `describe` {"topic", "node", "broker_read": true}: Metadata for one topic on a broker →
  {"exists": bool, "partitions": n}.
- `list` {"node", "broker_read": true[, "final": true], "prefixes"}: Metadata for all topics → {"topics": [...]}
  (only names with this workload's prefixes).

Reads served by brokers are eventually consistent in Kafka (a broker's image may lag), so they
are marked `broker_read` with the broker's node; the runner gives the linearizability checker
the writes plus the FINAL reads (taken after heal and recovery, marked `final`), and every
broker read to `checker.broker_reads` (a committed prefix, never going back, showing the writes
made through that broker).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kraftlab.workloads import versions
from kraftlab.workloads.client import Invocation
from kraftlab.workloads.generator import Context, FnGen
from kraftlab.workloads.kafka import check
from kraftlab.workloads.ops import OncePer, broker_read, judged_final_broker, op, read_node
from kraftlab.workloads.session import Handlers, Session

WORKLOAD = "topics"
ADMIN_TIMEOUT_MS = 3000
UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PARTITION: the broker says the topic does not exist
READ_BACK = 0.9
"""The share of creates and deletes followed at once by a read of their topic on the broker they
went through (`read_back`), as an operator's tool or an application does after a create before it
uses the topic. Topics are one share of seven in `mixed`, so a 60-s run makes only a few dozen
such writes: at one half, 19 in a run was typical — too few for a read-your-writes race to show
(`checker.broker_reads` ReadYourWrites)."""


def _first_code(resp: Any, attr: str) -> int:
    items = getattr(resp, attr)
    return int(items[0].error_code) if items else 0


async def create(session: Session, inv: Invocation) -> Any:
    v = inv.value
    started = time.monotonic()
    assignment = v.get("assignment") or ()

    def make(version: int) -> Any:
        return versions.create_topics_request(
            version, v["topic"], partitions=-1 if assignment else v.get("partitions", 1),
            replication_factor=-1 if assignment else v.get("replication_factor", 1), assignment=assignment,
            timeout_ms=ADMIN_TIMEOUT_MS)

    resp = await session.admin(versions.CREATE_TOPICS, make, lambda r: _first_code(r, "topics"),
                               direct=v.get("via") == "controller")
    result = resp.topics[0]
    check(result.error_code, v)
    topic_id = getattr(result, "topic_id", None)
    return await _read_back(session, inv, started, {"topic": v["topic"],
                                                     "topic_id": None if topic_id is None else str(topic_id)})


async def delete(session: Session, inv: Invocation) -> Any:
    v = inv.value
    started = time.monotonic()
    resp = await session.admin(versions.DELETE_TOPICS,
                               lambda version: versions.delete_topics_request(version, v["topic"],
                                                                              timeout_ms=ADMIN_TIMEOUT_MS),
                               lambda r: _first_code(r, "responses"), direct=v.get("via") == "controller")
    result = resp.responses[0]
    check(result.error_code, v)
    return await _read_back(session, inv, started, {"topic": v["topic"], "topic_id": _topic_id(result)})


async def _read_back(session: Session, inv: Invocation, started: float, out: dict[str, Any]) -> dict[str, Any]:
    """With `read_back` in the invocation, a write acknowledged through this process's broker is
    followed at once by Metadata for its topic on that broker, as Kafka's tools do after a create:
    `acked_ms` (how long the acknowledgement took) and `read_back` (what the broker then showed, or
    None when it did not answer) go into the write's output. The write's outcome is the
    acknowledgement's: a read-back that fails changes nothing."""
    if not inv.value.get("read_back") or inv.value.get("via") == "controller" \
            or not session.cluster.nodes[session.node].broker:
        return out
    out["acked_ms"] = round((time.monotonic() - started) * 1000, 1)
    try:
        t = (await metadata(session, session.node, [inv.value["topic"]])).topics[0]
    except Exception:  # the write stands; what the broker showed is unknown
        t = None
    if t is None or int(t.error_code) not in (0, UNKNOWN_TOPIC):
        out["read_back"] = None
    else:
        shown = _shown(t)
        out["read_back"] = shown | {"topic_id": _topic_id(t)} if shown["exists"] else shown
    return out


def _topic_id(answer: Any) -> str | None:
    """The topic id an answer names (Kafka's zero UUID, or none at all, is no id)."""
    tid = getattr(answer, "topic_id", None)
    return str(tid) if tid is not None and tid.int else None


async def metadata(session: Session, node: str, topics: Sequence[str] | None) -> Any:
    """Metadata from `node`'s broker (all topics when `topics` is None, none when empty)."""
    return await session.broker_api(node, versions.METADATA, lambda v: versions.metadata_request(v, topics))


async def describe(session: Session, inv: Invocation) -> Any:
    v = inv.value
    resp = await metadata(session, v["node"], [v["topic"]])
    t = resp.topics[0]
    if int(t.error_code) != UNKNOWN_TOPIC:
        check(t.error_code, v)
    return _shown(t)


def _shown(t: Any) -> dict[str, Any]:
    """What a Metadata answer without another error says of one topic: absent (the broker answered
    UNKNOWN_TOPIC_OR_PARTITION), or present with its partition count."""
    if int(t.error_code) == UNKNOWN_TOPIC:
        return {"exists": False}
    return {"exists": True, "partitions": len(t.partitions)}


def list_handler(prefixes: Sequence[str]) -> Any:
    async def list_topics(session: Session, inv: Invocation) -> Any:
        resp = await metadata(session, inv.value["node"], None)
        names = sorted(t.name for t in resp.topics if t.name and t.name.startswith(tuple(prefixes)))
        return {"topics": names}

    return list_topics


@dataclass
class TopicsWorkload:
    """Configuration and generators of the topics workload."""

    brokers: Sequence[str]
    broker_ids: Sequence[int]
    prefix: str = "t"
    pool: int = 5
    list_prefixes: Sequence[str] = ()

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The name prefixes a `list` shows (carried in its invocation, so the read names what it asked)."""
        return tuple(self.list_prefixes) or (self.prefix,)

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.pool)]

    def handlers(self) -> Handlers:
        return {(WORKLOAD, "create"): create, (WORKLOAD, "delete"): delete, (WORKLOAD, "describe"): describe,
                (WORKLOAD, "list"): list_handler(self.prefixes)}

    def next_op(self, ctx: Context) -> Invocation:
        r = ctx.rng.random()
        topic = ctx.rng.choice(self.names)
        if r < 0.35:
            value: dict[str, Any] = {"topic": topic}
            if self.broker_ids and ctx.rng.random() < 0.3:
                rf = ctx.rng.randint(1, min(3, len(self.broker_ids)))
                value["assignment"] = [ctx.rng.sample(list(self.broker_ids), rf)
                                       for _ in range(ctx.rng.randint(1, 2))]
            else:
                value["partitions"] = ctx.rng.randint(1, 3)
                value["replication_factor"] = 1
            return op(WORKLOAD, "create", self._maybe_read_back(ctx, value))
        if r < 0.6:
            return op(WORKLOAD, "delete", self._maybe_read_back(ctx, {"topic": topic}))
        if r < 0.8:
            return broker_read(WORKLOAD, "describe", read_node(ctx, self.brokers), topic=topic)
        return broker_read(WORKLOAD, "list", read_node(ctx, self.brokers), prefixes=list(self.prefixes))

    @staticmethod
    def _maybe_read_back(ctx: Context, value: dict[str, Any]) -> dict[str, Any]:
        return {**value, "read_back": True} if ctx.rng.random() < READ_BACK else value

    def generator(self) -> FnGen:
        return FnGen(self.next_op)

    def final_reads(self) -> OncePer:
        judged = judged_final_broker(self.brokers)
        return OncePer(list(self.brokers), lambda node: broker_read(WORKLOAD, "list", node, final=True,
                                                                    judged=node == judged,
                                                                    prefixes=list(self.prefixes)))
