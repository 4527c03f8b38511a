"""The node process: asyncio edges (sockets, disk, signals, real time) around the sans-IO Raft core.

`run_node(config)` checks meta.properties, opens storage (log recovery is journalled; a
`LogCorruption` stops the node with a clear error), starts the Raft core through
`node.raft.node.RaftNode` with the state machine the application provides, and then:

- drives the core with the node's clock (`node.clock`) and one timer at the core's `deadline`;
- serves the Raft RPCs on the controller listener (`node.protocol` server, `node.raft.wire`
  mapping), routing each request into the core with a fresh `ref` and answering with the
  response the core emits for that `ref`;
- sends the core's requests to the other voters (one `node.protocol` client per peer) and feeds
  their responses back with the request's `ref`; a failed request is dropped (the core times it out);
- writes the core's journal events, checkpoints the high-water mark, updates metrics;
- on SIGTERM/SIGINT: a leader resigns (EndQuorumEpoch to its successors), then everything closes.

The core makes every storage effect of a step durable before returning it, so messages are sent
as soon as a step returns (the ordering rule: flush first, then send).

Roles: a voter (controller, or broker+controller) takes part in elections; a broker-only node is
an observer that fetches from the leader. What sits on top of Raft is an `Application`: it
supplies the state machine and registers its Kafka APIs on the listeners. `KraftApplication`
(the default) runs the quorum controller and/or the broker (registration, heartbeats, client
APIs, forwarding to the active controller, controlled shutdown on SIGTERM); `CommitLogApplication`
(a trivial state machine that counts and checksums committed records) serves tests of Raft alone.

Test-only append path (`kraftlab.unsafe.test.mode=true`): the controller listener also serves
Produce to `__cluster_metadata` partition 0; the leader appends its records (keys only, null
values, which metadata replay skips) as one batch and answers once they commit.

Sections: the application seam; the controller/broker application; storage; the Raft driver;
transport (Raft RPCs over the Kafka protocol); the process; the test-only append path.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import signal
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from node import metrics as mx
from node.broker import (
    BrokerApis,
    BrokerConfig,
    BrokerEndpoint,
    BrokerLifecycle,
    BrokerMetadata,
    BrokerState,
    ClientReply,
    Forward,
    Refused,
    SendToController,
)
from node.clock import Clock, SkewedClock
from node.config import NodeConfig
from node.controller import ControllerConfig, QuorumController, Reply, error_response
from node.controller import NotLeader as ControllerNotLeader
from node.journal import Journal, JournalWriter
from node.metadata.fanout import FanOut
from node.metadata.journal import JournalEvent
from node.protocol.client import ProtocolClient
from node.protocol.errors import RequestError
from node.protocol.headers import response_schema
from node.protocol.registry import ApiRegistry, RequestContext
from node.protocol.server import ProtocolServer
from node.raft import messages as m
from node.raft import wire
from node.raft.config import RaftConfig
from node.raft.core import Commit, NotLeader, Output, RaftCore, RaftSafetyError
from node.raft.node import RaftNode
from node.raft.ports import Batch, LogCorruption, OffsetAndEpoch, Record, StateMachine, record_crc
from node.storage.batches import decode_batches
from node.storage.errors import StorageError
from node.storage.log import DiskLog
from node.storage.meta_properties import MetaProperties, load_and_validate
from node.storage.quorum_state import FileQuorumStateStore
from node.storage.snapshots import DiskSnapshotStore

log = logging.getLogger("kraft-node")

EXIT_OK = 0
EXIT_FAILED = 1
HW_CHECKPOINT_INTERVAL_S = 1.0
MAX_TIMER_SLEEP_S = 0.1  # re-check at least this often (the clock file may change the rate)
RESIGN_GRACE_S = 0.5
_APPROX_RECORD_BYTES = 64


class StartupError(Exception):
    """The node cannot start; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# The application seam: what sits on top of Raft in this process


class Appender(Protocol):
    """How an application writes to the metadata log: one batch, on the leader only
    (`node.raft.core.NotLeader` otherwise); returns the batch's base offset."""

    def append(self, records: Sequence[Record], now_ms: int) -> int: ...


@dataclass(slots=True)
class NodeContext:
    """What the process hands an application when it builds it."""

    config: NodeConfig
    cluster_id: str
    clock: Clock
    journal: Journal
    metrics: mx.Metrics
    appender: Appender
    controller_apis: ApiRegistry | None
    broker_apis: ApiRegistry | None


class Application(Protocol):
    """The controller/broker side of a node. Built once storage is open, before the core starts."""

    @property
    def state_machine(self) -> StateMachine: ...

    def after_step(self, now_ms: int) -> None:
        """Called after every Raft step the process applied (commits may have completed requests)."""
        ...

    def tick(self, now_ms: int) -> int | None:
        """Time passed; returns the next time (node ms) it wants a tick, or None."""
        ...

    async def stop(self) -> None:
        """Graceful stop (a broker's controlled shutdown); called before the core stops."""
        ...


ApplicationFactory = Callable[[NodeContext], Application]


