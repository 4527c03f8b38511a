"""The checker's own model of the metadata image (KIP-631), rebuilt record by record from decoded
committed records, and the rules each record must keep given the state before it.

Replay follows Kafka's semantics: a registration of a new incarnation replaces the old one (which
is then retired: it may not register again while the id stays registered; an unregistration
frees the id and forgets its retired incarnations), a PartitionChangeRecord bumps the partition epoch
and, when it sets the leader (anything but -2), the leader epoch; fence, unfence and registration
changes touch only the broker; removing a topic removes its partitions and its configs.

`semantic_form()` is the image in the canonical shape of docs/contracts.md; the node journals the
SHA-256 of the same shape of its own image (`image` events), and the checker compares the two.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.metadata.decode import NO_LEADER_CHANGE, Decoded

NO_LEADER = -1
RESOURCE_TOPIC = 2


RULES: dict[str, str] = {
    "ZombieRegistered": "a broker never registers again with an incarnation a newer registration replaced",
    "BrokerEpochMonotonic": "a broker's epoch only grows across its registrations",
    "BrokerEpochIsRecordOffset": "a registration's broker epoch is the offset of its RegisterBrokerRecord",
    "RegistersFenced": "a new registration starts fenced",
    "NamesCurrentRegistration": "fence, unfence, unregister, registration changes and producer id blocks name the "
                                "broker's current epoch",
    "FencedLeavesIsr": "a broker is out of every ISR before its FenceBrokerRecord",
    "NoIneligibleLeader": "after a fence or unregistration no partition is led by that broker",
    "TopicNameUnique": "a topic name is created only while no topic has it",
    "TopicIdUnique": "a topic id is never reused",
    "PartitionOfLiveTopic": "partition records name an existing topic and partition",
    "PartitionCreatedOnce": "a PartitionRecord creates a partition that does not exist",
    "PartitionsContiguous": "a topic's partitions are numbered 0..n-1: a new one (CreateTopics, CreatePartitions) "
                            "takes the next number",
    "ReplicasRegistered": "a new partition's replicas are registered brokers",
    "LeaderEligible": "a new leader is registered, unfenced and not shutting down",
    "ReplicaOnFailedDirectory": "no replica on a log directory its broker reported failed leads or joins an ISR",
    "LeaderFromIsr": "a new leader comes from the ISR (or the last known ELR): no unclean election",
    "IsrJoinersEligible": "brokers that join an ISR are eligible (INELIGIBLE_REPLICA otherwise)",
    "ChangeChangesSomething": "a PartitionChangeRecord changes the partition",
    "RemovesLiveTopic": "a RemoveTopicRecord names an existing topic",
    "ConfigOfLiveTopic": "a topic config is set on an existing topic",
    "ReplicasValid": "replicas are non-empty and distinct",
    "IsrWithinReplicas": "the ISR is distinct replicas",
    "LeaderInIsr": "a partition's leader is in its ISR",
    "RemovesLiveQuota": "a ClientQuotaRecord removal names a quota the entity has",
    "RemovesLiveToken": "a RemoveDelegationTokenRecord names a delegation token that exists",
    "RecordApplies": "every record type has a meaning in the image",
    "AclIdUnique": "an AccessControlEntryRecord's id names no ACL already stored",
    "RemovesLiveAcl": "a RemoveAccessControlEntryRecord names a stored ACL",
    "RemovesLiveCredential": "a RemoveUserScramCredentialRecord names a stored credential",
    "ProducerIdsGrow": "a ProducerIdsRecord's next producer id is above every earlier one: no block is granted twice",
}
"""The rules a committed record must keep given the image before it (docs/contracts.md lists them)."""


UNASSIGNED_DIR = str(uuid.UUID(int=0))


@dataclass
class Broker:
    epoch: int
    incarnation: str
    fenced: bool
    in_controlled_shutdown: bool
    rack: str | None
    endpoints: list[list[Any]]
    features: list[list[Any]]
    log_dirs: list[str] = field(default_factory=list)
    """Its online log directories (KIP-858); a failed one is no longer listed."""

    @property
    def eligible(self) -> bool:
        """May lead a partition or join an ISR (KIP-631: registered, unfenced, not shutting down)."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass
