"""A topic administrator for the cluster simulator: CreateTopics and DeleteTopics sent straight to a
controller (as `kafka-topics --bootstrap-controller` does) with every field drawn on its own over
the space Kafka allows, each per-topic answer and the image the decision left judged against a
model of Kafka's ReplicationControlManager (createTopics / deleteTopics) and ControllerApis.

CreateTopics, 1-3 topics a request, validate_only or not, each topic:
- its name: one of a small pool (so it often exists already, or was deleted since; two of them,
  adm.5 and adm_5, collide: '.' and '_' are one character to Kafka), an illegal one
  (empty, ".", "..", a space or '/', 250 characters), or the name of another topic of the request;
- num_partitions and replication_factor each drawn independently: -1 (the controller's
  `num.partitions` / `default.replication.factor`), 1-3, 0, below -1, or more replicas than brokers;
- sometimes manual assignments instead (partition ids 0..n-1, shuffled, gapped or repeated; replica
  lists of registered, unknown or repeated brokers, or empty), with the counts -1 or not;
- configs: none, or some of Kafka's topic keys.
Kafka's answer for each name, in its order: named twice in the request → INVALID_REQUEST; an
existing → TOPIC_ALREADY_EXISTS; an illegal name, or one colliding with an existing topic's →
INVALID_TOPIC_EXCEPTION; with assignments and a
count or factor other than -1 → INVALID_REQUEST; bad assignments (ids not 0..n-1, an empty,
repeated or unregistered replica list, lists of different lengths, a partition with no usable
replica) → INVALID_REPLICA_ASSIGNMENT; a factor of 0 or below -1 → INVALID_REPLICATION_FACTOR (checked
before the count); a count of 0 or below -1 → INVALID_PARTITIONS; a factor above the registered
brokers → INVALID_REPLICATION_FACTOR; else NONE with the count and factor (defaults resolved) in
the answer from v5 on. Kafka's placer also uses fenced brokers when the unfenced ones are too few;
this node refuses such a factor (INVALID_REPLICATION_FACTOR): between the usable and the registered
brokers either answer is accepted. After the decision: a topic created (not validate_only) is in the
image with its id (v7 answers it), its count and factor, its manual replicas, exactly the configs
asked; a refused or validate-only topic left the image as it was.

DeleteTopics, by name (every version) or by id (v6): names and ids of the pool's topics (existing or
not), unknown ones, the same name or id twice. Kafka: named twice → INVALID_REQUEST (not deleted);
an unknown name → UNKNOWN_TOPIC_OR_PARTITION; an unknown id → UNKNOWN_TOPIC_ID; else NONE and the
topic is gone from the image after the decision. The client deletes only the pool's topics.

A fifth of the requests go to a standby controller: every result NOT_CONTROLLER. NOT_CONTROLLER is
always acceptable (a controller that lost leadership while deciding).
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as DeleteByName
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import RESOURCE_TOPIC
from kraftlab.node.sim.versions import at_version, versions

APIS = ("CreateTopics", "DeleteTopics")
POOL = (*(f"adm{i}" for i in range(5)), "adm.5", "adm_5")
"""The names the administrator creates and deletes (no other client's topic is ever deleted)."""
ILLEGAL = ("", ".", "..", "has space", "a/b", "x" * 250)
UNKNOWN_ID = uuid.UUID(int=0xDEAD)
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def is_topic_request(request: Any) -> bool:
    return api_name(request) in APIS


def legal_name(name: str) -> bool:
    """Kafka's Topic.validate: 1-249 characters of [a-zA-Z0-9._-], not "." nor ".."."""
    return 0 < len(name) <= 249 and name not in (".", "..") and set(name) <= _LEGAL_CHARS


@dataclass
class TopicFacts:
    """What the deciding controller held before it decided, and the image its decision left."""

    topics: dict[str, uuid.UUID]
    registered: frozenset[int]
    usable: frozenset[int]
    after: MetadataImage | None = field(default=None)


@dataclass(frozen=True)
class _Want:
    codes: frozenset[ErrorCode]
    partitions: int = 0
    factor: int = 0


def request_timeout() -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=5_000))


