"""The broker's lifecycle (KIP-631 / KIP-500): registration, heartbeats, self-fencing, shutdown.

States: NOT_RUNNING → STARTING (registering, catching up with metadata) → RECOVERY (the
controller says its metadata caught up; log recovery, trivial here) → RUNNING (the controller
unfenced it) → PENDING_CONTROLLED_SHUTDOWN (SIGTERM: heartbeats carry WantShutDown) →
SHUTTING_DOWN (the controller answered ShouldShutDown, or the broker never registered, or a
fatal registration error).

The broker registers with its incarnation id (retrying on any error but the fatal
INCONSISTENT_CLUSTER_ID / UNSUPPORTED_VERSION), then heartbeats every
`heartbeat_interval_ms` (faster, every `startup_heartbeat_ms`, until RUNNING and while
shutting down), one request in flight at a time. A heartbeat answered STALE_BROKER_EPOCH or
BROKER_ID_NOT_REGISTERED makes it register again. When it has not had a successful answer
from the controller quorum for longer than `self_fence_timeout_ms` (longer than the
controller's session timeout, so the controller fences it first) it fences itself: it refuses
new client requests until a heartbeat succeeds again (journal `FENCED_SELF`/`UNFENCED_SELF`).

Sans-IO: outputs are `SendToController(token, request)` (the driver sends it to the active
controller and calls `on_response` or `on_failure` with the same token) and `JournalEvent`s.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Feature, Listener
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i64, u16

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.controller.ports import METADATA_VERSION, METADATA_VERSION_FEATURE
from kraftlab.node.metadata.journal import JournalEvent


class BrokerState(enum.Enum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    """A fresh random id per process start (chosen at the edge; the core stays deterministic)."""
    listeners: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    heartbeat_interval_ms: int = 2000
    session_timeout_ms: int = 9000
    self_fence_timeout_ms: int = 0
    """0 = session timeout + 2 heartbeat intervals; must exceed the session timeout."""
    startup_heartbeat_ms: int = 100
    retry_backoff_ms: int = 100
    features: tuple[tuple[str, int, int], ...] = ((METADATA_VERSION_FEATURE, METADATA_VERSION, METADATA_VERSION),)
    bugs: BugSet = NO_BUGS
    """Test-only planted bugs (node.bugs, the bug zoo); none by default."""
    log_dirs: tuple[uuid.UUID, ...] = ()
    """The directory ids of its log directories (registered as LogDirs, KIP-858)."""
    previous_broker_epoch: int = -1
    """The broker epoch its log directories' clean-shutdown markers name (PreviousBrokerEpoch,
    KIP-966; node.storage.partition.clean_shutdown), -1 when the last stop was not clean."""

    @property
    def effective_self_fence_timeout_ms(self) -> int:
        t = self.self_fence_timeout_ms or self.session_timeout_ms + 2 * self.heartbeat_interval_ms
        if t <= self.session_timeout_ms:
            raise ValueError("the broker's self-fence timeout must be longer than the session timeout")
        return t


@dataclass(frozen=True, slots=True)
class SendToController:
    token: int
    request: Any


@dataclass
class _InFlight:
    token: int
    kind: str
    sent_ms: int


@dataclass
class BrokerLifecycle:
    config: BrokerConfig
    state: BrokerState = BrokerState.NOT_RUNNING
    broker_epoch: int = -1
    fenced_by_controller: bool = True
    self_fenced: bool = False
    fatal_error: str | None = None
    recovery_done: bool = True
    """Set False to hold the broker in RECOVERY until `finish_recovery` (log recovery)."""
    offline_log_dirs: set[uuid.UUID] = field(default_factory=set)
    """Log directories that failed (`report_offline_log_dirs`), named in every heartbeat."""
    _restarted: bool = False
    _tokens: int = 0
    _in_flight: _InFlight | None = None
    _next_send_ms: int = 0
    _last_ok_ms: int | None = None
    _journalled_failure_ms: int | None = None
    _outbox: list[SendToController | JournalEvent] = field(default_factory=list)

    # ---- queries --------------------------------------------------------------------------

    def take_outputs(self) -> list[SendToController | JournalEvent]:
        out, self._outbox = self._outbox, []
        return out

    def accepting_client_requests(self) -> bool:
        return self.state in (BrokerState.RUNNING, BrokerState.PENDING_CONTROLLED_SHUTDOWN) and not self.self_fenced

    def serving_reads(self) -> bool:
        """Whether read-only requests (Metadata, DescribeConfigs, DescribeAcls, …) are answered from
        this broker's image: exactly when client requests are accepted."""
        running = self.state in (BrokerState.RUNNING, BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        if running and self.self_fenced and self.config.bugs.on("stale-acls-while-fenced"):  # BUG ZOO: reads go on
            return True
        return self.accepting_client_requests()

    def next_deadline_ms(self) -> int:
        return self._next_send_ms

    # ---- transitions ----------------------------------------------------------------------

    def _set_state(self, state: BrokerState) -> None:
        if state != self.state:
            self.state = state
            self._journal(state.name)

    def _journal(self, state: str) -> None:
        self._outbox.append(JournalEvent("broker_state", {"broker": self.config.node_id, "state": state}))

    def _journal_heartbeat(self, ok: bool, now_ms: int) -> None:
        """`heartbeat`: every successful answer of the quorum, and failures (at most one a second),
        after the self-fence check, so a checker can tell how long the broker served unheard."""
        if not ok:
            if self._journalled_failure_ms is not None and now_ms - self._journalled_failure_ms < 1000:
                return
            self._journalled_failure_ms = now_ms
        fields = {"broker": self.config.node_id, "ok": ok, "self_fence_ms": self.config.effective_self_fence_timeout_ms}
        self._outbox.append(JournalEvent("heartbeat", fields))

    def start(self, now_ms: int, *, restarted: bool = False) -> None:
        """`restarted`: the process found an existing metadata log (not the broker's first start)."""
        if self.state != BrokerState.NOT_RUNNING:
            return
        self._restarted = restarted
        self._set_state(BrokerState.STARTING)
        self._next_send_ms = now_ms

    def finish_recovery(self, now_ms: int) -> None:
        self.recovery_done = True
        self._next_send_ms = min(self._next_send_ms, now_ms)

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """SIGTERM: ask the controller to move leaderships away, then shut down."""
        if self.state in (BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN):
            return
        if self.broker_epoch < 0 or self.state == BrokerState.NOT_RUNNING:
            self._set_state(BrokerState.SHUTTING_DOWN)
            return
        self._set_state(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        self._next_send_ms = now_ms

    # ---- time -----------------------------------------------------------------------------

    def tick(self, now_ms: int, metadata_offset: int) -> None:
        """`metadata_offset`: the highest metadata offset this broker has applied (-1 if none)."""
        if self.state in (BrokerState.NOT_RUNNING, BrokerState.SHUTTING_DOWN):
            return
        self._check_self_fence(now_ms)
        if self.state == BrokerState.SHUTTING_DOWN or self._in_flight is not None or now_ms < self._next_send_ms:
            return
        if self.broker_epoch < 0:
            self._send(now_ms, "register", self._registration())
        else:
            self._send(now_ms, "heartbeat", self._heartbeat(metadata_offset))

    def check_self_fence(self, now_ms: int) -> None:
        """Fence itself now if the quorum has been silent past the bound: before a request is served,
        so one that waited in a socket while the process was paused is not served from a stale image."""
        if self.state not in (BrokerState.NOT_RUNNING, BrokerState.SHUTTING_DOWN):
            self._check_self_fence(now_ms)

    def _check_self_fence(self, now_ms: int) -> None:
        if self._last_ok_ms is None or self.config.bugs.on("no-self-fencing"):  # BUG ZOO: never self-fence
            return
        silent = now_ms - self._last_ok_ms
        if silent > self.config.effective_self_fence_timeout_ms:
            if not self.self_fenced:
                self.self_fenced = True
                self._journal("FENCED_SELF")
            if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
                self._set_state(BrokerState.SHUTTING_DOWN)  # nobody left to ask

    def _send(self, now_ms: int, kind: str, request: Any) -> None:
        self._tokens += 1
        self._in_flight = _InFlight(self._tokens, kind, now_ms)
        self._outbox.append(SendToController(self._tokens, request))

    def _registration(self) -> BrokerRegistrationRequest:
        c = self.config
        return BrokerRegistrationRequest(
            broker_id=BrokerId(c.node_id),
            cluster_id=c.cluster_id,
            incarnation_id=c.incarnation_id,
            listeners=tuple(
                Listener(name=e.name, host=e.host, port=u16(e.port), security_protocol=i16(e.security_protocol))
                for e in c.listeners
            ),
            features=tuple(
                Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
                for n, lo, hi in c.features
            ),
            rack=c.rack,
            log_dirs=c.log_dirs,
            previous_broker_epoch=i64(c.previous_broker_epoch),
        )

    def report_offline_log_dirs(self, dirs: Iterable[uuid.UUID]) -> None:
        """Log directories that failed: named in every heartbeat from now on (OfflineLogDirs), so
        the controller moves leadership off the replicas there; journalled once each."""
        for d in sorted(set(dirs) - self.offline_log_dirs):
            self.offline_log_dirs.add(d)
            self._outbox.append(JournalEvent("log_dir_failed", {"broker": self.config.node_id, "directory": str(d)}))

    def _heartbeat(self, metadata_offset: int) -> BrokerHeartbeatRequest:
        want_fence = self.state == BrokerState.STARTING or (
            self.state == BrokerState.RECOVERY and not self.recovery_done
        )
        return BrokerHeartbeatRequest(
            broker_id=BrokerId(self.config.node_id),
            broker_epoch=i64(self.broker_epoch),
            current_metadata_offset=i64(metadata_offset),
            want_fence=want_fence,
            want_shut_down=self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            offline_log_dirs=tuple(sorted(self.offline_log_dirs)),
        )

    # ---- answers --------------------------------------------------------------------------

    def on_failure(self, token: int, now_ms: int) -> None:
        """The request could not be sent or timed out: retry after the backoff."""
        if self._in_flight is None or self._in_flight.token != token:
            return
        self._in_flight = None
        self._next_send_ms = now_ms + self.config.retry_backoff_ms
        self._check_self_fence(now_ms)
        self._journal_heartbeat(False, now_ms)

    def on_response(self, token: int, response: Any, now_ms: int) -> None:
        flight = self._in_flight
        if flight is None or flight.token != token:
            return
        self._in_flight = None
        code = ErrorCode(response.error_code)
        if flight.kind == "register":
            self._on_registration(code, response, now_ms)
        else:
            self._on_heartbeat(code, response, now_ms)

    def _ok(self, now_ms: int) -> None:
        self._last_ok_ms = now_ms
        self._journal_heartbeat(True, now_ms)
        if self.self_fenced:
            self.self_fenced = False
            self._journal("UNFENCED_SELF")

    def _on_registration(self, code: ErrorCode, response: Any, now_ms: int) -> None:
        if code == ErrorCode.none:
            self.broker_epoch = response.broker_epoch
            self._ok(now_ms)
            self._next_send_ms = now_ms
        elif code in (ErrorCode.inconsistent_cluster_id, ErrorCode.unsupported_version):
            self.fatal_error = code.name.upper()
            self._set_state(BrokerState.SHUTTING_DOWN)
        else:
            self._next_send_ms = now_ms + self.config.retry_backoff_ms

    def _on_heartbeat(self, code: ErrorCode, response: Any, now_ms: int) -> None:
        c = self.config
        if code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            self.broker_epoch = -1
            self._next_send_ms = now_ms
            return
        if code != ErrorCode.none:
            self._next_send_ms = now_ms + c.retry_backoff_ms
            return
        self._ok(now_ms)
        self.fenced_by_controller = response.is_fenced
        if self.state == BrokerState.STARTING and response.is_caught_up:
            self._set_state(BrokerState.RECOVERY)
        elif self.state == BrokerState.RECOVERY and not response.is_fenced:
            if self._restarted and c.bugs.on("stuck-in-recovery"):
                pass  # BUG ZOO: stuck-in-recovery — log recovery after a restart never completes
            else:
                self._set_state(BrokerState.RUNNING)
        elif self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN and response.should_shut_down:
            self._set_state(BrokerState.SHUTTING_DOWN)
        fast = self.state != BrokerState.RUNNING
        self._next_send_ms = now_ms + (c.startup_heartbeat_ms if fast else c.heartbeat_interval_ms)