class CommitLog:
    """The trivial state machine: counts committed records and keeps a running CRC of them.

    Used by tests and by `CommitLogApplication` (a process with no controller or broker logic)."""

    def __init__(self) -> None:
        self.applied_end = 0
        self.records = 0
        self.digest = 0
        self.leader: tuple[int | None, int, bool] = (None, 0, False)

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        self.applied_end = snapshot_id.offset
        self.records = len(records)
        self.digest = 0

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if not batch.control:
                for record in batch.records:
                    self.records += 1
                    self.digest = record_crc(
                        self.digest.to_bytes(4, "big"), record_crc(record.key, record.value).to_bytes(4, "big")
                    )
            self.applied_end = batch.next_offset

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        self.leader = (leader_id, epoch, local_is_leader)

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        return None


class CommitLogApplication:
    """An application with no controller or broker logic: `CommitLog` and nothing else."""

    def __init__(self, context: NodeContext) -> None:
        self._machine = CommitLog()

    @property
    def state_machine(self) -> StateMachine:
        return self._machine

    def after_step(self, now_ms: int) -> None:
        return None

    def tick(self, now_ms: int) -> int | None:
        return None

    async def stop(self) -> None:
        return None


# ---------------------------------------------------------------------------------------------
# The controller and broker application


CONTROLLER_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # name: (api key, min version, max version)
    "BrokerRegistration": (62, 0, 4),
    "BrokerHeartbeat": (63, 0, 1),
    "UnregisterBroker": (64, 0, 0),
    "CreateTopics": (19, 2, 7),
    "DeleteTopics": (20, 1, 6),
    "AlterPartition": (56, 2, 3),
    "AlterPartitionReassignments": (45, 0, 0),
    "ListPartitionReassignments": (46, 0, 0),
    "ElectLeaders": (43, 0, 2),
}
# Client APIs stop at their last non-flexible versions for now: librdkafka 2.x sends flexible Metadata
# requests (v9+) with a tagged field the schema does not define (and, in v12, a field v12 no longer
# has); Kafka skips both, node.protocol's strict decoding closes the connection instead.
BROKER_API_VERSIONS: dict[str, tuple[int, int, int]] = {
    "Metadata": (3, 0, 8),
    "DescribeCluster": (60, 0, 1),
    "CreateTopics": (19, 2, 4),
    "DeleteTopics": (20, 1, 3),
}
RELAYED_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # served by brokers by asking the active controller
    "DescribeQuorum": (55, 1, 1),  # the version node.raft.wire maps
    "UnregisterBroker": (64, 0, 0),
}
APP_TICK_MS = 50
CONTROLLED_SHUTDOWN_WAIT_S = 15.0


class _ControllerWriter:
    """The controller's MetadataWriter over the process's appender (Raft's NotLeader translated)."""

    def __init__(self, appender: Appender) -> None:
        self._appender = appender

    def append(self, records: Sequence[Record], now_ms: int) -> int:
        try:
            return self._appender.append(records, now_ms)
        except NotLeader as e:
            raise ControllerNotLeader(str(e)) from e