class Partition:
    replicas: list[int]
    isr: list[int]
    removing: list[int]
    adding: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: list[int] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)

    def directory(self, broker: int) -> str:
        return self.directories[self.replicas.index(broker)] \
            if self.directories and broker in self.replicas else UNASSIGNED_DIR


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The producer ids [start, end) a committed ProducerIdsRecord granted to a broker."""

    offset: int
    broker: int
    broker_epoch: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Breach:
    """A record that broke a rule: the rule's name and what happened, in Kafka's words."""

    rule: str
    explanation: str


class ImageModel:
    """Brokers, topics, partitions, configs and features, as the committed records make them."""

    def __init__(self) -> None:
        self.brokers: dict[int, Broker] = {}
        self.retired: dict[int, set[str]] = {}
        self.max_epoch: dict[int, int] = {}
        self.topics: dict[str, str] = {}  # name → topic id
        self.topic_names: dict[str, str] = {}  # topic id → name
        self.ever_topic_ids: set[str] = set()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.partition_count: dict[str, int] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.acls: dict[str, list[Any]] = {}
        self.scram: dict[str, dict[str, Any]] = {}
        self.client_quotas: dict[str, dict[str, float]] = {}
        self.next_producer_id: int | None = None
        self.producer_id_blocks: list[ProducerIdBlock] = []
        self.delegation_tokens: dict[str, dict[str, Any]] = {}
        """Every block the replayed ProducerIdsRecords granted, in log order."""

    # ---- the canonical form --------------------------------------------------------------------

    def semantic_form(self) -> dict[str, Any]:
        return {
            "brokers": {str(bid): {
                "epoch": b.epoch, "incarnation": b.incarnation, "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown, "rack": b.rack,
                "endpoints": sorted(b.endpoints), "features": sorted(b.features),
                "replaced_incarnations": sorted(self.retired.get(bid, ())),
            } for bid, b in self.brokers.items()},
            "topics": dict(self.topics),
            "partitions": {f"{tid}/{pid}": {
                "replicas": p.replicas, "isr": p.isr, "removing": p.removing, "adding": p.adding,
                "leader": p.leader, "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                "elr": p.elr,
            } for (tid, pid), p in self.partitions.items()},
            "configs": {f"{rtype}/{name}": dict(entries) for (rtype, name), entries in self.configs.items()},
            "features": dict(self.features),
            **({"acls": {k: list(v) for k, v in self.acls.items()}} if self.acls else {}),
            **({"scram": {k: dict(v) for k, v in self.scram.items()}} if self.scram else {}),
            **({"client_quotas": {e: dict(v) for e, v in self.client_quotas.items()}} if self.client_quotas else {}),
            **({"producer_ids": {"next_producer_id": self.next_producer_id}}
               if self.next_producer_id is not None else {}),
            **({"delegation_tokens": {k: dict(v) for k, v in self.delegation_tokens.items()}}
               if self.delegation_tokens else {}),
        }

    def digest(self) -> tuple[str, dict[str, str]]:
        """The whole form's digest and each section's (first 16 hex digits), as the node journals them."""
        form = self.semantic_form()
        return digest_of(form), {name: digest_of(part)[:16] for name, part in form.items()}

    # ---- replay with rules ---------------------------------------------------------------------

    def apply(self, rec: Decoded, offset: int, snapshot: bool = False) -> list[Breach]:
        """Apply one record; the rules it broke given the state before it (none are judged for a
        snapshot's records, which describe a state rather than a change)."""
        handler = getattr(self, "_" + rec.type, None)
        if handler is None:
            return [Breach("RecordApplies", f"offset {offset}: {rec.type} has no meaning in the metadata image")]
        breaches: list[Breach] = handler(rec.fields, offset, snapshot)
        return [] if snapshot else breaches

    def _RegisterBrokerRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        out: list[Breach] = []
        bid, inc, epoch = f["broker_id"], f["incarnation_id"], f["broker_epoch"]
        old = self.brokers.get(bid)
        if inc in self.retired.get(bid, ()):
            out.append(Breach("ZombieRegistered", f"offset {offset}: broker {bid} registered again with incarnation "
                                                  f"{inc}, which a newer registration had replaced"))
        if epoch <= self.max_epoch.get(bid, -1):
            out.append(Breach("BrokerEpochMonotonic", f"offset {offset}: broker {bid} registered with broker epoch "
                                                      f"{epoch}, not above its earlier {self.max_epoch[bid]}"))
        if not snapshot and epoch != offset:
            out.append(Breach("BrokerEpochIsRecordOffset", f"offset {offset}: broker {bid} got broker epoch {epoch}; "
                                                           "a registration's epoch is the offset of its record"))
        if not snapshot and not f["fenced"]:
            out.append(Breach("RegistersFenced", f"offset {offset}: broker {bid} registered unfenced; a new "
                                                 "registration starts fenced until its heartbeat shows it caught up"))
        if old is not None and old.incarnation != inc:
            self.retired.setdefault(bid, set()).add(old.incarnation)
        self.retired.setdefault(bid, set()).update(f.get("replaced_incarnations") or [])
        if not self.retired.get(bid):
            self.retired.pop(bid, None)
        self.max_epoch[bid] = max(self.max_epoch.get(bid, -1), epoch)
        self.brokers[bid] = Broker(epoch, inc, f["fenced"], f["in_controlled_shutdown"], f["rack"],
                                   [[e["name"], e["host"], e["port"], e["security_protocol"]] for e in f["endpoints"]],
                                   [[x["name"], x["min"], x["max"]] for x in f["features"]],
                                   list(f.get("log_dirs") or []))
        return out

    def _on_failed_dir(self, p: Partition, broker: int) -> bool:
        b = self.brokers.get(broker)
        d = p.directory(broker)
        return b is not None and bool(b.log_dirs) and d != UNASSIGNED_DIR and d not in b.log_dirs

    def _failed_dir_breaches(self, p: Partition, members: list[int], label: str, offset: int) -> list[Breach]:
        bad = [b for b in members if b != NO_LEADER and self._on_failed_dir(p, b)]
        if not bad:
            return []
        return [Breach("ReplicaOnFailedDirectory", f"offset {offset}: {label} made {bad} leader or ISR member, but "
                                                   f"{'its replica is' if len(bad) == 1 else 'their replicas are'} on "
                                                   "a log directory the broker reported failed")]

    def _at_epoch(self, bid: int, epoch: int, offset: int, what: str) -> tuple[Broker | None, list[Breach]]:
        b = self.brokers.get(bid)
        if b is None or b.epoch != epoch:
            now = "not registered" if b is None else f"at broker epoch {b.epoch}"
            return None, [Breach("NamesCurrentRegistration", f"offset {offset}: {what} names broker {bid} at broker "
                                                              f"epoch {epoch}, but it is {now}")]
        return b, []

    def _UnregisterBrokerRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        b, out = self._at_epoch(f["broker_id"], f["broker_epoch"], offset, "UnregisterBrokerRecord")
        if b is not None:
            del self.brokers[f["broker_id"]]
            self.retired.pop(f["broker_id"], None)  # the id is free again (docs/contracts.md)
            out += self._no_ineligible_leaders(offset, "UnregisterBrokerRecord")
        return out

    def _FenceBrokerRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        b, out = self._at_epoch(f["broker_id"], f["broker_epoch"], offset, "FenceBrokerRecord")
        if b is not None:
            b.fenced = True
            out += self._no_ineligible_leaders(offset, "FenceBrokerRecord")
            bid = f["broker_id"]
            still = sorted(f"{self.topic_names.get(t, t)}-{p}" for (t, p), x in self.partitions.items() if bid in x.isr)
            if still:
                out.append(Breach("FencedLeavesIsr", f"offset {offset}: broker {bid} fenced while still in the ISR of "
                                                     f"{', '.join(still[:5])}{' …' if len(still) > 5 else ''} (Kafka "
                                                     "removes it from every ISR before the FenceBrokerRecord)"))
        return out

    def _UnfenceBrokerRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        b, out = self._at_epoch(f["broker_id"], f["broker_epoch"], offset, "UnfenceBrokerRecord")
        if b is not None:
            b.fenced = False
        return out

    def _BrokerRegistrationChangeRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        b, out = self._at_epoch(f["broker_id"], f["broker_epoch"], offset, "BrokerRegistrationChangeRecord")
        if b is not None:
            if f["fenced"] == 1:
                b.fenced = True
            elif f["fenced"] == -1:
                b.fenced = False
            if f["in_controlled_shutdown"] == 1:
                b.in_controlled_shutdown = True
            if f.get("log_dirs") is not None:
                b.log_dirs = list(f["log_dirs"])
                out += self._left_failed_dirs(f["broker_id"], offset)
        return out

    def _left_failed_dirs(self, bid: int, offset: int) -> list[Breach]:
        """Once a broker's registration no longer names a directory, none of its replicas there
        leads or is in an ISR, whatever its role was (Kafka's handleDirectoriesOffline moves them
        all before it writes the BrokerRegistrationChangeRecord)."""
        still = sorted(f"{self.topic_names.get(t, t)}-{n}" for (t, n), x in self.partitions.items()
                       if (bid == x.leader or bid in x.isr) and self._on_failed_dir(x, bid))
        if not still:
            return []
        return [Breach("FailedDirectoryLeavesIsr", f"offset {offset}: broker {bid}'s directories shrank while its "
                                                   f"replicas there still lead or are in the ISR of "
                                                   f"{', '.join(still[:5])}{' …' if len(still) > 5 else ''}")]

    def _TopicRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        out = []
        name, tid = f["name"], f["topic_id"]
        if name in self.topics:
            out.append(Breach("TopicNameUnique", f"offset {offset}: topic {name} created again while topic id "
                                                 f"{self.topics[name]} still exists (TOPIC_ALREADY_EXISTS)"))
        if tid in self.ever_topic_ids:
            out.append(Breach("TopicIdUnique", f"offset {offset}: topic id {tid} reused for {name}"))
        self.topics[name] = tid
        self.topic_names[tid] = name
        self.ever_topic_ids.add(tid)
        return out

    def _PartitionRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        tid, pid = f["topic_id"], f["partition_id"]
        if tid not in self.topic_names:
            return [Breach("PartitionOfLiveTopic", f"offset {offset}: a partition {pid} of unknown topic id {tid}")]
        label = f"{self.topic_names[tid]}-{pid}"
        out = []
        if (tid, pid) in self.partitions:
            out.append(Breach("PartitionCreatedOnce", f"offset {offset}: PartitionRecord for existing {label}"))
        else:
            count = self.partition_count.get(tid, 0)
            if pid != count and not snapshot:  # a snapshot may list partitions in any order
                out.append(Breach("PartitionsContiguous", f"offset {offset}: {label} created while the topic has "
                                                          f"{count} partition(s): the next one is number {count}"))
            self.partition_count[tid] = count + 1
        p = Partition(f["replicas"], f["isr"], f["removing"], f["adding"], f["leader"], f["leader_epoch"],
                      f["partition_epoch"], f["last_known_elr"], list(f.get("directories") or []))
        self.partitions[(tid, pid)] = p
        out += self._partition_state(p, label, offset, "PartitionRecord")
        if not snapshot:
            out += self._failed_dir_breaches(p, [p.leader, *p.isr], label, offset)
        unknown = [r for r in p.replicas if r not in self.brokers]
        if unknown:
            out.append(Breach("ReplicasRegistered", f"offset {offset}: {label} placed on unregistered brokers "
                                                    f"{unknown}"))
        if p.leader != NO_LEADER and p.leader in self.brokers and not self.brokers[p.leader].eligible:
            out.append(Breach("LeaderEligible", f"offset {offset}: {label} created with leader {p.leader}, which is "
                                                f"{self._why_ineligible(p.leader)}"))
        return out

    def _PartitionChangeRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        tid, pid = f["topic_id"], f["partition_id"]
        p = self.partitions.get((tid, pid))
        if p is None:
            return [Breach("PartitionOfLiveTopic", f"offset {offset}: PartitionChangeRecord for unknown partition "
                                                   f"{self.topic_names.get(tid, tid)}-{pid}")]
        label = f"{self.topic_names.get(tid, tid)}-{pid}"
        before = Partition(list(p.replicas), list(p.isr), list(p.removing), list(p.adding), p.leader,
                           p.leader_epoch, p.partition_epoch, list(p.elr), list(p.directories))
        for key, attr in (("isr", "isr"), ("replicas", "replicas"), ("removing", "removing"), ("adding", "adding"),
                          ("last_known_elr", "elr")):
            if f[key] is not None:
                setattr(p, attr, list(f[key]))
        if f.get("directories") is not None:
            p.directories = list(f["directories"])
        elif f["replicas"] is not None and before.directories:  # staying replicas keep theirs, new ones: none
            p.directories = [before.directory(r) for r in p.replicas]
        if f["leader"] != NO_LEADER_CHANGE:
            p.leader, p.leader_epoch = f["leader"], p.leader_epoch + 1
        p.partition_epoch += 1
        out = self._partition_state(p, label, offset, "PartitionChangeRecord")
        if f["leader"] not in (NO_LEADER_CHANGE, NO_LEADER) and f["leader"] != before.leader \
                and not self._eligible(f["leader"]):
            out.append(Breach("LeaderEligible", f"offset {offset}: {label}'s leadership moved from {before.leader} to "
                                                f"{f['leader']}, which is {self._why_ineligible(f['leader'])} (unclean "
                                                "leader election is off)"))
        new_leader = f["leader"]
        if new_leader not in (NO_LEADER_CHANGE, NO_LEADER, before.leader) \
                and new_leader not in (*before.isr, *before.elr, *before.adding):
            out.append(Breach("LeaderFromIsr", f"offset {offset}: {label}'s new leader {new_leader} was not in its "
                                               f"ISR {before.isr} (nor its last known ELR {before.elr}): an unclean "
                                               "election"))
        moved_in = [b for b in p.isr if b not in before.isr]
        if new_leader not in (NO_LEADER_CHANGE, before.leader):
            moved_in.insert(0, new_leader)
        out += self._failed_dir_breaches(p, moved_in, label, offset)
        joined = [b for b in p.isr if b not in before.isr and not self._eligible(b)]
        if joined:
            out.append(Breach("IsrJoinersEligible", f"offset {offset}: {label}'s ISR grew by {joined}, which "
                                                    f"{'is' if len(joined) == 1 else 'are'} "
                                                    f"{self._why_ineligible(joined[0])} (INELIGIBLE_REPLICA)"))
        moved_dirs = f.get("directories") is not None and list(f["directories"]) != before.directories
        if all(f[k] is None for k in ("isr", "replicas", "removing", "adding", "last_known_elr")) \
                and f["leader"] in (NO_LEADER_CHANGE, before.leader) and not moved_dirs:
            out.append(Breach("ChangeChangesSomething", f"offset {offset}: a PartitionChangeRecord for {label} that "
                                                        "changes nothing (it only bumps the partition epoch)"))
        return out

    def _RemoveTopicRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        tid = f["topic_id"]
        name = self.topic_names.pop(tid, None)
        if name is None:
            return [Breach("RemovesLiveTopic", f"offset {offset}: RemoveTopicRecord for unknown topic id {tid}")]
        del self.topics[name]
        for key in [k for k in self.partitions if k[0] == tid]:
            del self.partitions[key]
        self.partition_count.pop(tid, None)
        self.configs.pop((RESOURCE_TOPIC, name), None)
        return []

    def _ConfigRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        key = (f["resource_type"], f["resource_name"])
        out = []
        if key[0] == RESOURCE_TOPIC and key[1] not in self.topics:
            out.append(Breach("ConfigOfLiveTopic", f"offset {offset}: config {f['name']} set on topic {key[1]}, "
                                                   "which does not exist"))
        if f["value"] is None:
            entries = self.configs.get(key, {})
            entries.pop(f["name"], None)
            if not entries:
                self.configs.pop(key, None)
        else:
            self.configs.setdefault(key, {})[f["name"]] = f["value"]
        return out

    def _FeatureLevelRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        if f["feature_level"] == 0:
            self.features.pop(f["name"], None)
        else:
            self.features[f["name"]] = f["feature_level"]
        return []

    def _AccessControlEntryRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        out = []
        if f["id"] in self.acls:
            out.append(Breach("AclIdUnique", f"offset {offset}: ACL {f['id']} is created again"))
        self.acls[f["id"]] = [f["resource_type"], f["resource_name"], f["pattern_type"], f["principal"], f["host"],
                              f["operation"], f["permission_type"]]
        return out

    def _RemoveAccessControlEntryRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        if self.acls.pop(f["id"], None) is None:
            return [Breach("RemovesLiveAcl",
                           f"offset {offset}: RemoveAccessControlEntryRecord for unknown ACL {f['id']}")]
        return []

    def _UserScramCredentialRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        self.scram[f"{f['name']}/{f['mechanism']}"] = {
            "salt": f["salt"], "stored_key": f["stored_key"], "server_key": f["server_key"],
            "iterations": f["iterations"],
        }
        return []

    def _RemoveUserScramCredentialRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        if self.scram.pop(f"{f['name']}/{f['mechanism']}", None) is None:
            return [Breach("RemovesLiveCredential", f"offset {offset}: no SCRAM credential of {f['name']!r} "
                                                    f"(mechanism {f['mechanism']}) to remove")]
        return []

    def _ClientQuotaRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        entity = json.dumps(sorted([t, n] for t, n in f["entity"]), separators=(",", ":"))
        out = []
        if f["remove"]:
            values = self.client_quotas.get(entity, {})
            if f["key"] not in values:
                out.append(Breach("RemovesLiveQuota", f"offset {offset}: quota {f['key']} removed from {entity}, "
                                                      "which did not have it"))
            values.pop(f["key"], None)
            if not values:
                self.client_quotas.pop(entity, None)
        else:
            self.client_quotas.setdefault(entity, {})[f["key"]] = f["value"]
        return out

    def _ProducerIdsRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        before = self.next_producer_id or 0
        out: list[Breach] = []
        if self.next_producer_id is not None and f["next_producer_id"] <= before:
            out.append(Breach("ProducerIdsGrow", f"offset {offset}: a ProducerIdsRecord for broker {f['broker_id']} "
                                                 f"sets the next producer id to {f['next_producer_id']}, not above "
                                                 f"{before}: the ids from {f['next_producer_id']} on were granted "
                                                 "before and will be granted again"))
        if not snapshot:
            out += self._at_epoch(f["broker_id"], f["broker_epoch"], offset, "ProducerIdsRecord")[1]
            self.producer_id_blocks.append(ProducerIdBlock(offset, f["broker_id"], f["broker_epoch"], before,
                                                           f["next_producer_id"]))
        grows = self.next_producer_id is None or f["next_producer_id"] > before
        self.next_producer_id = f["next_producer_id"] if grows else before  # the node refuses a step back too
        return out

    def _DelegationTokenRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        self.delegation_tokens[f["token_id"]] = {k: v for k, v in f.items() if k != "token_id"}
        return []

    def _RemoveDelegationTokenRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        if self.delegation_tokens.pop(f["token_id"], None) is None:
            return [Breach("RemovesLiveToken", f"offset {offset}: no delegation token {f['token_id']!r} to remove")]
        return []

    def _NoOpRecord(self, f: dict[str, Any], offset: int, snapshot: bool) -> list[Breach]:
        return []

    # ---- state rules ---------------------------------------------------------------------------

    def _eligible(self, bid: int) -> bool:
        b = self.brokers.get(bid)
        return b is not None and b.eligible

    def _why_ineligible(self, bid: int) -> str:
        b = self.brokers.get(bid)
        if b is None:
            return "not registered"
        return "fenced" if b.fenced else "in controlled shutdown" if b.in_controlled_shutdown else "eligible"

    def _partition_state(self, p: Partition, label: str, offset: int, what: str) -> list[Breach]:
        out = []
        if len(set(p.replicas)) != len(p.replicas) or not p.replicas:
            out.append(Breach("ReplicasValid", f"offset {offset}: {what} leaves {label} with replicas {p.replicas}"))
        if len(set(p.isr)) != len(p.isr) or not set(p.isr) <= set(p.replicas):
            out.append(Breach("IsrWithinReplicas", f"offset {offset}: {what} leaves {label} with ISR {p.isr} outside "
                                                   f"its replicas {p.replicas}"))
        if p.leader != NO_LEADER and p.leader not in p.isr:
            out.append(Breach("LeaderInIsr", f"offset {offset}: {what} leaves {label} led by {p.leader}, outside its "
                                             f"ISR {p.isr}"))
        return out

    def _no_ineligible_leaders(self, offset: int, what: str) -> list[Breach]:
        bad = sorted(f"{self.topic_names.get(t, t)}-{p} (leader {x.leader})" for (t, p), x in self.partitions.items()
                     if x.leader != NO_LEADER and x.leader not in self.brokers)
        bad += sorted(f"{self.topic_names.get(t, t)}-{p} (leader {x.leader})" for (t, p), x in self.partitions.items()
                      if x.leader in self.brokers and self.brokers[x.leader].fenced)
        if not bad:
            return []
        return [Breach("NoIneligibleLeader", f"offset {offset}: after the {what}, {', '.join(bad[:5])}"
                                             f"{' …' if len(bad) > 5 else ''} still led by a fenced or unregistered "
                                             "broker (Kafka moves leadership away first)")]


def digest_of(form: Any) -> str:
    """SHA-256 of a semantic form (or one section of it) as sorted, compact JSON (docs/contracts.md).
    Written here, not imported from the node: the checker shares no code with what it judges."""
    return hashlib.sha256(json.dumps(form, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def diff_sections(a: dict[str, Any], b: dict[str, Any], limit: int = 4) -> list[str]:
    """Up to `limit` differences between two semantic forms, in words: which entry, and its two values."""
    out: list[str] = []
    for section in sorted(set(a) | set(b)):
        x, y = a.get(section, {}), b.get(section, {})
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                out.append(f"{section} {key}: {json.dumps(x.get(key), sort_keys=True)} vs "
                           f"{json.dumps(y.get(key), sort_keys=True)}")
                if len(out) >= limit:
                    return out
    return out
