"""The in-memory metadata image: what every controller and broker rebuilds from snapshot + log.

`MetadataImage.apply(record)` is the one replay function (the controller's uncommitted "future"
state, its committed state and the brokers' images all use it). `to_records()` lists the
minimal records describing the image in a canonical order: they are the snapshot records, and
their bytes (`canonical_bytes`, `digest`) make "identical on every node at equal offsets"
checkable. `MetadataImage.from_records(to_records())` rebuilds an equal image.

Replay semantics follow Kafka: a PartitionChangeRecord bumps the partition epoch; one that sets
the leader (anything but NO_LEADER_CHANGE) also bumps the leader epoch. Fence/unfence records
change only the broker; the controller writes the ISR changes as explicit PartitionChangeRecords.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from kraftlab.node.metadata.client_quotas import Entity
from kraftlab.node.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RESOURCE_TOPIC,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntityData,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    encode,
)
from kraftlab.node.security.acl import AclBinding
from kraftlab.node.security.scram import ScramCredential

ENTRY_DIGESTS_UP_TO = 256
"""Sections larger than this journal no per-entry digests (the section digest still tells)."""


UNASSIGNED_DIR = uuid.UUID(int=0)
"""Kafka's DirectoryId.UNASSIGNED: a replica whose log directory is not known (yet)."""


class ImageError(ValueError):
    """A record that does not fit the image (for example a partition of an unknown topic)."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[uuid.UUID, ...] = ()
    """Its online log directories (KIP-858 directory ids); a failed one is no longer listed."""

    @property
    def usable(self) -> bool:
        """May lead partitions, join ISRs and receive new replicas."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, name: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.name == name), None)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    last_known_elr: tuple[int, ...] = ()
    directories: tuple[uuid.UUID, ...] = ()
    """Each replica's log directory, in replica order (empty: none assigned; UNASSIGNED_DIR: not yet)."""

    def directory(self, broker_id: int) -> uuid.UUID:
        """The log directory of `broker_id`'s replica (UNASSIGNED_DIR when none is known)."""
        if self.directories and broker_id in self.replicas:
            return self.directories[self.replicas.index(broker_id)]
        return UNASSIGNED_DIR

    @property
    def reassigning(self) -> bool:
        return bool(self.removing or self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where an ongoing reassignment goes (the replicas when none is ongoing)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """Where an ongoing reassignment came from (what a cancellation restores)."""
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]