class KraftApplication:
    """The quorum controller (controller role) and the broker (broker role) of this process.

    Requests arriving on the listeners get a token and wait for the `Reply`/`ClientReply` the
    cores emit for it; the broker's registrations, heartbeats and forwarded admin requests go to
    the active controller (the Raft leader) on its controller listener."""

    def __init__(self, context: NodeContext) -> None:
        self.ctx = context
        config = context.config
        self._tokens = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._clients: dict[int, ProtocolClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timeout_s = config.request_timeout_ms / 1000.0
        machines: list[StateMachine] = []
        self.controller: Any = None
        self.broker_metadata: Any = None
        self.lifecycle: Any = None
        self.apis: Any = None
        if config.is_controller:
            self.controller = QuorumController(
                ControllerConfig(
                    node_id=config.node_id,
                    cluster_id=context.cluster_id,
                    session_timeout_ms=config.broker_session_timeout_ms,
                    snapshot_max_new_record_bytes=config.metadata_snapshot_max_new_record_bytes,
                    seed=random.Random(os.urandom(8)).getrandbits(63),
                    bugs=config.bugs,
                ),
                _ControllerWriter(context.appender),
            )
            machines.append(self.controller)
            assert context.controller_apis is not None
            for key, lo, hi in CONTROLLER_API_VERSIONS.values():
                context.controller_apis.register(key, lo, hi, self._controller_request)
        if config.is_broker:
            self.broker_metadata = BrokerMetadata(journal_applies=self.controller is None)
            endpoints = []
            for e in config.broker_listeners:
                adv = config.advertised(e.name) or e
                endpoints.append(BrokerEndpoint(e.name, adv.connect_host(), adv.port))
            self.lifecycle = BrokerLifecycle(
                BrokerConfig(
                    node_id=config.node_id,
                    cluster_id=context.cluster_id,
                    incarnation_id=uuid.uuid4(),
                    listeners=tuple(endpoints),
                    heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
                    session_timeout_ms=config.broker_session_timeout_ms,
                    self_fence_timeout_ms=config.broker_self_fence_timeout_ms,
                    retry_backoff_ms=max(config.retry_backoff_ms, 1),
                    bugs=config.bugs,
                )
            )
            self.apis = BrokerApis(context.cluster_id, self.broker_metadata, self.lifecycle)
            machines.append(self.broker_metadata)
            assert context.broker_apis is not None
            for key, lo, hi in BROKER_API_VERSIONS.values():
                context.broker_apis.register(key, lo, hi, self._client_request)
            for key, lo, hi in RELAYED_API_VERSIONS.values():
                context.broker_apis.register(key, lo, hi, self._relay)
        if not machines:
            raise StartupError("process.roles names neither broker nor controller")
        self._machine: StateMachine = machines[0] if len(machines) == 1 else FanOut(*machines)

    @property
    def state_machine(self) -> StateMachine:
        return self._machine

    def _now(self) -> int:
        return self.ctx.clock.mono_ns() // 1_000_000

    # ---- requests from the listeners -----------------------------------------------------------

    async def _await_token(self, start: Callable[[int, int], None], request: Any) -> Any:
        self._tokens += 1
        token = self._tokens
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            now = self._now()
            start(token, now)
            self._drain(now)
            return await asyncio.wait_for(future, self._timeout_s + 1.0)
        except TimeoutError:
            return error_response(request, ErrorCode.request_timed_out)
        finally:
            self._waiting.pop(token, None)

    async def _controller_request(self, request: Any, context: RequestContext) -> Any:
        return await self._await_token(lambda token, now: self.controller.handle_request(token, request, now), request)

    async def _client_request(self, request: Any, context: RequestContext) -> Any:
        return await self._await_token(
            lambda token, now: self.apis.handle(token, request, now, context.listener or "PLAINTEXT"), request
        )

    # ---- outputs -------------------------------------------------------------------------------

    def _resolve(self, token: Any, response: Any = None, error: BaseException | None = None) -> None:
        future = self._waiting.get(token)
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(response)

    def _drain(self, now: int) -> None:
        outputs: list[Any] = []
        if self.controller is not None:
            outputs += self.controller.take_outputs()
        if self.lifecycle is not None:
            outputs += self.lifecycle.take_outputs() + self.apis.take_outputs() + self.broker_metadata.take_outputs()
        for out in outputs:
            if isinstance(out, Reply | ClientReply):
                self._resolve(out.token, out.response)
            elif isinstance(out, Refused):
                self._resolve(out.token, error=ConnectionRefusedError(f"broker refuses requests: {out.reason}"))
            elif isinstance(out, JournalEvent):
                self.ctx.journal.write(out.ev, **out.fields)
            elif isinstance(out, SendToController):
                self._to_controller(out.token, out.request, forward=False)
            elif isinstance(out, Forward):
                self._to_controller(out.token, out.request, forward=True)
        self._update_metrics()

    def _update_metrics(self) -> None:
        if self.controller is None or not self.controller.active:
            return
        brokers = self.controller.committed_image.brokers.values()
        fenced = sum(1 for b in brokers if b.fenced)
        self.ctx.metrics.set(mx.FENCED_BROKERS, fenced)
        self.ctx.metrics.set(mx.UNFENCED_BROKERS, len(brokers) - fenced)

    def _to_controller(self, token: int, request: Any, *, forward: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._exchange(token, request, forward))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _controller_client(self) -> ProtocolClient | None:
        """A client of the active controller's listener (the Raft leader), or None when unknown."""
        controller_id = self.broker_metadata.controller_id
        voter = self.ctx.config.voter(controller_id) if controller_id is not None else None
        if voter is None:
            return None
        client = self._clients.get(voter.node_id)
        if client is None:
            client = self._clients[voter.node_id] = ProtocolClient(
                voter.host,
                voter.port,
                client_id=f"broker-{self.ctx.config.node_id}",
                request_timeout=self._timeout_s,
                connect_timeout=self._timeout_s,
            )
        return client

    async def _exchange(self, token: int, request: Any, forward: bool) -> None:
        client = self._controller_client()
        response: Any = None
        sent = False
        if client is not None:
            try:
                response = await client.send(request)
            except RequestError as e:
                sent = not e.definite
                log.debug("%s to the controller failed: %s", type(request).__name__, e)
        else:
            await asyncio.sleep(self.ctx.config.retry_backoff_ms / 1000.0)
        now = self._now()
        if forward:
            if response is not None:
                self.apis.on_forward_response(token, response)
            else:
                self.apis.on_forward_failure(token, now, sent=sent)
        elif response is not None:
            self.lifecycle.on_response(token, response, now)
        else:
            self.lifecycle.on_failure(token, now)
        self._drain(now)

    async def _relay(self, request: Any, context: RequestContext) -> Any:
        """DescribeQuorum and UnregisterBroker on a broker listener: asked of the active controller
        and its answer returned as is (same API version)."""

        if not self.lifecycle.accepting_client_requests():
            raise ConnectionRefusedError("the broker is not serving clients")
        client = self._controller_client()
        if client is None:
            return error_response(request, ErrorCode.not_controller)
        try:
            return await client.send(request)
        except RequestError as e:
            return error_response(request, ErrorCode.not_controller if e.definite else ErrorCode.request_timed_out)

    # ---- time and stop -------------------------------------------------------------------------

    def after_step(self, now_ms: int) -> None:
        self._drain(now_ms)

    def tick(self, now_ms: int) -> int | None:
        if self.controller is not None:
            self.controller.tick(now_ms)
        if self.lifecycle is not None:
            self.lifecycle.start(now_ms)
            self.lifecycle.tick(now_ms, self.broker_metadata.highest_offset)
            self.apis.tick(now_ms)
        self._drain(now_ms)
        return now_ms + APP_TICK_MS

    async def stop(self) -> None:
        if self.lifecycle is not None:
            self.lifecycle.begin_controlled_shutdown(self._now())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CONTROLLED_SHUTDOWN_WAIT_S):
                    while self.lifecycle.state != BrokerState.SHUTTING_DOWN:
                        self.tick(self._now())
                        await asyncio.sleep(APP_TICK_MS / 1000.0)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()