class TopicAdmin:
    def __init__(self, rng: random.Random, brokers: list[int], configs: dict[str, tuple[str, ...]],
                 default_partitions: int, default_factor: int, served: dict[str, tuple[int, int, int]]) -> None:
        self.rng = rng
        self.brokers = brokers
        self.configs = configs
        self.default_partitions = default_partitions
        self.default_factor = default_factor
        self.served = served
        self.answered: Counter[tuple[str, str]] = Counter()
        """Per-topic answers judged right, by API and error."""

    # ---- drawing ----------------------------------------------------------------------------

    def request(self, image: MetadataImage) -> Any:
        """The next request at a version drawn from the served range (`image`: the active
        controller's, for the ids of the pool's topics)."""
        if self.rng.random() < 0.6:
            return self._create()
        return self._delete(image)

    def _name(self, earlier: list[str]) -> str:
        rng = self.rng
        if earlier and rng.random() < 0.1:
            return rng.choice(earlier)
        return rng.choice(ILLEGAL) if rng.random() < 0.1 else rng.choice(POOL)

    def _count(self, top: int) -> int:
        return self.rng.choice([-1, -1, 1, 2, 3, 0, -2, top])

    def _assignments(self) -> tuple[CreatableReplicaAssignment, ...]:
        rng = self.rng
        n, factor = rng.randint(1, 3), rng.randint(1, min(3, len(self.brokers)))
        ids = list(range(n))
        if rng.random() < 0.1:
            ids = [i + 1 for i in ids]  # a gap at 0
        elif rng.random() < 0.1:
            ids[-1] = 0  # a partition named twice
        rng.shuffle(ids)
        out = []
        for pid in ids:
            replicas = rng.sample(self.brokers, factor)
            roll = rng.random()
            if roll < 0.05:
                replicas = []
            elif roll < 0.1:
                replicas = [*replicas, replicas[0]]
            elif roll < 0.15:
                replicas[-1] = 9_999  # no broker has it
            elif roll < 0.2 and factor < len(self.brokers):
                replicas = rng.sample(self.brokers, factor + 1)  # a length unlike the others'
            out.append(CreatableReplicaAssignment(partition_index=i32(pid),
                                                  broker_ids=tuple(BrokerId(b) for b in replicas)))
        return tuple(out)

    def _create(self) -> Any:
        rng = self.rng
        names: list[str] = []
        topics: list[CreatableTopic] = []
        for _ in range(rng.randint(1, 3)):
            name = self._name(names)
            names.append(name)
            manual = rng.random() < 0.25
            explicit = not manual or rng.random() < 0.2
            partitions = self._count(4) if explicit else -1
            factor = self._count(len(self.brokers) + 1) if explicit else -1
            keys = rng.sample(sorted(self.configs), rng.randint(0, 2)) if rng.random() < 0.5 else []
            topics.append(CreatableTopic(
                name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(factor),
                assignments=self._assignments() if manual else (),
                configs=tuple(CreatableTopicConfig(name=k, value=rng.choice(self.configs[k])) for k in keys)))
        newest = CreateTopicsRequest(topics=tuple(topics), timeout=request_timeout(), validate_only=rng.random() < 0.25)
        return at_version(newest, rng.choice(versions(newest, self.served)))

    def _delete(self, image: MetadataImage) -> Any:
        rng = self.rng
        probe = DeleteTopicsRequest(topics=(), timeout=request_timeout())
        version = rng.choice(versions(probe, self.served))
        asks: list[tuple[str | None, uuid.UUID | None]] = []
        named: set[str] = set()
        for _ in range(rng.randint(1, 3)):
            if asks and rng.random() < 0.2:
                asks.append(rng.choice(asks))
                continue
            existing = [n for n in POOL if n in image.topic_ids]
            name = rng.choice(existing) if existing and rng.random() < 0.6 \
                else rng.choice(POOL) if rng.random() < 0.9 else "no-such-topic"
            if name in named:
                continue  # a topic asked once by name and once by id: not drawn
            named.add(name)
            tid = image.topic_ids.get(name)
            if version >= 6 and rng.random() < 0.4:
                asks.append((None, tid if tid is not None and rng.random() < 0.8 else UNKNOWN_ID))
            else:
                asks.append((name, None))
        if version >= 6:
            return DeleteTopicsRequest(topics=tuple(DeleteTopicState(name=TopicName(n) if n is not None else None,
                                                                     topic_id=t)
                                                    for n, t in asks), timeout=request_timeout())
        names = tuple(TopicName(n) for n, _ in asks if n is not None)
        by_name = DeleteByName(topic_names=names, timeout=request_timeout())
        return at_version(by_name, version)

    # ---- judging ----------------------------------------------------------------------------

    @staticmethod
    def facts(image: MetadataImage) -> TopicFacts:
        usable = frozenset(image.usable_brokers())
        return TopicFacts(dict(image.topic_ids), frozenset(image.brokers), usable)

    def judge(self, request: Any, facts: TopicFacts, response: Any) -> str | None:
        """Why `response` is not Kafka's answer to `request` given `facts`, or None when it is."""
        if api_name(request) == "CreateTopics":
            verdict = self._judge_create(request, facts, response)
        else:
            verdict = self._judge_delete(request, facts, response)
        return None if verdict is None else f"{api_name(request)} v{request.__version__}: {verdict}"

    def _want_create(self, topic: Any, twice: bool, facts: TopicFacts) -> _Want:
        def no(code: ErrorCode) -> _Want:
            return _Want(frozenset({code}))
        if twice:
            return no(ErrorCode.invalid_request)
        if topic.name in facts.topics:
            return no(ErrorCode.topic_already_exists)
        if not legal_name(topic.name) or self._collides(topic.name, facts):
            return no(ErrorCode.invalid_topic_exception)
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                return no(ErrorCode.invalid_request)
            lists = [tuple(a.broker_ids) for a in topic.assignments]
            ids = sorted(a.partition_index for a in topic.assignments)
            if (ids != list(range(len(ids))) or any(not r or len(set(r)) != len(r) for r in lists)
                    or any(not set(r) <= facts.registered for r in lists) or len({len(r) for r in lists}) != 1
                    or any(not set(r) & facts.usable for r in lists)):
                return no(ErrorCode.invalid_replica_assignment)
            return _Want(frozenset({ErrorCode.none}), len(lists), len(lists[0]))
        factor = self.default_factor if topic.replication_factor == -1 else topic.replication_factor
        partitions = self.default_partitions if topic.num_partitions == -1 else topic.num_partitions
        if factor <= 0:
            return no(ErrorCode.invalid_replication_factor)
        if partitions <= 0:
            return no(ErrorCode.invalid_partitions)
        if factor > len(facts.registered):
            return no(ErrorCode.invalid_replication_factor)
        codes = {ErrorCode.none} | ({ErrorCode.invalid_replication_factor} if factor > len(facts.usable) else set())
        return _Want(frozenset(codes), partitions, factor)

    @staticmethod
    def _collides(name: str, facts: TopicFacts) -> bool:
        """Kafka's collision rule: '.' and '_' are one character, among names that have one of them
        (against the topics before the request)."""
        def unify(n: str) -> str:
            return n.replace(".", "_")
        marked = {unify(n) for n in facts.topics if "." in n or "_" in n}
        return ("." in name or "_" in name) and unify(name) in marked

    def _judge_create(self, request: Any, facts: TopicFacts, response: Any) -> str | None:
        named = Counter(t.name for t in request.topics)
        asked = {t.name: t for t in request.topics}
        got = {r.name for r in response.topics}
        if got != set(asked):
            return f"answered the topics {sorted(got)}, asked for {sorted(asked)}"
        after, validate_only = facts.after, bool(getattr(request, "validate_only", False))
        assert after is not None
        for r in response.topics:
            topic = asked[r.name]
            want = self._want_create(topic, named[r.name] > 1, facts)
            if r.error_code == ErrorCode.not_controller:
                self.answered[("CreateTopics", r.error_code.name)] += 1
                continue
            if r.error_code not in want.codes:
                return (f"topic {r.name[:40]!r} ({topic.num_partitions} partitions, factor {topic.replication_factor}, "
                        f"{len(topic.assignments)} assignments, {len(facts.usable)} usable of "
                        f"{len(facts.registered)} brokers) answered {r.error_code.name}, Kafka "
                        f"{sorted(c.name for c in want.codes)}")
            self.answered[("CreateTopics", r.error_code.name)] += 1
            held = after.topic(r.name)
            if r.error_code != ErrorCode.none or validate_only:
                if (held.topic_id if held is not None else None) != facts.topics.get(r.name):
                    return f"topic {r.name[:40]!r} refused or only validated, yet the image changed it"
                continue
            if request.__version__ >= 5 and (r.num_partitions, r.replication_factor) != (want.partitions, want.factor):
                return (f"topic {r.name!r} answered {r.num_partitions} partitions of factor {r.replication_factor}, "
                        f"Kafka {want.partitions} of {want.factor}")
            verdict = self._judge_created(topic, want, held, after, r)
            if verdict is not None:
                return verdict
        return None

    @staticmethod
    def _judge_created(topic: Any, want: _Want, held: Any, after: MetadataImage, r: Any) -> str | None:
        if held is None:
            return f"topic {r.name!r} answered NONE but is not in the image after the decision"
        if getattr(r, "topic_id", None) not in (None, held.topic_id):
            return f"topic {r.name!r} answered id {r.topic_id}, the image holds {held.topic_id}"
        shape = sorted((pid, len(p.replicas)) for pid, p in held.partitions.items())
        if shape != [(pid, want.factor) for pid in range(want.partitions)]:
            return f"topic {r.name!r} holds partitions {shape}, asked {want.partitions} of factor {want.factor}"
        manual = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
        if manual and any(held.partitions[pid].replicas != reps for pid, reps in manual.items()):
            return f"topic {r.name!r} holds replicas other than its manual assignment"
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        if after.configs.get((RESOURCE_TOPIC, r.name), {}) != configs:
            return f"topic {r.name!r} holds configs {after.configs.get((RESOURCE_TOPIC, r.name))}, asked {configs}"
        return None

    def _judge_delete(self, request: Any, facts: TopicFacts, response: Any) -> str | None:
        asks = [(t.name, t.topic_id if t.topic_id and t.topic_id.int else None) for t in request.topics] \
            if hasattr(request, "topics") else [(n, None) for n in request.topic_names]
        counted = Counter(asks)
        by_id: dict[uuid.UUID, tuple[str | None, uuid.UUID | None]] = {
            tid: (n, tid) for n, tid in asks if tid is not None}
        codes: dict[tuple[str | None, uuid.UUID | None], set[ErrorCode]] = {}
        for r in response.responses:
            tid = getattr(r, "topic_id", None)
            key: tuple[str | None, uuid.UUID | None] = by_id[tid] if tid is not None and tid in by_id \
                else (r.name, None)
            if key not in counted:
                return f"answered {r.name!r} / {tid}, which nobody asked to delete"
            codes.setdefault(key, set()).add(r.error_code)
        after = facts.after
        assert after is not None
        ids = set(facts.topics.values())
        for key, n in counted.items():
            name, tid = key
            got = codes.get(key)
            if got is None:
                return f"asked to delete {name!r} / {tid}, not answered"
            if got == {ErrorCode.not_controller}:
                self.answered[("DeleteTopics", "not_controller")] += 1
                continue
            exists = tid in ids if tid is not None else name in facts.topics
            want = ErrorCode.invalid_request if n > 1 else ErrorCode.none if exists \
                else ErrorCode.unknown_topic_id if tid is not None else ErrorCode.unknown_topic_or_partition
            if got != {want}:
                return f"topic {name!r} / {tid} answered {sorted(c.name for c in got)}, Kafka {want.name}"
            self.answered[("DeleteTopics", want.name)] += 1
            gone = (tid not in after.topics) if tid is not None else (after.topic(name or "") is None)
            if want == ErrorCode.none and not gone:
                return f"topic {name!r} / {tid} answered deleted, still in the image after the decision"
            if want == ErrorCode.invalid_request and exists and gone:
                return f"topic {name!r} / {tid} named twice was deleted; Kafka refuses it (INVALID_REQUEST)"
        return None