class MetadataImage:
    """Brokers, topics and partitions, configs, finalized feature levels, ACLs and SCRAM credentials."""

    __slots__ = ("acls", "brokers", "client_quotas", "configs", "delegation_tokens", "features", "producer_ids",
                 "retired", "scram", "topic_ids", "topics")

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[uuid.UUID, TopicInfo] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.retired: dict[int, set[uuid.UUID]] = {}
        """Incarnations replaced by a newer registration of the same id: from replayed log records,
        and from snapshots (RegisterBrokerRecord's `replaced_incarnations`, so a controller that
        loaded a snapshot refuses the same zombies as one that replayed the log)."""
        self.acls: dict[uuid.UUID, AclBinding] = {}
        self.scram: dict[tuple[str, int], ScramCredential] = {}
        """(user, Kafka's mechanism code) → credential."""
        self.client_quotas: dict[Entity, dict[str, float]] = {}
        """Quota values by client quota entity (node.metadata.client_quotas), from ClientQuotaRecords."""
        self.producer_ids: ProducerIdsRecord | None = None
        self.delegation_tokens: dict[str, DelegationTokenRecord] = {}
        """Token id → the token's latest DelegationTokenRecord (owner, renewers, timestamps)."""
        """The last producer id block granted (its `next_producer_id`: the first id never granted)."""

    @property
    def next_producer_id(self) -> int:
        """The first producer id no block has granted (0 before the first block)."""
        return self.producer_ids.next_producer_id if self.producer_ids is not None else 0

    # ---- queries -------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        tid = self.topic_ids.get(name)
        return self.topics[tid] if tid is not None else None

    def usable_brokers(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if b.usable)

    def is_usable(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and b.usable

    def replica_online(self, p: PartitionInfo, broker_id: int) -> bool:
        """False when `broker_id`'s replica of `p` is on a log directory the broker reported failed
        (assigned, but no longer among its registered online directories)."""
        d = p.directory(broker_id)
        b = self.brokers.get(broker_id)
        return d == UNASSIGNED_DIR or b is None or not b.log_dirs or d in b.log_dirs

    def partitions(self) -> Iterator[tuple[TopicInfo, int, PartitionInfo]]:
        """Every partition, lazily: a list of 100,000 tuples would wake the garbage collector's
        full collections over the whole image (a second per fence tick at that size)."""
        for t in self.topics.values():
            for pid, p in t.partitions.items():
                yield t, pid, p

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())

    # ---- replay --------------------------------------------------------------------------

    def apply(self, record: MetadataRecord) -> None:
        match record:
            case RegisterBrokerRecord():
                old = self.brokers.get(record.broker_id)
                if old is not None and old.incarnation_id != record.incarnation_id:
                    self.retired.setdefault(record.broker_id, set()).add(old.incarnation_id)
                if record.replaced_incarnations:  # a snapshot's record: what the log had replaced
                    self.retired.setdefault(record.broker_id, set()).update(record.replaced_incarnations)
                self.brokers[record.broker_id] = BrokerInfo(
                    id=record.broker_id,
                    epoch=record.broker_epoch,
                    incarnation_id=record.incarnation_id,
                    endpoints=record.end_points,
                    features=record.features,
                    rack=record.rack,
                    fenced=record.fenced,
                    in_controlled_shutdown=record.in_controlled_shutdown,
                    log_dirs=record.log_dirs,
                )
            case UnregisterBrokerRecord():
                b = self.brokers.get(record.broker_id)
                if b is not None and b.epoch == record.broker_epoch:
                    del self.brokers[record.broker_id]
                    # The id is free again, as in Kafka: its replaced incarnations are forgotten too.
                    # (A snapshot has no record to carry them for a broker that is not registered, so
                    # keeping them would make a replayed image and a snapshot-loaded one differ.)
                    self.retired.pop(record.broker_id, None)
            case FenceBrokerRecord():
                self._change_broker(record.id, record.epoch, fenced=True)
            case UnfenceBrokerRecord():
                self._change_broker(record.id, record.epoch, fenced=False)
            case BrokerRegistrationChangeRecord():
                b = self._broker_at(record.broker_id, record.broker_epoch)
                fenced = {1: True, -1: False}.get(record.fenced, b.fenced)
                shutdown = True if record.in_controlled_shutdown == 1 else b.in_controlled_shutdown
                log_dirs = b.log_dirs if record.log_dirs is None else record.log_dirs
                self.brokers[b.id] = replace(b, fenced=fenced, in_controlled_shutdown=shutdown, log_dirs=log_dirs)
            case TopicRecord():
                if record.name in self.topic_ids:
                    raise ImageError(f"topic {record.name} already exists")
                self.topics[record.topic_id] = TopicInfo(record.name, record.topic_id, {})
                self.topic_ids[record.name] = record.topic_id
            case PartitionRecord():
                self._topic(record.topic_id).partitions[record.partition_id] = PartitionInfo(
                    replicas=record.replicas,
                    isr=record.isr,
                    removing=record.removing_replicas or (),
                    adding=record.adding_replicas or (),
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    last_known_elr=record.last_known_elr,
                    directories=record.directories,
                )
            case PartitionChangeRecord():
                self._apply_partition_change(record)
            case RemoveTopicRecord():
                topic = self.topics.pop(record.topic_id, None)
                if topic is None:
                    raise ImageError(f"RemoveTopicRecord for unknown topic {record.topic_id}")
                del self.topic_ids[topic.name]
                self.configs.pop((RESOURCE_TOPIC, topic.name), None)
            case ConfigRecord():
                key = (record.resource_type, record.resource_name)
                if record.value is None:
                    entries = self.configs.get(key, {})
                    entries.pop(record.name, None)
                    if not entries:
                        self.configs.pop(key, None)
                else:
                    self.configs.setdefault(key, {})[record.name] = record.value
            case FeatureLevelRecord():
                if record.feature_level == 0:
                    self.features.pop(record.name, None)
                else:
                    self.features[record.name] = record.feature_level
            case AccessControlEntryRecord():
                if record.id in self.acls:
                    raise ImageError(f"ACL {record.id} already exists")
                self.acls[record.id] = AclBinding(
                    record.resource_type, record.resource_name, record.pattern_type, record.principal,
                    record.host, record.operation, record.permission_type,
                )
            case RemoveAccessControlEntryRecord():
                if self.acls.pop(record.id, None) is None:
                    raise ImageError(f"RemoveAccessControlEntryRecord for unknown ACL {record.id}")
            case UserScramCredentialRecord():
                self.scram[(record.name, record.mechanism)] = ScramCredential(
                    record.salt, record.stored_key, record.server_key, record.iterations
                )
            case RemoveUserScramCredentialRecord():
                if self.scram.pop((record.name, record.mechanism), None) is None:
                    raise ImageError(f"no SCRAM credential of {record.name!r} for mechanism {record.mechanism}")
            case ClientQuotaRecord():
                entity: Entity = tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))
                if record.remove:
                    values = self.client_quotas.get(entity, {})
                    values.pop(record.key, None)
                    if not values:
                        self.client_quotas.pop(entity, None)
                else:
                    self.client_quotas.setdefault(entity, {})[record.key] = record.value
            case ProducerIdsRecord():
                if record.next_producer_id <= self.next_producer_id:
                    raise ImageError(f"ProducerIdsRecord's next producer id {record.next_producer_id} is not above "
                                     f"{self.next_producer_id}: ids would be granted twice")
                self.producer_ids = record
            case DelegationTokenRecord():
                self.delegation_tokens[record.token_id] = record
            case RemoveDelegationTokenRecord():
                if self.delegation_tokens.pop(record.token_id, None) is None:
                    raise ImageError(f"RemoveDelegationTokenRecord for unknown token {record.token_id}")
            case NoOpRecord():
                pass
            case _:
                raise ImageError(f"cannot apply {type(record).__name__}")

    def _broker_at(self, broker_id: int, epoch: int) -> BrokerInfo:
        b = self.brokers.get(broker_id)
        if b is None or b.epoch != epoch:
            raise ImageError(f"no broker {broker_id} at epoch {epoch}")
        return b

    def _change_broker(self, broker_id: int, epoch: int, *, fenced: bool) -> None:
        b = self._broker_at(broker_id, epoch)
        self.brokers[broker_id] = replace(b, fenced=fenced)

    def _topic(self, topic_id: uuid.UUID) -> TopicInfo:
        topic = self.topics.get(topic_id)
        if topic is None:
            raise ImageError(f"unknown topic id {topic_id}")
        return topic

    def _apply_partition_change(self, record: PartitionChangeRecord) -> None:
        topic = self._topic(record.topic_id)
        p = topic.partitions.get(record.partition_id)
        if p is None:
            raise ImageError(f"unknown partition {topic.name}-{record.partition_id}")
        leader, leader_epoch = p.leader, p.leader_epoch
        if record.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = record.leader, p.leader_epoch + 1
        replicas = p.replicas if record.replicas is None else record.replicas
        directories = record.directories
        if directories is None:  # replicas that stay keep their directory; new ones have none yet
            directories = tuple(p.directory(r) for r in replicas) if p.directories else ()
        topic.partitions[record.partition_id] = PartitionInfo(
            directories=directories,
            replicas=replicas,
            isr=p.isr if record.isr is None else record.isr,
            removing=p.removing if record.removing_replicas is None else record.removing_replicas,
            adding=p.adding if record.adding_replicas is None else record.adding_replicas,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=p.partition_epoch + 1,
            last_known_elr=p.last_known_elr if record.last_known_elr is None else record.last_known_elr,
        )

    # ---- copies, snapshots, canonical form ----------------------------------------------

    def copy(self) -> MetadataImage:
        """An independent copy (partition and broker values are immutable, so dicts suffice)."""
        other = MetadataImage()
        other.brokers = dict(self.brokers)
        other.topics = {tid: TopicInfo(t.name, t.topic_id, dict(t.partitions)) for tid, t in self.topics.items()}
        other.topic_ids = dict(self.topic_ids)
        other.configs = {k: dict(v) for k, v in self.configs.items()}
        other.features = dict(self.features)
        other.retired = {b: set(v) for b, v in self.retired.items()}
        other.acls = dict(self.acls)
        other.scram = dict(self.scram)
        other.client_quotas = {k: dict(v) for k, v in self.client_quotas.items()}
        other.producer_ids = self.producer_ids
        other.delegation_tokens = dict(self.delegation_tokens)
        return other

    def to_records(self) -> list[MetadataRecord]:
        """The minimal records describing this image, in canonical order (snapshot content)."""
        return list(self.iter_records())

    def iter_records(self) -> Iterator[MetadataRecord]:
        """`to_records()` one at a time (a snapshot of 100,000 partitions encodes each record as it
        comes instead of holding them all: fewer live objects, no full garbage collection)."""
        for n, v in sorted(self.features.items()):
            yield FeatureLevelRecord(name=n, feature_level=v)
        for b in sorted(self.brokers.values(), key=lambda b: b.id):
            yield RegisterBrokerRecord(
                broker_id=b.id,
                incarnation_id=b.incarnation_id,
                broker_epoch=b.epoch,
                end_points=b.endpoints,
                features=b.features,
                rack=b.rack,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
                replaced_incarnations=tuple(sorted(self.retired.get(b.id, ()))),
                log_dirs=b.log_dirs,
            )
        for name in sorted(self.topic_ids):
            t = self.topics[self.topic_ids[name]]
            yield TopicRecord(name=t.name, topic_id=t.topic_id)
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                yield PartitionRecord(
                    partition_id=pid,
                    topic_id=t.topic_id,
                    replicas=p.replicas,
                    isr=p.isr,
                    removing_replicas=p.removing,
                    adding_replicas=p.adding,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    last_known_elr=p.last_known_elr,
                    directories=p.directories,
                )
        for (rtype, rname), entries in sorted(self.configs.items()):
            for name, value in sorted(entries.items()):
                yield ConfigRecord(resource_type=rtype, resource_name=rname, name=name, value=value)
        for (user, mech), c in sorted(self.scram.items()):
            yield UserScramCredentialRecord(
                name=user, mechanism=mech, salt=c.salt, stored_key=c.stored_key, server_key=c.server_key,
                iterations=c.iterations,
            )
        for aid, acl in sorted(self.acls.items()):
            yield AccessControlEntryRecord(
                id=aid, resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host, operation=acl.operation,
                permission_type=acl.permission,
            )
        for entity, values in sorted(self.client_quotas.items(), key=lambda kv: _entity_key(kv[0])):
            for k, q in sorted(values.items()):
                yield ClientQuotaRecord(entity=tuple(QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity),
                                        key=k, value=q)
        if self.producer_ids is not None:
            yield self.producer_ids
        for _, token in sorted(self.delegation_tokens.items()):
            yield token

    @classmethod
    def from_records(cls, records: Iterable[MetadataRecord]) -> MetadataImage:
        image = cls()
        for r in records:
            image.apply(r)
        return image

    def semantic_form(self) -> dict[str, Any]:
        """The image as plain data in the canonical shape of docs/contracts.md ("Metadata image
        digest"): what a checker rebuilds on its own from the committed records and compares. The
        `acls` and `scram` sections appear only when not empty (digests of images without them are
        unchanged)."""
        form: dict[str, Any] = {
            "brokers": {str(b.id): {
                "epoch": b.epoch, "incarnation": str(b.incarnation_id), "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown, "rack": b.rack,
                "endpoints": sorted([e.name, e.host, e.port, e.security_protocol] for e in b.endpoints),
                "features": sorted([f.name, f.min_supported_version, f.max_supported_version] for f in b.features),
                "replaced_incarnations": sorted(str(i) for i in self.retired.get(b.id, ())),
            } for b in self.brokers.values()},
            "topics": {name: str(tid) for name, tid in self.topic_ids.items()},
            "partitions": {f"{t.topic_id}/{pid}": {
                "replicas": list(p.replicas), "isr": list(p.isr), "removing": list(p.removing),
                "adding": list(p.adding), "leader": p.leader, "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch, "elr": list(p.last_known_elr),
            } for t in self.topics.values() for pid, p in t.partitions.items()},
            "configs": {f"{rtype}/{rname}": dict(entries) for (rtype, rname), entries in self.configs.items()},
            "features": dict(self.features),
        }
        if self.acls:
            form["acls"] = {str(aid): [b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                                       b.operation, b.permission] for aid, b in self.acls.items()}
        if self.scram:
            form["scram"] = {f"{user}/{mech}": {
                "salt": _b64(c.salt), "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key),
                "iterations": c.iterations,
            } for (user, mech), c in self.scram.items()}
        if self.client_quotas:  # a section only when there are quotas: digests journalled before stay valid
            form["client_quotas"] = {_entity_key(e): dict(v) for e, v in self.client_quotas.items()}
        if self.producer_ids is not None:  # likewise only once a block was granted
            form["producer_ids"] = {"next_producer_id": self.producer_ids.next_producer_id}
        if self.delegation_tokens:  # likewise only once a token exists
            form["delegation_tokens"] = {tid: {
                "owner": t.owner, "requester": t.requester, "renewers": list(t.renewers),
                "issue_timestamp": t.issue_timestamp, "max_timestamp": t.max_timestamp,
                "expiration_timestamp": t.expiration_timestamp,
            } for tid, t in self.delegation_tokens.items()}
        return form

    def semantic_digest(self) -> tuple[str, dict[str, str]]:
        """SHA-256 of `semantic_form()` as sorted, compact JSON, and the first 16 hex digits of each
        section's own SHA-256 the same way, so a checker can say which section differs
        (docs/contracts.md)."""
        return _form_digest(self.semantic_form())

    def entry_digests(self, limit: int = ENTRY_DIGESTS_UP_TO) -> dict[str, dict[str, str]]:
        """Per section with at most `limit` entries: each entry's key → the first 8 hex digits of
        its value's SHA-256 (docs/contracts.md), so a checker can name the entries that differ."""
        return _entry_digests(self.semantic_form(), limit)

    def image_digests(self) -> tuple[str, dict[str, str], dict[str, dict[str, str]]]:
        """`semantic_digest()` and `entry_digests()` from one semantic form (an `image` journal event)."""
        form = self.semantic_form()
        return (*_form_digest(form), _entry_digests(form, ENTRY_DIGESTS_UP_TO))

    def canonical_bytes(self) -> bytes:
        return b"".join(encode(r) for r in self.iter_records())

    def digest(self) -> str:
        """SHA-256 of the canonical form: equal on two nodes iff their images are equal."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return (
            self.brokers == other.brokers
            and self.topic_ids == other.topic_ids
            and {t: self.topics[t].partitions for t in self.topics}
            == {t: other.topics[t].partitions for t in other.topics}
            and self.configs == other.configs
            and self.features == other.features
            and self.retired == other.retired
            and self.acls == other.acls
            and self.scram == other.scram
            and self.client_quotas == other.client_quotas
            and self.producer_ids == other.producer_ids
            and self.delegation_tokens == other.delegation_tokens
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable: mutable, and equal by value


def _entity_key(entity: Entity) -> str:
    """A client quota entity as the image form's key (docs/contracts.md): its sorted [type, name]
    pairs as compact JSON, a default entity's name null (`[["user",null]]`)."""
    return json.dumps([[t, n] for t, n in entity], separators=(",", ":"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _form_digest(form: dict[str, Any]) -> tuple[str, dict[str, str]]:
    return _sha256_json(form), {name: _sha256_json(part)[:16] for name, part in form.items()}


def _entry_digests(form: dict[str, Any], limit: int) -> dict[str, dict[str, str]]:
    return {name: {key: _sha256_json(value)[:8] for key, value in part.items()}
            for name, part in form.items() if len(part) <= limit}


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