# ---------------------------------------------------------------------------------------------
# Storage


@dataclass(slots=True)
class Storage:
    meta: MetaProperties
    log: DiskLog
    quorum: FileQuorumStateStore
    snapshots: DiskSnapshotStore

    def close(self) -> None:
        self.log.close()


def journal_corruption(journal: Journal, error: LogCorruption, path: str) -> None:
    """The `corruption` event for damage the node refuses to serve (always below the high-water mark)."""
    journal.write(
        "corruption",
        path=getattr(error, "path", path),
        offset=getattr(error, "offset", -1),
        reason=getattr(error, "reason", str(error)),
        below_hw=True,
    )


def open_storage(config: NodeConfig, journal: Journal) -> Storage:
    """Check meta.properties in every log dir, then open and recover the metadata log."""
    try:
        meta = load_and_validate(config.all_log_dirs, config.node_id)
    except (StorageError, ValueError) as e:
        raise StartupError(f"{e} (format them with `kraft-node format --config ... --cluster-id ...`)") from e
    snapshots = DiskSnapshotStore.in_log_dir(config.metadata_log_dir)
    try:
        disk_log = DiskLog.open(
            config.metadata_log_dir,
            segment_bytes=config.metadata_log_segment_bytes,
            lose_unflushed=config.unsafe_lose_unflushed,
            snapshot_id=snapshots.latest(),
        )
    except LogCorruption as e:
        journal_corruption(journal, e, str(config.metadata_log_dir))
        raise StartupError(f"metadata log corrupt: {e}") from e
    for event in disk_log.recovery.journal_events():
        fields = dict(event)
        journal.write(str(fields.pop("ev")), **fields)
    quorum = FileQuorumStateStore.in_log_dir(
        config.metadata_log_dir, config.bugs, lose_unflushed=config.unsafe_lose_unflushed
    )
    return Storage(meta, disk_log, quorum, snapshots)


# ---------------------------------------------------------------------------------------------
# The Raft driver: one step at a time, outputs applied in order


@dataclass(slots=True)
class _PendingAppend:
    last_offset: int
    future: asyncio.Future[int]


@dataclass(slots=True)
class _Inbound:
    future: asyncio.Future[m.Message]


