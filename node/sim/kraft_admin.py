"""An admin client for the cluster simulator: the controller APIs an operator calls (Kafka's
ControllerApis serves them, as `--bootstrap-controller` tools use) and the judgement of each answer.

- ElectLeaders (preferred) for some partitions, for partitions that do not exist, or for all of
  them: per partition Kafka answers UNKNOWN_TOPIC_OR_PARTITION (no such partition),
  ELECTION_NOT_NEEDED (the preferred replica leads), PREFERRED_LEADER_NOT_AVAILABLE (it is not in
  the ISR, or fenced, unregistered or shutting down) or NONE (it will lead); a request for all
  partitions reports only those where an election was needed.
- UnregisterBroker of a broker that is down and fenced (decommissioning it; it registers again
  when it comes back) or of an id never registered: NONE for a registered broker, BROKER_ID_NOT_REGISTERED else.
- AlterClientQuotas of client-id and user quotas (byte rates set or removed, from a generator of
  their own): one answer per entry asked, in order and naming its entity, each NONE.
- Some requests go to a standby (an operator's tool with a stale view of who is active): every
  item of its answer is NOT_CONTROLLER, none left out.
- Some AlterClientQuotas go to a broker, as Kafka's admin client sends them (the broker forwards
  them to the active controller and relays the answer in the client's version): every entry is
  answered, in order, all NONE, NOT_CONTROLLER or — a forward sent but not answered —
  REQUEST_TIMED_OUT.

Each request goes at a version drawn from the advertised range (node.sim.versions); ElectLeaders
v0 has no top-level error code, so its NOT_CONTROLLER is on every partition asked (and, asked for
all partitions, an empty answer — Kafka's own ambiguity).

The facts an answer depends on are taken from the active controller's image just before it
decides (`facts`); NOT_CONTROLLER is always an acceptable answer. What the controller then wrote
is judged by the metadata checker (a new leader from the ISR, no ineligible leader, …).
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from typing import Any

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest
from kio.static.primitive import f64, i8, i32, i32Timedelta

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import MetadataImage

ADMIN_ID = 10_000  # the admin client's address in the simulated network (no node has it)
NOT_REGISTERED_ID = 9_999  # a broker id no simulated broker has


@dataclass(frozen=True, slots=True)
class _PartitionFacts:
    leader: int
    preferred: int
    preferred_in_isr: bool
    preferred_usable: bool


Facts = dict[tuple[str, int], _PartitionFacts | None] | bool


def _usable(image: MetadataImage, broker: int) -> bool:
    reg = image.brokers.get(broker)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


def _partition_facts(image: MetadataImage, topic: str, pid: int) -> _PartitionFacts | None:
    info = image.topic(topic)
    p = info.partitions.get(pid) if info is not None else None
    if p is None or not p.replicas:
        return None
    preferred = p.replicas[0]
    return _PartitionFacts(p.leader, preferred, preferred in p.isr, _usable(image, preferred))


def _expected(facts: _PartitionFacts | None) -> ErrorCode:
    if facts is None:
        return ErrorCode.unknown_topic_or_partition
    if facts.leader == facts.preferred:
        return ErrorCode.election_not_needed
    if not (facts.preferred_in_isr and facts.preferred_usable):
        return ErrorCode.preferred_leader_not_available
    return ErrorCode.none


QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate")


class AdminClient:
    def __init__(self, rng: random.Random, quota_rng: random.Random | None = None) -> None:
        """`quota_rng` draws the quota requests and which requests go to a standby (a generator of
        its own, so the other requests are the ones `rng` alone would draw); None: neither."""
        self.rng = rng
        self.quota_rng = quota_rng

    def standby(self, standbys: list[int]) -> int | None:
        """The controller (of `standbys`, the ones not active) the next request goes to, or None
        for the active one."""
        if self.quota_rng is None or not standbys or self.quota_rng.random() >= 0.2:
            return None
        return self.quota_rng.choice(standbys)

    def request(self, image: MetadataImage, down_brokers: list[int]) -> Any:
        """The next admin request, drawn against what the cluster holds (`image`: the deciding
        controller's view; `down_brokers`: the brokers whose process is not running)."""
        if self.quota_rng is not None and self.quota_rng.random() < 0.2:
            return self._quota_request(self.quota_rng)
        rng = self.rng
        # An operator decommissions a broker once it is down and the controller has fenced it (an
        # unfenced dead broker is the controller's failure to see, not one to clean up by hand).
        gone = [b for b in down_brokers if (reg := image.brokers.get(b)) is not None and reg.fenced]
        if gone and rng.random() < 0.5:
            return UnregisterBrokerRequest(broker_id=BrokerId(rng.choice(gone)))
        if rng.random() < 0.1:
            return UnregisterBrokerRequest(broker_id=BrokerId(NOT_REGISTERED_ID))
        timeout = i32Timedelta.parse(datetime.timedelta(milliseconds=5_000))
        if rng.random() < 0.2:
            return ElectLeadersRequest(election_type=i8(0), topic_partitions=None, timeout=timeout)
        names = sorted(t.name for t in image.topics.values())
        wanted: dict[str, set[int]] = {}
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(names) if names and rng.random() < 0.9 else f"no-such-topic-{rng.randrange(3)}"
            wanted.setdefault(name, set()).add(rng.randrange(4))
        parts = tuple(
            TopicPartitions(topic=TopicName(n), partitions=tuple(i32(p) for p in sorted(ps)))
            for n, ps in sorted(wanted.items())
        )
        return ElectLeadersRequest(election_type=i8(0), topic_partitions=parts, timeout=timeout)

    @staticmethod
    def _quota_request(rng: random.Random) -> AlterClientQuotasRequest:
        entries = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["client-id", "user"])
            entity = (EntityData(entity_type=kind, entity_name=f"{kind}-{rng.randrange(4)}"),)
            keys = rng.sample(QUOTA_KEYS, rng.randint(1, len(QUOTA_KEYS)))
            ops = tuple(OpData(key=k, value=f64(float(rng.choice([1024, 65536, 1 << 20]))), remove=rng.random() < 0.3)
                        for k in keys)
            entries.append(EntryData(entity=entity, ops=ops))
        return AlterClientQuotasRequest(entries=tuple(entries), validate_only=False)

    @staticmethod
    def through_a_broker(request: Any, rng: random.Random) -> bool:
        """Whether `request` goes to a broker (a third of the quota requests)."""
        return api_name(request) == "AlterClientQuotas" and rng.random() < 0.33

    @staticmethod
    def facts(request: Any, image: MetadataImage) -> Facts:
        """What the answer to `request` depends on in the deciding controller's `image`."""
        if api_name(request) == "AlterClientQuotas":
            return True  # valid quotas: accepted whatever the image holds
        if api_name(request) == "UnregisterBroker":
            return request.broker_id in image.brokers
        if request.topic_partitions is None:
            return {
                (t.name, pid): _partition_facts(image, t.name, pid)
                for t in image.topics.values()
                for pid in t.partitions
            }
        wanted = [(tp.topic, p) for tp in request.topic_partitions for p in tp.partitions]
        return {(t, p): _partition_facts(image, t, p) for t, p in wanted}

    @staticmethod
    def judge(request: Any, facts: Facts, response: Any) -> str | None:
        """Why `response` is not Kafka's answer to `request` given `facts`, or None when it is."""
        if api_name(request) == "AlterClientQuotas":
            return _judge_quotas(request, response, brokered=facts is False)
        code = getattr(response, "error_code", None)  # ElectLeaders v0 has none: its codes are per partition
        if code == ErrorCode.not_controller:
            return None
        if api_name(request) == "UnregisterBroker":
            want = ErrorCode.none if facts else ErrorCode.broker_id_not_registered
            if response.error_code != want:
                state = "registered" if facts else "not registered"
                return (f"UnregisterBroker of broker {request.broker_id} ({state}) answered "
                        f"{response.error_code.name}, Kafka answers {want.name}")
            return None
        assert isinstance(facts, dict)
        if code not in (None, ErrorCode.none):
            return f"ElectLeaders answered {code.name} for the whole request"
        got = {
            (r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results
            for p in r.partition_result
        }
        everything = request.topic_partitions is None
        if code is None and (set(got.values()) == {ErrorCode.not_controller} or (everything and not got)):
            return None  # v0's NOT_CONTROLLER: on every partition asked (none, when all were asked)
        for key, f in sorted(facts.items()):
            want = _expected(f)
            if everything and want == ErrorCode.election_not_needed:
                if key in got:
                    return f"ElectLeaders for all partitions reported {key[0]}-{key[1]}, which needed no election"
                continue
            if got.get(key) != want:
                return (f"ElectLeaders answered {key[0]}-{key[1]} with {getattr(got.get(key), 'name', 'nothing')}, "
                        f"Kafka answers {want.name} ({f})")
        extra = sorted(set(got) - set(facts))
        if extra:
            return f"ElectLeaders answered partitions nobody asked for: {extra}"
        return None


def _judge_quotas(request: AlterClientQuotasRequest, response: Any, brokered: bool = False) -> str | None:
    asked = [[(c.entity_type, c.entity_name) for c in e.entity] for e in request.entries]
    got = [[(c.entity_type, c.entity_name) for c in e.entity] for e in response.entries]
    if got != asked:
        return f"AlterClientQuotas answered the entities {got}, asked for {asked}"
    codes = {e.error_code for e in response.entries}
    allowed = [{ErrorCode.none}, {ErrorCode.not_controller}] + ([{ErrorCode.request_timed_out}] if brokered else [])
    if codes not in allowed:
        return f"AlterClientQuotas of valid quotas answered {sorted(c.name for c in codes)}, Kafka answers NONE"
    return None
