"""The controller/broker application of the node process (`KraftApplication`): the quorum controller
on the controller listener, the broker (registration, heartbeats, client APIs, forwarding to the
active controller, controlled shutdown on SIGTERM) on the broker listener, and the API versions each
listener serves."""

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from dataclasses import astuple
from typing import Any, cast

from kio.schema.errors import ErrorCode

from kraftlab.node import metrics as mx
from kraftlab.node.broker import (
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
from kraftlab.node.broker.producer_ids import AllocateIds
from kraftlab.node.broker.replication import AlterIsr, FetchFromLeader, ReplicaManager
from kraftlab.node.broker.security_apis import describe_acls_response
from kraftlab.node.broker.throttle import RequestQuotas
from kraftlab.node.controller import ControllerConfig, QuorumController, Reply, error_response
from kraftlab.node.controller import NotLeader as ControllerNotLeader
from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.client_quotas import REQUEST_PERCENTAGE, resolve
from kraftlab.node.metadata.fanout import FanOut
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import RESOURCE_TOPIC
from kraftlab.node.process.replica_links import ReplicaLinks
from kraftlab.node.process.seam import Appender, NodeContext, StartupError
from kraftlab.node.protocol import envelope
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import MalformedFrame, RequestError
from kraftlab.node.protocol.registry import RequestContext
from kraftlab.node.protocol.served import (
    BROKER_API_VERSIONS,
    CONTROLLER_API_VERSIONS,
    CONTROLLER_READ_API_VERSIONS,
    ENVELOPE_API_VERSIONS,
    RELAYED_API_VERSIONS,
    TOKEN_FORWARDED_API_VERSIONS,
    TOKEN_READ_API_VERSIONS,
)
from kraftlab.node.raft.core import NotLeader
from kraftlab.node.raft.ports import Record, StateMachine
from kraftlab.node.security.acl import AclOperation, ResourceType
from kraftlab.node.security.authorizer import AllowAll
from kraftlab.node.security.bootstrap import BootstrapError, read_bootstrap
from kraftlab.node.security.enforce import Screening, screen
from kraftlab.node.security.token_apis import TOKEN_APIS, describe_delegation_token_response, screen_token_request
from kraftlab.node.security.tokens import TokenConfig, TokenConfigError
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.log_dir_health import directory_ids
from kraftlab.node.storage.log_dir_health import offline as offline_log_dirs
from kraftlab.node.storage.partition import LogConfig, LogManager
from kraftlab.node.storage.partition.clean_shutdown import take_previous_broker_epoch, write_markers
from kraftlab.node.storage.partition.manager import write_checkpoints

log = logging.getLogger("kraft-node")

# ---------------------------------------------------------------------------------------------
# The controller and broker application


APP_TICK_MS = 50
LOG_MAINTENANCE_MS = 1000  # flush.ms and retention, as Kafka's log.retention.check.interval.ms does (5 min there)
LOG_CHECKPOINT_MS = 5000  # recovery points, log start offsets, high-water marks (Kafka: 60 s / 5 s)
LOG_DIR_CHECK_MS = 1000
"""How often a broker checks that its log directories still work (node.storage.log_dir_health)."""
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

    def next_offset(self) -> int:
        return self._appender.next_offset()


def _bootstrap_records(metadata_dir: Any) -> tuple[Any, ...]:
    """What `kraft-node format --add-scram` left for the first active controller (KIP-900)."""
    try:
        return tuple(read_bootstrap(metadata_dir))
    except BootstrapError as e:
        raise StartupError(str(e)) from e


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
        try:
            tokens = TokenConfig.from_properties(config.raw)
        except TokenConfigError as bad:
            raise StartupError(str(bad)) from bad
        self.tokens = tokens
        if config.is_controller:
            self.controller = QuorumController(
                ControllerConfig(
                    node_id=config.node_id,
                    cluster_id=context.cluster_id,
                    session_timeout_ms=config.broker_session_timeout_ms,
                    snapshot_max_new_record_bytes=config.metadata_snapshot_max_new_record_bytes,
                    seed=random.Random(os.urandom(8)).getrandbits(63),
                    bugs=config.bugs,
                    bootstrap_records=_bootstrap_records(config.metadata_log_dir),
                    tokens=tokens,
                ),
                _ControllerWriter(context.appender),
            )
            machines.append(self.controller)
            assert context.controller_apis is not None
            for key, lo, hi in CONTROLLER_API_VERSIONS.values():
                context.controller_apis.register(key, lo, hi, self._controller_request)
            for key, lo, hi in CONTROLLER_READ_API_VERSIONS.values():
                context.controller_apis.register(key, lo, hi, self._controller_read)
            context.controller_apis.register(*ENVELOPE_API_VERSIONS, self._controller_envelope)
        if config.is_broker:
            self.broker_metadata = BrokerMetadata(journal_applies=self.controller is None)
            endpoints = []
            for e in config.broker_listeners:
                adv = config.advertised(e.name) or e
                endpoints.append(BrokerEndpoint(e.name, adv.connect_host(), adv.port))
            # Every log directory is registered (KIP-858), the metadata log's too when log.dirs names
            # it (Kafka's default layout): its directory id is what tells the controller a broker back
            # from a crash on the same disk from one on a reformatted disk. Only the others are
            # watched for failure: losing the metadata log's directory stops the node, as in Kafka.
            registered = directory_ids(config.log_dirs)
            self._log_dirs = {d: i for d, i in registered.items() if d != config.metadata_log_dir}
            self._log_dirs_checked_ms = 0
            try:  # before anything is written: a crash of this life must not look like a clean stop
                previous_epoch = take_previous_broker_epoch(config.log_dirs)
            except OSError as e:
                raise StartupError(f"log dirs: cannot remove the clean-shutdown marker: {e}") from e
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
                    log_dirs=tuple(registered.values()),
                    previous_broker_epoch=previous_epoch,
                )
            )
            self.logs = self._open_partition_logs()
            replicas = ReplicaManager(config.node_id, self.logs, context.clock.wall_ms,
                                      replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                                      broker_epoch=lambda: int(self.lifecycle.broker_epoch),
                                      retry_backoff_ms=max(config.retry_backoff_ms, 50), bugs=config.bugs)
            self.apis = BrokerApis(context.cluster_id, self.broker_metadata, self.lifecycle, replicas=replicas)
            self.replica_links = ReplicaLinks(
                config.node_id, config.inter_broker_listener_name, lambda: self.broker_metadata.image,
                self._timeout_s, self._on_replica_fetch, self._on_replica_fetch_failure,
            )  # fmt: skip
            self._log_maintenance_at = self._log_checkpoint_at = 0
            self._checkpointing = False
            self.request_quotas = RequestQuotas(self._request_percentage)
            machines.append(self.broker_metadata)
            assert context.broker_apis is not None
            for key, lo, hi in BROKER_API_VERSIONS.values():
                context.broker_apis.register(key, lo, hi, self._client_request)
            for key, lo, hi in RELAYED_API_VERSIONS.values():
                context.broker_apis.register(key, lo, hi, self._relay)
            for key, lo, hi in TOKEN_FORWARDED_API_VERSIONS.values():
                context.broker_apis.register(key, lo, hi, self._token_forward)
            context.broker_apis.register(*TOKEN_READ_API_VERSIONS, self._token_describe)
        if not machines:
            raise StartupError("process.roles names neither broker nor controller")
        self.security = context.security
        if self.security is not None:
            self.security.image = self._security_image
            self.security.wall_ms = self.ctx.clock.wall_ms
        self._machine: StateMachine = machines[0] if len(machines) == 1 else FanOut(*machines)

    def _open_partition_logs(self) -> LogManager:
        """The partition logs under log.dirs, recovered (topic settings over the broker's `log.*`)."""
        raw = self.ctx.config.raw
        try:
            LogConfig.resolve(raw)
        except ValueError as e:
            raise StartupError(f"log settings: {e}") from e

        def topic_configs(topic: str) -> dict[str, str]:
            return self.broker_metadata.image.configs.get((RESOURCE_TOPIC, topic), {})

        def config_for(topic: str) -> LogConfig:
            try:
                return LogConfig.resolve(raw, topic_configs(topic))
            except ValueError as e:
                log.warning("topic %s: %s; the broker's log settings apply", topic, e)
                return LogConfig.resolve(raw)

        logs = LogManager(self.ctx.config.log_dirs, config_for)
        try:
            opened = logs.startup(self.ctx.clock.wall_ms())
        except (OSError, ValueError, StorageError) as e:
            raise StartupError(f"partition logs: {e}") from e
        for p in opened:
            damage = p.recovery.damage
            self.ctx.journal.write("partition_recovery", topic=p.topic, partition=p.partition,
                                   log_start_offset=p.log_start_offset, log_end_offset=p.log_end_offset,
                                   hw=p.high_watermark, truncated=damage is not None)
        return logs

    def _maintain_logs(self, now_ms: int) -> None:
        """flush.ms and retention every second; the offset checkpoints every five."""
        if now_ms >= self._log_maintenance_at:
            self._log_maintenance_at = now_ms + LOG_MAINTENANCE_MS
            self.logs.tick(self.ctx.clock.wall_ms())
        if now_ms >= self._log_checkpoint_at and not self._checkpointing:
            self._log_checkpoint_at = now_ms + LOG_CHECKPOINT_MS
            # taken here, written (six fsyncs per log dir) on a thread: not a stall of every request
            values = self.logs.checkpoint_values()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # ticked outside the process's loop
                write_checkpoints(values)
                return
            self._checkpointing = True
            loop.run_in_executor(None, write_checkpoints, values).add_done_callback(self._checkpoint_written)

    def _checkpoint_written(self, future: asyncio.Future[None]) -> None:
        self._checkpointing = False
        error = future.exception()
        if error is None:
            return
        log.warning("partition offset checkpoints not written: %s", error)
        if isinstance(error, OSError) and self.ctx.fail_stop is not None:
            self.ctx.fail_stop(error)  # written on a thread, so the tick's own guard never saw it

    @property
    def state_machine(self) -> StateMachine:
        return self._machine

    def _now(self) -> int:
        return self.ctx.clock.mono_ns() // 1_000_000

    # ---- requests from the listeners -----------------------------------------------------------

    def _wait_s(self, request: Any) -> float:
        """How long a request may take: its own timeout field (CreateTopics, DeleteTopics: the
        client's patience, which an election may well need) or the quorum request timeout."""
        own = getattr(request, "timeout", None)
        own_s = own.total_seconds() if isinstance(own, datetime.timedelta) else 0.0
        return max(self._timeout_s, own_s)

    async def _await_token(self, start: Callable[[int, int], None], request: Any) -> Any:
        self._tokens += 1
        token = self._tokens
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            now = self._now()
            start(token, now)
            self._drain(now)
            return await asyncio.wait_for(future, self._wait_s(request) + 1.0)
        except TimeoutError:
            return error_response(request, ErrorCode.request_timed_out)
        finally:
            self._waiting.pop(token, None)

    # ---- authorization (node.security.enforce) ------------------------------------------------------

    def _security_image(self) -> Any:
        """The image SCRAM logins and authorization read: the broker's, else the controller's committed one."""
        if self.broker_metadata is not None:
            return self.broker_metadata.image
        return self.controller.committed_image if self.controller is not None else None

    def _screen(self, request: Any, context: RequestContext, image: Any, journal: bool) -> Screening:
        check = self._checker(request, context, image, journal)
        security = self.security
        api = api_name(request)
        if api in TOKEN_APIS:
            protocol = security.protocol(context.listener) if security is not None else "PLAINTEXT"
            reply = screen_token_request(api, request, context.principal, protocol, context.token_authenticated, check)
            return Screening(reply=reply) if reply is not None else Screening(request=request)
        authorizer = security.authorizer if security is not None else AllowAll()
        return screen(api, request, check, image, authorizer.enabled)

    def _checker(self, request: Any, context: RequestContext, image: Any,
                 journal: bool) -> Callable[[int, int, str], bool]:
        """The principal's authorization check, its decisions journalled (`authz`) when `journal`."""
        security = self.security
        authorizer = security.authorizer if security is not None else AllowAll()
        host = context.peer.rsplit(":", 1)[0]
        journal = journal and api_name(request) != "Metadata"  # one per topic per Metadata: not journalled

        def check(operation: int, resource_type: int, name: str) -> bool:
            acls = image.acls.values()
            decision = authorizer.authorize(acls, context.principal, host, operation, resource_type, name)
            if journal and decision.reason != "super.users":
                self.ctx.journal.write(
                    "authz", principal=context.principal, host=host, operation=AclOperation(operation).name,
                    resource_type=ResourceType(resource_type).name, resource=name, allowed=decision.allowed,
                    reason=decision.reason, api=api_name(request), offset=self._image_offset(),
                    acl=list(astuple(decision.binding)) if decision.binding is not None else None,
                )
            return decision.allowed

        return check

    def _image_offset(self) -> int:
        if self.broker_metadata is not None:
            return int(self.broker_metadata.highest_offset)
        return int(self.controller.committed_offset) if self.controller is not None else -1

    async def _screened(self, request: Any, context: RequestContext, image: Any, journal: bool,
                        serve: Callable[[Any], Awaitable[Any]]) -> Any:
        screening = self._screen(request, context, image, journal)
        if screening.reply is not None:
            return screening.reply
        return screening.finish(await serve(screening.request))

    async def _controller_request(self, request: Any, context: RequestContext) -> Any:
        async def serve(allowed: Any) -> Any:
            return await self._await_token(
                lambda token, now: self.controller.handle_request(
                    token, allowed, now, principal=context.principal, wall_ms=self.ctx.clock.wall_ms()),
                allowed,
            )

        return await self._screened(request, context, self.controller.committed_image, False, serve)

    async def _controller_envelope(self, request: Any, context: RequestContext) -> Any:
        """A broker's forward of a client's token request: the sender must be a broker (CLUSTER_ACTION,
        as Kafka requires of Envelope), then the inner request is decided for the client's principal
        (the broker screened it: node.security.token_apis)."""
        security = self.security
        if security is not None and not security.allows_on_cluster(context.principal, context.peer):
            return envelope.refuse(ErrorCode.cluster_authorization_failed)
        try:
            inner = envelope.open_envelope(request)
        except MalformedFrame as e:
            log.info("Envelope from %s: %s", context.peer, e)
            return envelope.refuse(ErrorCode.invalid_request)
        if api_name(inner.request) not in TOKEN_FORWARDED_API_VERSIONS:
            return envelope.refuse(ErrorCode.invalid_request)
        response = await self._await_token(
            lambda token, now: self.controller.handle_request(
                token, inner.request, now, principal=inner.principal, wall_ms=self.ctx.clock.wall_ms()),
            inner.request,
        )
        return envelope.seal(response, inner.correlation_id)

    async def _controller_read(self, request: Any, context: RequestContext) -> Any:
        async def serve(allowed: Any) -> Any:
            return describe_acls_response(allowed, self.controller.committed_image)

        return await self._screened(request, context, self.controller.committed_image, False, serve)

    async def _client_request(self, request: Any, context: RequestContext) -> Any:
        cost_ms = 0.0

        async def serve(allowed: Any) -> Any:
            def start(token: int, now: int) -> None:
                nonlocal cost_ms
                began = time.perf_counter()  # the handler's own time, as Kafka meters a request thread's
                with self._log_dir_io():
                    self.apis.handle(token, allowed, now, context.listener or "PLAINTEXT")
                cost_ms = (time.perf_counter() - began) * 1000.0

            return await self._await_token(start, allowed)

        if not self.apis.serves(request, self._now()):  # refused unread (not running, fenced itself):
            # nothing to authorize
            return await serve(request)
        response = await self._screened(request, context, self.broker_metadata.image, True, serve)
        return await self._throttle(response, context, cost_ms)

    def _request_percentage(self, entity: Hashable) -> float | None:
        """The `request_percentage` quota of a (user, client id), from this broker's image."""
        user, client_id = cast(tuple[str, str], entity)
        return resolve(self.broker_metadata.image.client_quotas, user, client_id, REQUEST_PERCENTAGE)

    async def _throttle(self, response: Any, context: RequestContext, cost_ms: float) -> Any:
        """The request-rate quota (`request_percentage`) of the request's user and client id: the
        response carries Kafka's throttle time and is held that long (the client is muted)."""
        principal = str(getattr(context, "principal", "User:ANONYMOUS"))
        user = principal.split(":", 1)[1] if ":" in principal else principal
        throttle_ms = self.request_quotas.record((user, context.client_id or ""), self._now(), cost_ms)
        if throttle_ms <= 0 or response is None or not hasattr(response, "throttle_time"):
            return response
        await asyncio.sleep(throttle_ms / 1000.0)
        return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))

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
                self._to_controller(out.token, out.request, "lifecycle")
            elif isinstance(out, Forward):
                self._to_controller(out.token, out.request, "forward")
            elif isinstance(out, AllocateIds):
                self._to_controller(out.token, out.request, "producer_ids")
            elif isinstance(out, FetchFromLeader):
                self.replica_links.send(out)
            elif isinstance(out, AlterIsr):
                self._to_controller(out.token, out.request, "isr")
        self._update_metrics()

    def _update_metrics(self) -> None:
        if self.controller is None or not self.controller.active:
            return
        brokers = self.controller.committed_image.brokers.values()
        fenced = sum(1 for b in brokers if b.fenced)
        self.ctx.metrics.set(mx.FENCED_BROKERS, fenced)
        self.ctx.metrics.set(mx.UNFENCED_BROKERS, len(brokers) - fenced)

    @contextlib.contextmanager
    def _log_dir_io(self) -> Iterator[None]:
        """Partition logs read and written outside the tick: an I/O error stops the node (the tick's
        own errors are the server's to handle)."""
        try:
            yield
        except OSError as e:
            if self.ctx.fail_stop is not None:
                self.ctx.fail_stop(e)
            raise

    def _on_replica_fetch(self, token: int, response: Any) -> None:
        now = self._now()
        with self._log_dir_io():
            self.apis.replicas.fetcher.on_response(token, response, now)
            self.apis.replicas.fetcher.tick(now)  # the next fetch at once, not at the next tick
        self._drain(now)

    def _on_replica_fetch_failure(self, token: int) -> None:
        now = self._now()
        with self._log_dir_io():
            self.apis.replicas.fetcher.on_failure(token, now)
        self._drain(now)

    def _to_controller(self, token: int, request: Any, kind: str) -> None:
        """`kind`: whose request it is (`lifecycle`, `forward`, `producer_ids`, `isr`), to route the answer."""
        task = asyncio.get_running_loop().create_task(self._exchange(token, request, kind))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _controller_address(self, controller_id: int) -> tuple[str, int] | None:
        if self.ctx.controller_address is not None:
            return self.ctx.controller_address(controller_id)
        voter = self.ctx.config.voter(controller_id)
        return None if voter is None else (voter.host, voter.port)

    def _controller_client(self) -> ProtocolClient | None:
        """A client of the active controller's listener (the Raft leader), or None when unknown."""
        controller_id = self.broker_metadata.controller_id
        if controller_id is None:
            return None
        address = self._controller_address(controller_id)
        if address is None:
            return None
        client = self._clients.get(controller_id)
        if client is not None and (client.host, client.port) != address:
            client = None  # the controller moved (a dynamic quorum's UpdateRaftVoter)
        if client is None:
            client = self._clients[controller_id] = ProtocolClient(
                address[0],
                address[1],
                client_id=f"broker-{self.ctx.config.node_id}",
                request_timeout=self._timeout_s,
                connect_timeout=self._timeout_s,
                login=self.security.controller_client[0] if self.security is not None else None,
                ssl_context=self.security.controller_client[1] if self.security is not None else None,
            )
        return client

    async def _exchange(self, token: int, request: Any, kind: str) -> None:
        client = self._controller_client()
        response: Any = None
        sent = False
        if client is not None:
            try:
                response = await client.send(request, timeout=self._wait_s(request))
            except RequestError as e:
                sent = not e.definite
                log.debug("%s to the controller failed: %s", type(request).__name__, e)
        else:
            await asyncio.sleep(self.ctx.config.retry_backoff_ms / 1000.0)
        now = self._now()
        if kind == "isr":
            if response is not None:
                self.apis.replicas.isr.on_response(token, response, now)
            else:
                self.apis.replicas.isr.on_failure(token, now)
        elif kind == "producer_ids":
            if response is not None:
                self.apis.producer_ids.on_response(token, response, now)
            else:
                self.apis.producer_ids.on_failure(token, now)
        elif kind == "forward":
            # What the wire saw, journalled at the edge (ForwardedOnce): a forward that reached the
            # controller, answered or not, may have taken effect there.
            outcome = "answered" if response is not None else "sent-unanswered" if sent else "not-sent"
            self.ctx.journal.write("forward", fwd=token, api=type(request).__name__, outcome=outcome)
            if response is not None:
                self.apis.on_forward_response(token, response)
            else:
                self.apis.on_forward_failure(token, now, sent=sent)
        elif response is not None:
            self.lifecycle.on_response(token, response, now)
        else:
            self.lifecycle.on_failure(token, now)
        self._drain(now)

    def _screened_for_controller(self, request: Any, context: RequestContext) -> Any:
        """A broker request to pass to the active controller: the client to send it with, or the
        answer already due (the screening's refusal, or NOT_CONTROLLER with no active controller)."""
        if not self.lifecycle.accepting_client_requests():
            raise ConnectionRefusedError("the broker is not serving clients")
        screening = self._screen(request, context, self.broker_metadata.image, True)
        if screening.reply is not None:
            return screening.reply
        client = self._controller_client()
        return client if client is not None else error_response(request, ErrorCode.not_controller)

    async def _relay(self, request: Any, context: RequestContext) -> Any:
        """DescribeQuorum and UnregisterBroker on a broker listener: asked of the active controller
        and its answer returned as is (same API version)."""
        client = self._screened_for_controller(request, context)
        if not isinstance(client, ProtocolClient):
            return client
        try:
            return await client.send(request)
        except RequestError as e:
            return error_response(request, ErrorCode.not_controller if e.definite else ErrorCode.request_timed_out)

    async def _token_forward(self, request: Any, context: RequestContext) -> Any:
        """Create/Renew/ExpireDelegationToken on a broker listener: screened here, then decided by the
        active controller for this client's principal (an Envelope), its answer returned as is."""
        client = self._screened_for_controller(request, context)
        if not isinstance(client, ProtocolClient):
            return client
        wrapped = envelope.wrap(request, context.principal, context.token_authenticated,
                                context.peer.rsplit(":", 1)[0], context.client_id)
        try:
            answer = envelope.unseal(await client.send(wrapped), request)
        except RequestError as e:
            return error_response(request, ErrorCode.not_controller if e.definite else ErrorCode.request_timed_out)
        except MalformedFrame:
            answer = None
        return answer if answer is not None else error_response(request, ErrorCode.unknown_server_error)

    async def _token_describe(self, request: Any, context: RequestContext) -> Any:
        if not self.lifecycle.accepting_client_requests():
            raise ConnectionRefusedError("the broker is not serving clients")
        image = self.broker_metadata.image
        screening = self._screen(request, context, image, True)
        if screening.reply is not None:
            return screening.reply
        check = self._checker(request, context, image, True)
        return describe_delegation_token_response(request, image, context.principal, check, self.tokens.secret_key)

    # ---- time and stop -------------------------------------------------------------------------

    def after_step(self, now_ms: int) -> None:
        if self.apis is not None:
            with self._log_dir_io():  # the partitions take their roles: logs created, truncated
                self.apis.on_metadata(now_ms)
        self._drain(now_ms)

    def tick(self, now_ms: int) -> int | None:
        wanted = now_ms + APP_TICK_MS
        if self.controller is not None:
            self.controller.tick(now_ms, self.ctx.clock.wall_ms())
            due = self.controller.next_deadline_ms()  # 0 while a large fence is under way
            if due is not None:
                wanted = min(wanted, max(due, now_ms))
        if self.lifecycle is not None:
            if now_ms - self._log_dirs_checked_ms >= LOG_DIR_CHECK_MS:
                self._log_dirs_checked_ms = now_ms
                self.lifecycle.report_offline_log_dirs(offline_log_dirs(self._log_dirs))
            self.lifecycle.start(now_ms, restarted=self.ctx.restarted)
            self.lifecycle.tick(now_ms, self.broker_metadata.highest_offset)
            self.apis.tick(now_ms)
            self._maintain_logs(now_ms)
        self._drain(now_ms)
        return wanted

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
        if self.lifecycle is not None:
            for _ in range(200):  # a checkpoint being written on its thread finishes first (same files)
                if not self._checkpointing:
                    break
                await asyncio.sleep(0.01)
            flushed = False
            with contextlib.suppress(OSError):
                self.logs.flush_all(self.ctx.clock.wall_ms())
                self.logs.checkpoint()
                flushed = True
            await self.replica_links.close()
            self.logs.close()
            epoch = int(self.lifecycle.broker_epoch)
            if flushed and epoch >= 0:  # every log flushed and closed: the next life may claim its data
                try:
                    write_markers(self.ctx.config.log_dirs, epoch)
                except OSError as e:
                    log.warning("clean-shutdown marker not written: %s", e)