class RaftDriver:
    """Feeds the core (through `RaftNode`) with events and real time and applies its outputs."""

    def __init__(
        self,
        node: RaftNode,
        clock: Clock,
        journal: Journal,
        metrics: mx.Registry,
        send: Callable[[m.Envelope], None],
    ) -> None:
        self.node = node
        self.core: RaftCore = node.core
        self.clock = clock
        self.journal = journal
        self.metrics = metrics
        self._send = send
        self._queue: list[Output] = []
        self._applying = False
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: int | None = None
        self._inbound: dict[int, _Inbound] = {}
        self._next_ref = 0
        self._appends: list[_PendingAppend] = []
        self._rate = mx.WindowedRate()
        self._last_role: str | None = None
        self._snapshot_offset = 0  # end offset of the latest snapshot (from the core's snapshot events)
        self.failed: BaseException | None = None
        self.stopped = asyncio.Event()
        self.after_step: Callable[[int], None] | None = None
        self.started = False

    def now(self) -> int:
        return self.clock.mono_ns() // 1_000_000

    # ---- steps -------------------------------------------------------------------------------

    def start(self) -> None:
        self._step(lambda now: self.node.start(now))
        self.started = True

    def handle(self, envelope: m.Envelope) -> None:
        self._step(lambda now: self.node.handle(envelope, now))

    def tick(self) -> None:
        self._timer = None
        self._step(lambda now: self.node.tick(now))

    def append(self, records: Sequence[Record]) -> int:
        """Append as leader now (raises NotLeader); returns the base offset."""
        base_holder: list[int] = []

        def step(now: int) -> Output:
            base, out = self.node.append(records, now)
            base_holder.append(base)
            return out

        self._step(step)
        return base_holder[0]

    def resign(self) -> None:
        self._step(lambda now: self.node.resign(now))

    def _step(self, step: Callable[[int], Output]) -> None:
        if self.failed is not None:
            raise RuntimeError("the Raft core has stopped") from self.failed
        try:
            out = step(self.now())
        except (RaftSafetyError, LogCorruption, StorageError, OSError) as e:
            self._fail(e)
            raise
        self._queue.append(out)
        if self._applying:
            return  # a state machine callback appended: its output is applied after this one
        self._applying = True
        try:
            while self._queue:
                self._apply(self._queue.pop(0))
        finally:
            self._applying = False
        if self.after_step is not None:
            self.after_step(self.now())

    def _fail(self, error: BaseException) -> None:
        log.error("stopping: %s", error)
        self.failed = error
        if isinstance(error, LogCorruption):
            journal_corruption(self.journal, error, "metadata log")
        self.stopped.set()

    # ---- outputs -----------------------------------------------------------------------------

    def _apply(self, out: Output) -> None:
        now = self.now()
        for event in out.events:
            fields = dict(event)
            ev = str(fields.pop("ev"))
            self.journal.write(ev, **fields)
            if ev == "role" and fields.get("role") == "candidate":
                self.metrics.inc(mx.RAFT_ELECTIONS)
            elif ev == "snapshot" and fields.get("action") in ("create", "load", "fetch"):
                self._snapshot_offset = max(self._snapshot_offset, int(fields.get("offset", 0)))
        for update in out.updates:
            if isinstance(update, Commit):
                self._on_commit(update.batches, now)
        for envelope in out.messages:
            pending = self._inbound.pop(envelope.ref, None) if isinstance(envelope.ref, int) else None
            if pending is not None and not m.is_request(envelope.message):
                if not pending.future.done():
                    pending.future.set_result(envelope.message)
            else:
                self._send(envelope)
        self._settle_appends(now)
        self._update_gauges(now)
        self._schedule(out.deadline)

    def _on_commit(self, batches: Sequence[Batch], now: int) -> None:
        count = 0
        for batch in batches:
            count += 1
            if self.core.is_leader and not batch.control:
                self.metrics.set(mx.METADATA_COMMIT_LATENCY_MS, max(0, now - batch.append_time_ms))
        self._rate.record(float(now), count)

    def _settle_appends(self, now: int) -> None:
        hw = self.core.high_watermark
        keep: list[_PendingAppend] = []
        for p in self._appends:
            if p.future.done():
                continue
            if p.last_offset < hw:
                p.future.set_result(p.last_offset)
            else:
                keep.append(p)
        self._appends = keep

    def _update_gauges(self, now: int) -> None:
        core = self.core
        g = self.metrics
        g.set(mx.RAFT_EPOCH, core.epoch)
        leader = core.leader_id
        g.set(mx.RAFT_LEADER, -1 if leader is None else leader)
        g.set(mx.RAFT_HIGH_WATERMARK, core.high_watermark)
        g.set(mx.RAFT_LOG_END_OFFSET, core.log.end_offset())
        g.set(mx.METADATA_LAG, max(0, core.high_watermark - core.applied_offset))
        g.set(mx.METADATA_COMMIT_RATE, self._rate.rate(float(now)))
        g.set(mx.METADATA_SNAPSHOT_OFFSET_LAG, core.high_watermark - self._snapshot_offset)
        role = str(core.role)
        if role != self._last_role:
            g.set_role(role)
            self._last_role = role

    # ---- timer -------------------------------------------------------------------------------

    def _schedule(self, deadline: int | None) -> None:
        if self.stopped.is_set():
            return
        now = self.now()
        delay_s = MAX_TIMER_SLEEP_S if deadline is None else max(0.0, (deadline - now) / 1000.0)
        delay_s = min(delay_s, MAX_TIMER_SLEEP_S)
        if self._timer is not None:
            if self._deadline == deadline and deadline is not None:
                return
            self._timer.cancel()
        self._deadline = deadline
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        try:
            self.tick()
        except Exception:
            if self.failed is None:
                log.exception("tick failed")
                self._timer = None
                self._schedule(None)  # never leave the core without a timer

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---- requests from peers, and appends ----------------------------------------------------

    async def request(self, src: int, message: m.Message, timeout_s: float) -> m.Message:
        """Route a request from `src` into the core; wait for the response it emits for it."""
        if not self.started or self.failed is not None:
            raise ConnectionRefusedError("the Raft core is not running")
        self._next_ref += 1
        ref = self._next_ref
        future: asyncio.Future[m.Message] = asyncio.get_running_loop().create_future()
        self._inbound[ref] = _Inbound(future)
        try:
            self.handle(m.Envelope(src, self.core.node_id, message, ref))
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._inbound.pop(ref, None)

    async def append_and_wait(self, records: Sequence[Record], timeout_s: float) -> int:
        """Append as leader and wait until committed; returns the base offset."""
        base = self.append(records)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._appends.append(_PendingAppend(base + len(records) - 1, future))
        self._settle_appends(self.now())
        await asyncio.wait_for(future, timeout_s)
        return base


