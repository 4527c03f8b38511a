"""The QuorumController: a Raft StateMachine, active on the leader and a hot standby elsewhere.

Every controller replays committed batches into its committed image (`CommittedReplay`). When
its node becomes the Raft leader it claims the epoch and, once its committed image has caught
up to the epoch's first batch (the leader's LeaderChangeMessage), becomes *active*: it copies
the committed image into a "future" image, grants every registered broker a fresh lease, and
writes the bootstrap metadata.version if none is finalized.

An active controller decides a request against the future image (`Write`), appends the records
(one batch for the `ATOMIC_APIS`, bounded batches otherwise: `write.split_batches`), replays
them into the future image at once, and holds the response until the last batch is committed
(a request that wrote nothing waits for everything written before it, so its answer never shows
uncommitted state). Losing leadership (a leader change, or `NotLeader` from
an append) reverts: the future image is dropped and every held request is answered
NOT_CONTROLLER. A standby answers NOT_CONTROLLER at once.

A leader change may arrive *during* an append: the Raft step that takes the records into its
linger buffer may also find its quorum lost and resign, dropping them, and the leader change
reaches this controller before the append returns. Such a write is lost, never held (its
offsets will hold another leader's records): it is answered NOT_CONTROLLER like any write
that loses leadership. And a held write completes only when the batch committed at its last
offset is of the epoch it was appended in.

Outputs accumulate and are collected with `take_outputs()`: `Reply(token, response)` and
`JournalEvent`s (`apply`, `fence`, `decision`, `lease`). The core never reads a clock: time
comes as `now_ms` with requests and ticks.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller import acls, cluster, configs, reassignment, scram, topics
from kraftlab.node.controller import alter_partition as ap
from kraftlab.node.controller.create_partitions import create_partitions
from kraftlab.node.controller.messages import api_name, error_name, respond
from kraftlab.node.controller.ports import (
    METADATA_VERSION,
    METADATA_VERSION_FEATURE,
    ControllerConfig,
    MetadataWriter,
    NotLeader,
    Reply,
)
from kraftlab.node.controller.producer_ids import allocate_producer_ids
from kraftlab.node.controller.quotas import alter_client_quotas
from kraftlab.node.controller.tokens import (
    create_delegation_token,
    expire_delegation_token,
    expire_tokens,
    renew_delegation_token,
)
from kraftlab.node.controller.write import Outcome, Write, split_batches
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import FeatureLevelRecord, to_log_record
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record

Output = Reply | JournalEvent
ATOMIC_APIS = frozenset({
    "CreateTopics", "DeleteTopics", "IncrementalAlterConfigs", "AlterConfigs", "CreateAcls", "DeleteAcls",
    "AlterUserScramCredentials", "CreatePartitions", "AlterClientQuotas", "AllocateProducerIds",
    "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken",
})
"""Requests whose records are committed all or nothing (one batch; their handlers bound the count).
The others (registration, heartbeats with their fences and elections, unregistration, ISR changes,
reassignments, leader elections) may span several batches, as in Kafka."""
Handler = Callable[[Write, Any], Outcome]

CONTROLLER_APIS = (
    "BrokerRegistration",
    "BrokerHeartbeat",
    "UnregisterBroker",
    "CreateTopics",
    "DeleteTopics",
    "AlterPartition",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "ElectLeaders",
    "IncrementalAlterConfigs",
    "AlterConfigs",
    "CreateAcls",
    "DeleteAcls",
    "AlterUserScramCredentials",
    "CreatePartitions",
    "AlterClientQuotas",
    "AllocateProducerIds",
    "CreateDelegationToken",
    "RenewDelegationToken",
    "ExpireDelegationToken",
)


@dataclass
class _Held:
    last_offset: int
    epoch: int | None
    """The leader epoch its records were appended in (None: it wrote none)."""
    token: Any
    request: Any
    response: Any
    decisions: list[dict[str, Any]]


class QuorumController:
    def __init__(self, config: ControllerConfig, log: MetadataWriter) -> None:
        self.config = config
        self.log = log
        self.rng = random.Random(config.seed)
        self.replay = CommittedReplay()
        self.leases = cluster.Leases(config.session_timeout_ms, config.lease_journal_interval_ms)
        self.leader_id: int | None = None
        self.epoch = 0
        self._claimed_epoch: int | None = None
        self._future: MetadataImage | None = None
        self._next_offset = 0
        self._held: deque[_Held] = deque()
        self._needs_activation_work = False
        self._fencing = False
        self._outbox: list[Output] = []
        self._handlers: dict[str, Handler] = {
            "BrokerRegistration": lambda w, r: cluster.register(w, r, self.leases),
            "BrokerHeartbeat": lambda w, r: cluster.heartbeat(w, r, self.leases),
            "UnregisterBroker": lambda w, r: cluster.unregister(w, r, self.leases),
            "CreateTopics": topics.create_topics,
            "DeleteTopics": topics.delete_topics,
            "AlterPartition": ap.alter_partition,
            "AlterPartitionReassignments": reassignment.alter_reassignments,
            "ListPartitionReassignments": lambda w, r: reassignment.list_reassignments(w.image, r),
            "ElectLeaders": reassignment.elect_leaders,
            "IncrementalAlterConfigs": configs.incremental_alter_configs,
            "AlterConfigs": configs.alter_configs,
            "CreateAcls": acls.create_acls,
            "DeleteAcls": acls.delete_acls,
            "AlterUserScramCredentials": scram.alter_user_scram_credentials,
            "CreatePartitions": create_partitions,
            "AlterClientQuotas": alter_client_quotas,
            "AllocateProducerIds": allocate_producer_ids,
            "CreateDelegationToken": create_delegation_token,
            "RenewDelegationToken": renew_delegation_token,
            "ExpireDelegationToken": expire_delegation_token,
        }
        self._token_sweep_ms: int | None = None
        """Wall-clock time of the last expired-token sweep (None: not yet, since activation)."""

    # ---- queries -------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._future is not None

    @property
    def committed_image(self) -> MetadataImage:
        return self.replay.image

    @property
    def future_image(self) -> MetadataImage:
        """The uncommitted state when active, else the committed one."""
        return self._future if self._future is not None else self.replay.image

    @property
    def committed_offset(self) -> int:
        """Exclusive end offset of the committed metadata applied here."""
        return self.replay.next_offset

    def held_requests(self) -> int:
        return len(self._held)

    def next_deadline_ms(self) -> int | None:
        """When the driver should call `tick` next at the latest (the earliest lease expiry)."""
        if self._future is None:
            return None
        if self._fencing:
            return 0  # a fence is half done: as soon as possible (other events may run in between)
        return self.leases.next_expiry_ms(self._future)

    def take_outputs(self) -> list[Output]:
        out, self._outbox = self._outbox, []
        return out

    # ---- StateMachine --------------------------------------------------------------------

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        if self.active:
            self._renounce()
        self.replay.load_snapshot(snapshot_id, records)
        self._outbox.extend(self.replay.take_events())  # its `image` line now, not with the next commit

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            self.replay.apply_batch(batch)
            self._outbox.extend(self.replay.take_events())
            self._release_committed(batch)
            if self._claimed_epoch is not None and batch.epoch >= self._claimed_epoch:
                self._activate()
        self._release_committed()

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        if self.active or self._claimed_epoch is not None:
            self._renounce()
        self.leader_id, self.epoch = leader_id, epoch
        if local_is_leader:
            self._claimed_epoch = epoch
            if self.replay.last_epoch >= epoch:
                self._activate()

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        return self.replay.snapshot_records()

    def snapshot_due(self) -> bool:
        """True once `snapshot_max_new_record_bytes` of records were applied since the last snapshot."""
        return self.replay.new_bytes >= self.config.snapshot_max_new_record_bytes

    # ---- activity ------------------------------------------------------------------------

    def _activate(self) -> None:
        self._claimed_epoch = None
        self._token_sweep_ms = None
        self._future = self.replay.image.copy()
        self._next_offset = self.replay.next_offset
        self.leases = cluster.Leases(self.config.session_timeout_ms, self.config.lease_journal_interval_ms)
        self._needs_activation_work = True

    def _renounce(self) -> None:
        self._fencing = False
        if self._future is not None and self.config.bugs.on("no-revert-on-resign"):
            # BUG ZOO: no-revert-on-resign (KAFKA-13114) — the uncommitted state stays in the standby's image.
            self.replay.image = self._future
        self._claimed_epoch = None
        self._future = None
        self.leases = cluster.Leases(self.config.session_timeout_ms, self.config.lease_journal_interval_ms)
        while self._held:
            held = self._held.popleft()
            self._fail(held.token, held.request, held.decisions)

    def _fail(self, token: Any, request: Any, decisions: Sequence[dict[str, Any]]) -> None:
        """Answer a write whose records will never commit NOT_CONTROLLER (and journal its decisions so)."""
        self._reply_error(token, request, ErrorCode.not_controller)
        for d in decisions:
            self._outbox.append(JournalEvent("decision", {**d, "error": error_name(ErrorCode.not_controller)}))

    def _activation_work(self, now_ms: int) -> None:
        """First thing with a clock after activation: fresh leases, bootstrap metadata.version."""
        if not self._needs_activation_work or self._future is None:
            return
        self._needs_activation_work = False
        events: list[JournalEvent] = []
        for b in sorted(self._future.brokers):
            if self.config.bugs.on("forget-leases-on-failover"):
                break  # BUG ZOO: forget-leases-on-failover (KAFKA-18138) — inherited brokers get no lease
            self.leases.touch(b, now_ms, events)
        self._outbox.extend(events)
        if METADATA_VERSION_FEATURE not in self._future.features:
            w = self._write(now_ms)
            w.emit(FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=METADATA_VERSION))
            for record in self.config.bootstrap_records:
                w.emit(record)
            self._commit_write(w)

    def _write(self, now_ms: int, atomic: bool = True, principal: str = "User:ANONYMOUS",
               wall_ms: int | None = None) -> Write:
        assert self._future is not None
        # the log's own next offset: Raft appends control records (voter changes) the controller
        # never wrote, and a record that names its own offset (a broker epoch) must name the real one
        self._next_offset = max(self._next_offset, self.log.next_offset())
        return Write(self._future, self.config, now_ms, self._next_offset, self.rng, atomic,
                     principal=principal, wall_ms=now_ms if wall_ms is None else wall_ms)

    def _commit_write(self, w: Write) -> int | None:
        """Append the write's records; the last offset written so far, or None if leadership is lost.

        The write's fence events are journalled now, with `offset`: the log position from which
        they are in effect (a checker orders them against decisions by it, since decisions are
        journalled later, when their records commit)."""
        last: int | None = self._next_offset - 1
        if w.records:
            records = [to_log_record(r) for r in w.records]
            future = self._future
            try:
                for chunk in [records] if w.atomic else split_batches(records):
                    base = self.log.append(chunk, w.now_ms)
                    if self._future is not future:
                        # Leadership was lost within the append (the Raft step that took the records
                        # resigned and dropped them): they will never commit at these offsets.
                        raise NotLeader()
                    self._next_offset = base + len(chunk)
            except NotLeader:
                last = None
            else:
                last = self._next_offset - 1
        self._outbox.extend(JournalEvent(e.ev, {**e.fields, "offset": last}) for e in w.events)
        if last is None:
            self._renounce()
        return last

    # ---- inputs --------------------------------------------------------------------------

    def tick(self, now_ms: int, wall_ms: int | None = None) -> None:
        """Lease expiry: fence brokers whose session timed out; and, every
        `delegation.token.expiry.check.interval.ms` of the wall clock, remove expired tokens."""
        if self._future is None:
            return
        self._activation_work(now_ms)
        if self._future is None:
            return
        w = self._write(now_ms, atomic=False)
        self._fencing = not cluster.fence_expired(w, self.leases, self.config.fence_changes_per_tick)
        if self._commit_write(w) is None:
            return
        self._sweep_tokens(now_ms, now_ms if wall_ms is None else wall_ms)

    def _sweep_tokens(self, now_ms: int, wall_ms: int) -> None:
        if self._token_sweep_ms is None:
            self._token_sweep_ms = wall_ms
        if wall_ms - self._token_sweep_ms < self.config.tokens.expiry_check_interval_ms:
            return
        self._token_sweep_ms = wall_ms
        w = self._write(now_ms, wall_ms=wall_ms)
        expire_tokens(w)
        self._commit_write(w)

    def handle_request(self, token: Any, request: Any, now_ms: int, *, principal: str = "User:ANONYMOUS",
                       wall_ms: int | None = None) -> None:
        """Decide a controller API request; its Reply comes out once the decision is committed.
        `principal`: who asked (the delegation token APIs act for it); `wall_ms`: the wall clock."""
        api = api_name(request)
        handler = self._handlers.get(api)
        if handler is None:
            self._reply_error(token, request, ErrorCode.unsupported_version)
            return
        self._activation_work(now_ms)
        if self._future is None:
            self._reply_error(token, request, ErrorCode.not_controller)
            return
        w = self._write(now_ms, atomic=api in ATOMIC_APIS, principal=principal, wall_ms=wall_ms)
        outcome = handler(w, request)
        response = respond(request, outcome.values)
        last = self._commit_write(w)
        if last is None:
            self._fail(token, request, outcome.decisions)
            return
        if self.config.bugs.on("respond-before-commit"):
            # BUG ZOO: respond-before-commit — answer now, before the batch is committed.
            self._outbox.append(Reply(token, response))
            self._outbox.extend(JournalEvent("decision", {**d, "offset": last}) for d in outcome.decisions)
            return
        epoch = self.epoch if w.records else None
        self._held.append(_Held(last, epoch, token, request, response, outcome.decisions))
        self._release_committed()

    def _release_committed(self, batch: Batch | None = None) -> None:
        """Answer the held writes committed now (`batch`: the batch just committed, if one was)."""
        while self._held and self._held[0].last_offset < self.replay.next_offset:
            held = self._held.popleft()
            if (batch is not None and held.epoch is not None and batch.epoch != held.epoch
                    and batch.base_offset <= held.last_offset):
                # Another leader's records were committed at its offsets: its own were lost.
                self._fail(held.token, held.request, held.decisions)
                continue
            self._outbox.append(Reply(held.token, held.response))
            self._outbox.extend(JournalEvent("decision", {**d, "offset": held.last_offset}) for d in held.decisions)

    def _reply_error(self, token: Any, request: Any, code: ErrorCode) -> None:
        self._outbox.append(Reply(token, error_response(request, code)))


def error_response(request: Any, code: ErrorCode) -> Any:
    """The response of `request`'s API and version carrying `code` wherever it has an error.

    Top-level `error_code` when the API has one; otherwise the code on every named item (topics of
    CreateTopics/DeleteTopics, resources of the config APIs), as Kafka does for NOT_CONTROLLER.
    """
    api = api_name(request)
    if api == "CreateTopics":
        return respond(request, {"topics": [{"name": t.name, "error_code": code} for t in request.topics]})
    if api == "DeleteTopics":
        if hasattr(request, "topics"):
            items = [{"name": t.name, "topic_id": t.topic_id, "error_code": code} for t in request.topics]
        else:
            items = [{"name": n, "error_code": code} for n in request.topic_names]
        return respond(request, {"responses": items})
    if api == "ElectLeaders":  # as Kafka's ElectLeadersRequest.getErrorResponse: on every partition asked too (v0
        # has no top-level code: without them its client would read "nothing to elect")
        results = [{"topic": tp.topic, "partition_result": [{"partition_id": pid, "error_code": code}
                                                            for pid in tp.partitions]}
                   for tp in request.topic_partitions or ()]
        return respond(request, {"error_code": code, "replica_election_results": results})
    if api == "AlterClientQuotas":
        return respond(request, {"entries": [{"error_code": code, "entity": [
            {"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity]} for e in request.entries]})
    if api == "CreatePartitions":
        return respond(request, {"results": [{"name": t.name, "error_code": code} for t in request.topics]})
    if api in ("IncrementalAlterConfigs", "AlterConfigs"):
        items = [
            {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_code": code}
            for r in request.resources
        ]
        return respond(request, {"responses": items})
    if api == "CreateAcls":
        return respond(request, {"results": [{"error_code": code}] * len(request.creations)})
    if api == "DeleteAcls":
        return respond(request, {"filter_results": [{"error_code": code}] * len(request.filters)})
    if api == "AlterUserScramCredentials":
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return respond(request, {"results": [{"user": u, "error_code": code} for u in users]})
    return respond(request, {"error_code": code, "producer_id_start": -1, "producer_id": -1})  # no id: -1, as Kafka
