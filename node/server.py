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

The parts live in `node.process`: the application seam (`seam`), the controller/broker application
(`application`), `CommitLog` (`commit_log`), storage opening (`storage`), the Raft driver
(`driver`) and the Raft transport (`transport`). This module assembles them: `NodeServer`,
`run_node` and the test-only append path.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import logging
import os
import random
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from kraftlab.node import metrics as mx
from kraftlab.node.clock import Clock, SkewedClock
from kraftlab.node.config import ConfigError, NodeConfig
from kraftlab.node.journal import JournalWriter
from kraftlab.node.process.application import KraftApplication
from kraftlab.node.process.driver import MAX_TIMER_SLEEP_S, RaftDriver
from kraftlab.node.process.seam import Application, ApplicationFactory, NodeContext, StartupError
from kraftlab.node.process.storage import Storage, open_storage
from kraftlab.node.process.transport import PeerLinks, bootstrap_peer_id, register_raft_apis
from kraftlab.node.process.voter_changes import register_voter_change_apis
from kraftlab.node.protocol.headers import response_schema
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.protocol.server import ProtocolServer
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import NotLeader, RaftCore, RaftSafetyError
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import LogCorruption, OffsetAndEpoch, Record
from kraftlab.node.raft.retention import RetentionPolicy
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.security.listeners import NodeSecurity
from kraftlab.node.security.session import register_sasl_apis
from kraftlab.node.storage.batches import decode_batches
from kraftlab.node.storage.errors import StorageError

log = logging.getLogger("kraft-node")

EXIT_OK = 0
EXIT_FAILED = 1
HW_CHECKPOINT_INTERVAL_S = 1.0
RESIGN_GRACE_S = 0.5
HALT_AFTER_S = 5.0
"""How long a node that fail-stopped may take to shut down before it halts (exits at once)."""
_APPROX_RECORD_BYTES = 64


# ---------------------------------------------------------------------------------------------
# The process