# ---------------------------------------------------------------------------------------------
# Transport: Raft RPCs over the Kafka protocol


class PeerLinks:
    """One client per voter; requests are sent as tasks and their responses fed back to the core."""

    def __init__(self, config: NodeConfig, cluster_id: str, deliver: Callable[[m.Envelope], None]) -> None:
        self._config = config
        self._cluster_id = cluster_id
        self._deliver = deliver
        self._clients: dict[int, ProtocolClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timeout_s = config.request_timeout_ms / 1000.0

    def _client(self, node_id: int) -> ProtocolClient | None:
        client = self._clients.get(node_id)
        if client is None:
            voter = self._config.voter(node_id)
            if voter is None:
                return None
            client = ProtocolClient(
                voter.host,
                voter.port,
                client_id=f"raft-{self._config.node_id}",
                request_timeout=self._timeout_s,
                connect_timeout=self._timeout_s,
            )
            self._clients[node_id] = client
        return client

    def send(self, envelope: m.Envelope) -> None:
        if not m.is_request(envelope.message):
            log.debug("dropping a response to %s with no waiting request (ref %r)", envelope.dst, envelope.ref)
            return
        client = self._client(envelope.dst)
        if client is None:
            log.warning("no address for node %d: dropping %s", envelope.dst, type(envelope.message).__name__)
            return
        task = asyncio.get_running_loop().create_task(self._exchange(client, envelope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(self, client: ProtocolClient, envelope: m.Envelope) -> None:
        request = wire.request_to_wire(envelope.message, self._cluster_id, envelope.dst)  # type: ignore[arg-type]
        try:
            response = await client.send(request)
        except RequestError as e:
            log.debug("%s to %d failed: %s", type(envelope.message).__name__, envelope.dst, e)
            return
        try:
            message = wire.response_from_wire(response)
        except Exception as e:  # a peer answering nonsense must not stop this node
            log.warning("undecodable %s from %d: %s", type(response).__name__, envelope.dst, e)
            return
        self._deliver(m.Envelope(envelope.dst, envelope.src, message, envelope.ref))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def request_source(message: m.Message) -> int:
    """The node a Raft request came from, as its fields say (-1 for DescribeQuorum, from anyone)."""
    if isinstance(message, m.VoteRequest):
        return message.candidate_id
    if isinstance(message, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        return message.leader_id
    if isinstance(message, m.FetchRequest | m.FetchSnapshotRequest):
        return message.replica_id
    return -1


def refusal(message: m.Message, error: m.Errors, epoch: int) -> m.Response:
    """The core's response type for `message`, carrying only `error` (the core never sees it)."""
    if isinstance(message, m.VoteRequest):
        return m.VoteResponse(error, epoch, None, False, message.pre_vote)
    if isinstance(message, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(error, epoch, None)
    if isinstance(message, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(error, epoch, None)
    if isinstance(message, m.FetchRequest):
        return m.FetchResponse(error, epoch, None)
    if isinstance(message, m.FetchSnapshotRequest):
        return m.FetchSnapshotResponse(error, epoch, None)
    return m.DescribeQuorumResponse(error, None, epoch, -1)


def register_raft_apis(registry: ApiRegistry, driver: RaftDriver, cluster_id: str, timeout_s: float) -> None:
    """Serve Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, each in
    the one version `node.raft.wire` maps. A request naming another cluster id is answered
    INCONSISTENT_CLUSTER_ID without reaching the core (a node of another cluster must not vote)."""

    async def handle(request: Any, context: RequestContext) -> Any:
        message = wire.request_from_wire(request)
        sender_cluster = getattr(request, "cluster_id", None)
        if sender_cluster is not None and sender_cluster != cluster_id:
            log.warning("refusing %s from %s: cluster id %s", type(message).__name__, context.peer, sender_cluster)
            return wire.response_to_wire(refusal(message, m.Errors.INCONSISTENT_CLUSTER_ID, driver.core.epoch))
        response = await driver.request(request_source(message), message, timeout_s)
        return wire.response_to_wire(response)  # type: ignore[arg-type]

    for entity in wire.REQUEST_ENTITIES.values():
        version = int(entity.__version__)
        registry.register(int(entity.__api_key__), version, version, handle)


# ---------------------------------------------------------------------------------------------
# The process


class NodeServer:
    """One node: storage, core, listeners, peers, metrics, journal; `run()` until stopped."""

    def __init__(
        self, config: NodeConfig, application: ApplicationFactory | None = None, clock: Clock | None = None
    ) -> None:
        self.config = config
        self.clock = clock or SkewedClock(config.clock_file)
        assert config.journal_file is not None
        self.journal = JournalWriter(config.journal_file, self.clock, config.node_id)
        self.metrics = mx.Registry()
        self._application_factory: ApplicationFactory = application or KraftApplication
        self._servers: list[ProtocolServer] = []
        self._metrics_server: mx.MetricsServer | None = None
        self._stop = asyncio.Event()
        self.storage: Storage | None = None
        self.driver: RaftDriver | None = None
        self.peers: PeerLinks | None = None
        self.application: Application | None = None
        self._hw_task: asyncio.Task[None] | None = None
        self._app_timer: asyncio.TimerHandle | None = None

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        try:
            await self._start()
        except StartupError as e:
            log.error("%s", e)
            print(f"kraft-node: {e}", file=sys.stderr)
            await self._shutdown(graceful=False)
            return EXIT_FAILED
        except BaseException:
            await self._shutdown(graceful=False)
            raise
        assert self.driver is not None
        stopped = asyncio.ensure_future(self._stop.wait())
        failed = asyncio.ensure_future(self.driver.stopped.wait())
        await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed.cancel()
        error = self.driver.failed
        await self._shutdown(graceful=error is None)
        if error is not None:
            print(f"kraft-node: stopped: {error}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK

    async def _start(self) -> None:
        config = self.config
        if config.bugs:
            log.warning("TEST MODE: planted bugs on: %s", config.bugs)
        storage = self.storage = open_storage(config, self.journal)
        raft_config = RaftConfig(
            election_timeout_ms=config.election_timeout_ms,
            fetch_timeout_ms=config.fetch_timeout_ms,
            election_backoff_max_ms=config.election_backoff_max_ms,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            append_linger_ms=config.append_linger_ms,
        )
        core = RaftCore(
            raft_config,
            config.node_id,
            config.voter_ids,
            storage.log,
            storage.quorum,
            storage.snapshots,
            random.Random(os.urandom(16)),
            roles=sorted(config.roles, reverse=True),
            bugs=config.bugs,
        )
        controller_apis = ApiRegistry() if config.controller_listener is not None else None
        broker_apis = ApiRegistry() if config.is_broker else None
        context = NodeContext(
            config,
            storage.meta.cluster_id,
            self.clock,
            self.journal,
            self.metrics,
            _DriverAppender(self),
            controller_apis,
            broker_apis,
        )
        self.application = self._application_factory(context)
        every = max(1, config.metadata_snapshot_max_new_record_bytes // _APPROX_RECORD_BYTES)
        node = RaftNode(core, self.application.state_machine, snapshot_every_records=every)
        self.peers = PeerLinks(config, storage.meta.cluster_id, self._deliver)
        self.driver = RaftDriver(node, self.clock, self.journal, self.metrics, self.peers.send)
        self.driver.after_step = self.application.after_step
        timeout_s = (config.request_timeout_ms + config.fetch_timeout_ms) / 1000.0
        if controller_apis is not None:
            register_raft_apis(controller_apis, self.driver, storage.meta.cluster_id, timeout_s)
            if config.unsafe_test_mode:
                register_test_append(controller_apis, self.driver, config.request_timeout_ms / 1000.0)
            listener = config.controller_listener
            assert listener is not None
            await self._listen(controller_apis, listener.host, listener.port, listener.name)
        if broker_apis is not None:
            for listener in config.broker_listeners:
                await self._listen(broker_apis, listener.host, listener.port, listener.name)
        if config.metrics_port:
            host = (config.listeners[0].host if config.listeners else "") or "0.0.0.0"
            self._metrics_server = mx.MetricsServer(self.metrics, host, config.metrics_port)
            try:
                await self._metrics_server.start()
            except OSError as e:
                raise StartupError(f"cannot serve metrics on {host}:{config.metrics_port}: {e}") from e
        self.driver.start()
        self._hw_task = asyncio.get_running_loop().create_task(self._checkpoint_loop())
        self._schedule_app_tick()
        log.info(
            "node %d started: roles %s, voters %s, cluster %s",
            config.node_id,
            sorted(config.roles),
            list(config.voter_ids),
            storage.meta.cluster_id,
        )

    async def _listen(self, registry: ApiRegistry, host: str, port: int, name: str) -> None:
        server = ProtocolServer(registry, host or "0.0.0.0", port, listener=name)
        try:
            await server.start()
        except OSError as e:
            raise StartupError(f"cannot listen on {name}://{host}:{port}: {e}") from e
        self._servers.append(server)

    def _deliver(self, envelope: m.Envelope) -> None:
        if self.driver is None or self.driver.failed is not None or self._stop.is_set():
            return
        with contextlib.suppress(RaftSafetyError, LogCorruption, StorageError, OSError):
            self.driver.handle(envelope)

    def _schedule_app_tick(self) -> None:
        if self.application is None or self.driver is None or self._stop.is_set():
            return
        now = self.driver.now()
        wanted: int | None = None
        try:
            wanted = self.application.tick(now)
        except (RaftSafetyError, LogCorruption, StorageError, OSError):
            return  # the driver recorded the failure and stops the node
        except Exception:
            log.exception("application tick failed")  # keep ticking: leases and heartbeats must go on
        delay = MAX_TIMER_SLEEP_S if wanted is None else min(MAX_TIMER_SLEEP_S, max(0, wanted - now) / 1000.0)
        self._app_timer = asyncio.get_running_loop().call_later(delay, self._schedule_app_tick)

    async def _checkpoint_loop(self) -> None:
        assert self.driver is not None and self.storage is not None
        last = -1
        while True:
            await asyncio.sleep(HW_CHECKPOINT_INTERVAL_S)
            hw = self.driver.core.high_watermark
            if hw != last:
                try:
                    self.storage.log.checkpoint_hw(hw)
                    last = hw
                except OSError as e:
                    log.warning("high-water mark checkpoint failed: %s", e)

    async def _shutdown(self, graceful: bool) -> None:
        driver = self.driver
        if self._app_timer is not None:
            self._app_timer.cancel()
        if graceful and self.application is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.application.stop(), 10.0)
        if graceful and driver is not None and driver.failed is None and driver.core.is_leader:
            with contextlib.suppress(Exception):
                driver.resign()
                await asyncio.sleep(RESIGN_GRACE_S)
        if driver is not None:
            driver.stopped.set()
            driver.cancel_timer()
        if self._hw_task is not None:
            self._hw_task.cancel()
            await asyncio.gather(self._hw_task, return_exceptions=True)
        for server in self._servers:
            await server.stop()
        if self.peers is not None:
            await self.peers.close()
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        if self.storage is not None:
            if driver is not None and driver.failed is None:
                with contextlib.suppress(Exception):
                    self.storage.log.flush()
                    self.storage.log.checkpoint_hw(driver.core.high_watermark)
            self.storage.close()
        self.journal.close()


class _DriverAppender:
    """`Appender` over the running driver (the application is built before the driver exists)."""

    def __init__(self, server: NodeServer) -> None:
        self._server = server

    def append(self, records: Sequence[Record], now_ms: int) -> int:
        driver = self._server.driver
        if driver is None:
            raise NotLeader(None, 0)
        return driver.append(records)


# ---------------------------------------------------------------------------------------------
# Test-only append path (kraftlab.unsafe.test.mode=true): Produce to __cluster_metadata-0

PRODUCE_KEY = 0
METADATA_TOPIC = "__cluster_metadata"


def register_test_append(registry: ApiRegistry, driver: RaftDriver, timeout_s: float) -> None:
    """Produce v3..v9 to `__cluster_metadata` partition 0: the records of its batches are appended
    as one batch by the leader and acknowledged once committed (NOT_LEADER_OR_FOLLOWER elsewhere,
    REQUEST_TIMED_OUT when the commit did not happen in time — the append may still commit).
    Records must have a null value (INVALID_RECORD otherwise): metadata replay skips them, so
    test records never reach the controller's image. The key is the test's payload."""

    async def produce(request: Any, context: RequestContext) -> Any:
        mod = sys.modules[response_schema(PRODUCE_KEY, context.api_version).__module__]
        topics = []
        for topic in request.topic_data:
            parts = []
            for part in topic.partition_data:
                error, base = ErrorCode.none, -1
                if topic.name != METADATA_TOPIC or part.index != 0:
                    error = ErrorCode.unknown_topic_or_partition
                else:
                    try:
                        records = [r for b in decode_batches(bytes(part.records or b"")) for r in b.records]
                        if not records or any(r.value is not None for r in records):
                            error = ErrorCode.invalid_record
                        else:
                            base = await driver.append_and_wait(records, timeout_s)
                    except NotLeader:
                        error = ErrorCode.not_leader_or_follower
                    except TimeoutError:
                        error = ErrorCode.request_timed_out
                    except StorageError:
                        error = ErrorCode.corrupt_message
                parts.append(_partition_response(mod, int(part.index), error, base))
            topics.append(mod.TopicProduceResponse(name=topic.name, partition_responses=tuple(parts)))
        return mod.ProduceResponse(responses=tuple(topics))

    registry.register(PRODUCE_KEY, 3, 9, produce)


def _partition_response(mod: Any, index: int, error: Any, base: int) -> Any:
    """A PartitionProduceResponse of the module's version (fields vary across Produce versions)."""

    cls = mod.PartitionProduceResponse
    values = {
        "index": i32(index),
        "error_code": error,
        "base_offset": i64(base),
        "log_append_time": None,
        "log_start_offset": i64(-1),
        "record_errors": (),
        "error_message": None,
    }
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


# ---------------------------------------------------------------------------------------------


def run_node(config: NodeConfig, application: ApplicationFactory | None = None) -> int:
    """`kraft-node start`: run in the foreground until SIGTERM/SIGINT; returns the exit code."""
    logging.basicConfig(
        level=os.environ.get("KRAFT_NODE_LOG", "INFO").upper(),
        format=f"%(asctime)s %(levelname)s [node {config.node_id}] %(name)s: %(message)s",
        stream=sys.stderr,
    )

    async def main() -> int:
        server = NodeServer(config, application or KraftApplication)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.request_stop)
        return await server.run()

    return asyncio.run(main())