class NodeServer:
    """One node: storage, core, listeners, peers, metrics, journal; `run()` until stopped."""

    def __init__(
        self, config: NodeConfig, application: ApplicationFactory | None = None, clock: Clock | None = None,
        halt: Callable[[int], object] = os._exit,
    ) -> None:
        self.config = config
        self._halt = halt
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
        self.security: NodeSecurity | None = None

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
        except OSError as e:  # its disk failed while it recovered from it: refuse, never serve from it
            self.journal.write("log_dir_failed", error=f"{type(e).__name__}: {e}",
                               errno=errno.errorcode.get(e.errno or 0), path=e.filename, during="startup")
            log.error("I/O error while starting: %s", e)
            print(f"kraft-node: I/O error while recovering its storage, not starting: {e}", file=sys.stderr)
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
        if error is None:
            await self._shutdown(graceful=True)
            return EXIT_OK
        # Fail-stop: the node must stop serving now (as Kafka halts on a failed metadata log dir): its
        # listeners stop and their connections are cut first, before any step of the shutdown that may
        # take its time (seed 2 of kill,disk-errors: a broker answered requests 3.7 s after its failure
        # while its shutdown went on), and the shutdown is bounded: a peer link or a flush that does not
        # end in time must not keep the rest of the process alive.
        for server in self._servers:
            server.abort()
        shutdown = asyncio.ensure_future(self._shutdown(graceful=False))
        done, _ = await asyncio.wait({shutdown}, timeout=HALT_AFTER_S)
        print(f"kraft-node: stopped: {error}", file=sys.stderr)
        if not done:
            log.error("shutdown did not finish within %.0f s after a failure: halting", HALT_AFTER_S)
            self.journal.close()
            self._halt(EXIT_FAILED)
        return EXIT_FAILED

    async def _start(self) -> None:
        config = self.config
        # before any disk I/O: an I/O error met while opening the storage belongs to this process life
        self.journal.write("launch", pid=os.getpid())
        if config.bugs:
            log.warning("TEST MODE: planted bugs on: %s", config.bugs)
        try:
            self.security = NodeSecurity.from_config(config)
        except ConfigError as e:
            raise StartupError(str(e)) from e
        storage = self.storage = open_storage(config, self.journal)
        raft_config = RaftConfig(
            election_timeout_ms=config.election_timeout_ms,
            fetch_timeout_ms=config.fetch_timeout_ms,
            election_backoff_max_ms=config.election_backoff_max_ms,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            append_linger_ms=config.append_linger_ms,
            retention=RetentionPolicy(config.metadata_max_retention_bytes, config.metadata_max_retention_ms),
        )
        dynamic = config.is_dynamic_quorum
        if dynamic and storage.meta.directory_id is None:
            raise StartupError(
                f"{config.metadata_log_dir}/meta.properties has no directory.id: a dynamic quorum knows its "
                "voters by directory id (format the directory again with this version of kraft-node format)"
            )
        core = RaftCore(
            raft_config,
            config.node_id,
            # A dynamic quorum (KIP-853): no configured voters; the set comes from the bootstrap
            # checkpoint, snapshots and the log, and the bootstrap servers say where the quorum is.
            VoterSet([]) if dynamic else config.voter_ids,
            storage.log,
            storage.quorum,
            storage.snapshots,
            random.Random(os.urandom(16)),
            roles=sorted(config.roles, reverse=True),
            bugs=config.bugs,
            directory_id=storage.meta.directory_id,
            bootstrap=tuple(bootstrap_peer_id(i) for i in range(len(config.bootstrap_servers))) if dynamic else (),
        )
        controller_apis = ApiRegistry() if config.controller_listener is not None else None
        broker_apis = ApiRegistry() if config.is_broker else None
        for registry in (controller_apis, broker_apis):
            if registry is not None:
                register_sasl_apis(registry)
        context = NodeContext(
            config,
            storage.meta.cluster_id,
            self.clock,
            self.journal,
            self.metrics,
            _DriverAppender(self),
            controller_apis,
            broker_apis,
            # (The bootstrap checkpoint 0-0 of a dynamic quorum is no sign of an earlier start.)
            restarted=storage.log.end_offset() > 0 or (storage.snapshots.latest() or OffsetAndEpoch(0, 0)).offset > 0,
            security=self.security,
            controller_address=self._peer_address if dynamic else None,
            fail_stop=self._fail_stop,
        )
        self.application = self._application_factory(context)
        every = max(1, config.metadata_snapshot_max_new_record_bytes // _APPROX_RECORD_BYTES)
        node = RaftNode(core, self.application.state_machine, snapshot_every_records=every)
        self.peers = PeerLinks(
            config, storage.meta.cluster_id, self._deliver, self.security, voters_of=lambda: core.voter_set
        )
        self.driver = RaftDriver(node, self.clock, self.journal, self.metrics, self.peers.send)
        self.driver.after_step = self.application.after_step
        timeout_s = (config.request_timeout_ms + config.fetch_timeout_ms) / 1000.0
        if controller_apis is not None:
            register_raft_apis(controller_apis, self.driver, storage.meta.cluster_id, timeout_s, self.security)
            register_voter_change_apis(controller_apis, self.driver, storage.meta.cluster_id, self.security)
            if config.unsafe_test_mode:
                register_test_append(controller_apis, self.driver, config.request_timeout_ms / 1000.0)
            listener = config.controller_listener
            assert listener is not None
            await self._listen(controller_apis, listener.host, listener.port, listener.name)
        if broker_apis is not None:
            for listener in config.broker_listeners:
                await self._listen(broker_apis, listener.host, listener.port, listener.name)
        if config.metrics_port is not None:
            await self._serve_metrics(config.metrics_port)
        self.driver.start()
        # Everything loaded so far (modules, the image of the latest snapshot) lives as long as the
        # process: out of the garbage collector's sight, a full collection no longer rescans it.
        gc.freeze()
        self._hw_task = asyncio.get_running_loop().create_task(self._checkpoint_loop())
        self._schedule_app_tick()
        log.info(
            "node %d started: roles %s, voters %s, cluster %s",
            config.node_id,
            sorted(config.roles),
            list(core.voters),
            storage.meta.cluster_id,
        )

    async def _serve_metrics(self, port: int) -> None:
        """Prometheus `/metrics` on the first listener's host; port 0 takes a free one. The address
        is logged and journalled (`metrics`), where `kraftlab lab status` finds it."""
        config = self.config
        host = (config.listeners[0].host if config.listeners else "") or "0.0.0.0"
        self._metrics_server = mx.MetricsServer(self.metrics, host, port)
        try:
            await self._metrics_server.start()
        except OSError as e:
            raise StartupError(f"cannot serve metrics on {host}:{port}: {e}") from e
        shown = f"[{host}]" if ":" in host else host
        address = f"http://{shown}:{self._metrics_server.port}/metrics"
        log.info("metrics on %s", address)
        self.journal.write("metrics", address=address)

    async def _listen(self, registry: ApiRegistry, host: str, port: int, name: str) -> None:
        security = self.security
        server = ProtocolServer(
            registry,
            host or "0.0.0.0",
            port,
            listener=name,
            guard_factory=security.guard_factory(name) if security is not None else None,
            ssl_context=security.ssl_context(name) if security is not None else None,
        )
        try:
            await server.start()
        except OSError as e:
            raise StartupError(f"cannot listen on {name}://{host}:{port}: {e}") from e
        self._servers.append(server)

    def _peer_address(self, node_id: int) -> tuple[str, int] | None:
        return self.peers.address(node_id) if self.peers is not None else None

    def _deliver(self, envelope: m.Envelope) -> None:
        if self.driver is None or self.driver.failed is not None or self._stop.is_set():
            return
        with contextlib.suppress(RaftSafetyError, LogCorruption, StorageError, OSError):
            self.driver.handle(envelope)

    def _fail_stop(self, error: OSError) -> None:
        if self.driver is not None and self.driver.failed is None:
            log.error("log dir I/O failed: %s", error)
            self.driver.fail_stop(error)

    def _schedule_app_tick(self) -> None:
        if self.application is None or self.driver is None or self._stop.is_set():
            return
        now = self.driver.now()
        wanted: int | None = None
        try:
            wanted = self.application.tick(now)
        except (RaftSafetyError, LogCorruption, StorageError, OSError) as e:
            if isinstance(e, OSError) and self.driver.failed is None:
                # the application's own write failed (the partition logs' offset checkpoints or flushes
                # under log.dirs): without its ticks the node would be half alive (no heartbeats, Raft
                # going on), so it stops like on a failed metadata log write
                log.error("log dir write failed: %s", e)
                self.driver.fail_stop(e)
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
                    # two fsyncs: on a thread, not in the event loop (a stall of every Raft step)
                    await asyncio.get_running_loop().run_in_executor(None, self.storage.log.checkpoint_hw, hw)
                    last = hw
                except OSError as e:  # Kafka halts on a failed checkpoint of its metadata log dir
                    log.error("high-water mark checkpoint failed: %s", e)
                    self.driver.fail_stop(e)
                    return

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
            driver.close()  # the flush thread ends (a flush under way completes) before the log closes
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

    def next_offset(self) -> int:
        driver = self._server.driver
        return 0 if driver is None else driver.next_offset()


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
