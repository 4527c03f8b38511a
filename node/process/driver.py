"""The Raft driver: feeds the sans-IO core (through `RaftNode`) with events and real time, one step at a
time, and applies its outputs in order — journal events, metrics, messages to send, commits
completing appends. The core makes every storage effect of a step durable before returning it, so
messages go out as soon as a step returns (flush first, then send) — except the leader's own
appends on a disk log: the core defers their flush (`RaftCore.deferred_flush`) and the driver runs
it on a flush thread after sending the step's messages, so followers fetch (and fsync) while the
leader fsyncs; when the fsync is done the core is told (`flushed`) and counts it."""

import asyncio
import errno
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from kraftlab.node import metrics as mx
from kraftlab.node.clock import Clock
from kraftlab.node.journal import Journal
from kraftlab.node.process.storage import journal_corruption
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import Commit, NotLeader, Output, RaftCore, RaftSafetyError
from kraftlab.node.raft.node import RaftNode
from kraftlab.node.raft.ports import Batch, LogCorruption, Record
from kraftlab.node.raft.states import Leader
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.log import DiskLog, FlushTicket

log = logging.getLogger("kraft-node")

MAX_TIMER_SLEEP_S = 0.1  # re-check at least this often (the clock file may change the rate)
QUORUM_SAMPLE_MS = 1000  # a leader journals the age of each voter's last Fetch at most this often

# ---------------------------------------------------------------------------------------------
# The Raft driver: one step at a time, outputs applied in order


@dataclass(slots=True)
class _PendingAppend:
    last_offset: int
    epoch: int
    """The leader epoch the records were appended in."""
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
        self._gauges: dict[str, float] = {}  # last value set of each gauge (a step sets only changes)
        self._inbound: dict[int, _Inbound] = {}
        self._next_ref = 0
        self._appends: list[_PendingAppend] = []
        self._rate = mx.WindowedRate()
        self._last_role: str | None = None
        self._snapshot_offset = 0  # end offset of the latest snapshot (from the core's snapshot events)
        self._quorum_sampled_ms: int | None = None
        self._fatal_seen: set[str] = set()  # errors already journalled as `fatal` (a failing tick repeats)
        self.failed: BaseException | None = None
        self._journalled_hw = 0  # the highest `hw` event journalled (a failing step's is lost with its output)
        self.stopped = asyncio.Event()
        self.after_step: Callable[[int], None] | None = None
        self.started = False
        # The deferred leader flush: on a disk log only (an in-memory log flushes for free).
        self._disk_log = node.core.log if isinstance(node.core.log, DiskLog) else None
        self._flusher: ThreadPoolExecutor | None = None
        self._flushing: FlushTicket | None = None
        self._flush_wanted = 0
        if self._disk_log is not None:
            node.core.deferred_flush = True
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="raft-flush")

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

    def next_offset(self) -> int:
        """The offset the next append's first record would get."""
        return self.node.next_offset()

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
        now = self.now()
        try:
            out = step(now)
        except (RaftSafetyError, LogCorruption, StorageError, OSError) as e:
            self._fail(e)
            raise
        except NotLeader:
            raise
        except Exception as e:
            if e is self.node.machine_error:
                self._fail(e)  # the committed log could not be applied: fail-stop
            else:
                self._journal_fatal(e)
            raise
        self._queue.append(out)
        if self._applying:
            return  # a state machine callback appended: its output is applied after this one
        self._applying = True
        try:
            while self._queue:
                self._apply(self._queue.pop(0), now)
        finally:
            self._applying = False
        if self.after_step is not None:
            self.after_step(now)

    def _fail(self, error: BaseException) -> None:
        """Fail-stop: no further step runs (the server sees `stopped` and exits non-zero). A safety
        error or a state machine that cannot apply the committed log is journalled `fatal` with
        stopped:true; the first failure is the one kept (a nested step may fail on its way out)."""
        if self.failed is not None:
            return
        log.error("stopping: %s", error)
        self.failed = error
        core = self.core
        if core.high_watermark > self._journalled_hw:
            # the failing step's output (its `hw` event among it) is lost, not what it did to the core:
            # the state machine may have applied up to that high-water mark already
            self.journal.write("hw", hw=core.high_watermark, epoch=core.epoch)
        if isinstance(error, LogCorruption):
            journal_corruption(self.journal, error, "metadata log")
        elif isinstance(error, OSError):
            self._journal_log_dir_failed(error)
        elif isinstance(error, RaftSafetyError) or error is self.node.machine_error:
            self._journal_fatal(error)
        self.stopped.set()

    def fail_stop(self, error: OSError) -> None:
        """An I/O error outside a step (the high-water mark checkpoint): as Kafka halts when its
        metadata log directory fails, the node stops rather than go on with a disk it cannot trust."""
        self._fail(error)

    def _journal_log_dir_failed(self, error: OSError) -> None:
        """`log_dir_failed`: the metadata log directory returned an I/O error (EIO, ENOSPC, …); the node
        stops. Not a bug of the node, a fault of its disk: what it must do is stop."""
        core = self.core
        self.journal.write("log_dir_failed", error=f"{type(error).__name__}: {error}",
                           errno=errno.errorcode.get(error.errno or 0), path=error.filename, epoch=core.epoch,
                           hw=core.high_watermark, log_end=core.log.end_offset())

    def _journal_fatal(self, error: BaseException) -> None:
        """Journal `fatal` once per distinct error: the core broke its own invariants (a safety
        error, or any unexpected exception in a step) — a bug, never a fault of the environment."""
        text = f"{type(error).__name__}: {error}"
        if text in self._fatal_seen:
            return
        self._fatal_seen.add(text)
        core = self.core
        self.journal.write("fatal", error=text, stopped=self.failed is error, epoch=core.epoch,
                           hw=core.high_watermark, applied=core.applied_offset, log_end=core.log.end_offset())

    # ---- outputs -----------------------------------------------------------------------------

    def _apply(self, out: Output, now: int) -> None:
        """Apply one step's output; `now` is the step's time (one clock read per step)."""
        for event in out.events:
            fields = dict(event)
            ev = str(fields.pop("ev"))
            self.journal.write(ev, **fields)
            if ev == "hw":
                self._journalled_hw = max(self._journalled_hw, int(fields.get("hw", 0)))
            if ev == "role" and fields.get("role") == "candidate":
                self.metrics.inc(mx.RAFT_ELECTIONS)
            elif ev == "snapshot" and fields.get("action") in ("create", "load", "fetch"):
                self._snapshot_offset = max(self._snapshot_offset, int(fields.get("offset", 0)))
        for update in out.updates:
            if isinstance(update, Commit):
                self._on_commit(update.batches, now)
        # Latency: commits are acknowledged and the leader's flush thread woken before the step's
        # messages are handed on (neither depends on them; both are on a commit's critical path).
        self._settle_appends(now)
        if out.flush_to is not None:
            self._flush_wanted = max(self._flush_wanted, out.flush_to)
            self._start_flush()
        for envelope in out.messages:
            # A response answers a request routed in by `request` (positive refs; the core's own
            # requests carry negative ones); everything else goes to the transport.
            pending = None
            if isinstance(envelope.ref, int) and not m.is_request(envelope.message):
                pending = self._inbound.pop(envelope.ref, None)
            if pending is not None:
                if not pending.future.done():
                    pending.future.set_result(envelope.message)
            else:
                self._send(envelope)
        self._update_gauges(now)
        self._sample_quorum(now)
        self._schedule(out.deadline, now)

    # ---- the deferred leader flush -------------------------------------------------------------

    def _start_flush(self) -> None:
        """Begin a flush on the flush thread, unless one runs (its completion starts the next)."""
        disk = self._disk_log
        if disk is None or self._flusher is None or self._flushing is not None or self.failed is not None:
            return
        if disk.flushed_end_offset() >= min(self._flush_wanted, disk.end_offset()):
            return
        ticket = disk.begin_flush()
        self._flushing = ticket
        loop = asyncio.get_running_loop()
        done: Future[None] = self._flusher.submit(ticket.sync)
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(self._flush_done, f))

    def _flush_done(self, done: Future[None]) -> None:
        ticket, self._flushing = self._flushing, None
        assert ticket is not None and self._disk_log is not None
        error = done.exception()
        if error is not None:
            # An fsync that failed may have dropped the dirty pages: nothing about them is known.
            self._fail(error)
            return
        if self.failed is not None or self.stopped.is_set():
            return
        self._disk_log.complete_flush(ticket)
        try:
            self._step(lambda now: self.node.flushed(now))
        except Exception:
            if self.failed is None:
                log.exception("flushed step failed")
        self._start_flush()

    def close(self) -> None:
        """Stop the flush thread (a flush under way completes; the log's own close flushes the rest).
        After a failure nothing waits for it: flushes queued on a failing disk must not hold up the
        event loop (the process exits; what was not flushed is not claimed durable)."""
        if self._flusher is not None:
            failed = self.failed is not None
            self._flusher.shutdown(wait=not failed, cancel_futures=failed)
            self._flusher = None

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
                if self.core.log.end_offset_for_epoch(p.epoch).offset > p.last_offset:
                    p.future.set_result(p.last_offset)
                else:  # another leader's records were committed at its offsets: its own were lost
                    p.future.set_exception(NotLeader(self.core.leader_id, self.core.epoch))
            else:
                keep.append(p)
        self._appends = keep

    def _sample_quorum(self, now: int) -> None:
        """Journal `quorum` (a leader's last-Fetch age per voter and the replica log end offsets its
        DescribeQuorum gives, at most once per QUORUM_SAMPLE_MS) so a checker can see a leader that
        kept leading without hearing from a majority, or that reports progress a replica never made."""
        state = self.core.state
        if not isinstance(state, Leader):
            self._quorum_sampled_ms = None
            return
        if self._quorum_sampled_ms is not None and now - self._quorum_sampled_ms < QUORUM_SAMPLE_MS:
            return
        self._quorum_sampled_ms = now
        ages = {str(v): max(0, now - p.last_fetch_ms) for v, p in state.voters.items() if v != self.core.node_id}
        described = self.core.describe_quorum(now)  # what DescribeQuorum answers an operator now
        replicas = {str(r.replica_id): r.log_end_offset for r in (*described.voters, *described.observers)}
        self.journal.write("quorum", epoch=state.epoch, fetch_age_ms=ages,
                           check_quorum_ms=self.core.config.check_quorum_timeout_ms, replicas=replicas)

    def _update_gauges(self, now: int) -> None:
        core = self.core
        leader = core.leader_id
        hw = core.high_watermark
        gauge = self._gauge
        gauge(mx.RAFT_EPOCH, core.epoch)
        gauge(mx.RAFT_LEADER, -1 if leader is None else leader)
        gauge(mx.RAFT_HIGH_WATERMARK, hw)
        gauge(mx.RAFT_LOG_END_OFFSET, core.log.end_offset())
        gauge(mx.METADATA_LAG, max(0, hw - core.applied_offset))
        gauge(mx.METADATA_COMMIT_RATE, self._rate.rate(float(now)))
        gauge(mx.METADATA_SNAPSHOT_OFFSET_LAG, hw - self._snapshot_offset)
        role = str(core.role)
        if role != self._last_role:
            self.metrics.set_role(role)
            self._last_role = role

    def _gauge(self, name: str, value: float) -> None:
        """Set a gauge unless it already holds `value` (most steps change one or two of them)."""
        if self._gauges.get(name) != value:
            self._gauges[name] = value
            self.metrics.set(name, value)

    # ---- timer -------------------------------------------------------------------------------

    def _schedule(self, deadline: int | None, now: int) -> None:
        if self.stopped.is_set():
            return
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
                self._schedule(None, self.now())  # never leave the core without a timer

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---- requests from peers, and appends ----------------------------------------------------

    def submit(self, src: int, message: m.Message, timeout_s: float) -> asyncio.Future[m.Message]:
        """Route a request from `src` into the core now; the future holds the response it emits for
        it — usually already done (answered within the step), else it fails with TimeoutError after
        `timeout_s`. A caller can answer a done one without a task or a timer."""
        if not self.started or self.failed is not None:
            raise ConnectionRefusedError("the Raft core is not running")
        self._next_ref += 1
        ref = self._next_ref
        loop = asyncio.get_running_loop()
        future: asyncio.Future[m.Message] = loop.create_future()
        self._inbound[ref] = _Inbound(future)
        try:
            self.handle(m.Envelope(src, self.core.node_id, message, ref))
        except BaseException:
            self._inbound.pop(ref, None)
            raise
        if future.done():
            self._inbound.pop(ref, None)
            return future
        timeout = loop.call_later(timeout_s, _time_out, future)

        def release(_: asyncio.Future[m.Message]) -> None:
            timeout.cancel()
            self._inbound.pop(ref, None)

        future.add_done_callback(release)
        return future

    async def request(self, src: int, message: m.Message, timeout_s: float) -> m.Message:
        """Route a request from `src` into the core; wait for the response it emits for it."""
        return await self.submit(src, message, timeout_s)

    async def append_and_wait(self, records: Sequence[Record], timeout_s: float) -> int:
        """Append as leader and wait until committed; returns the base offset. Raises NotLeader if
        the append step lost leadership before the records reached the log (it resigned and dropped
        them from its linger buffer) or if another leader's records are committed at their offsets."""
        epoch = self.core.epoch
        base = self.append(records)
        last = base + len(records) - 1
        core = self.core
        if not core.is_leader and core.log.end_offset_for_epoch(epoch).offset <= last:
            raise NotLeader(core.leader_id, core.epoch)  # the step resigned and dropped them unwritten
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._appends.append(_PendingAppend(last, epoch, future))
        self._settle_appends(self.now())
        await asyncio.wait_for(future, timeout_s)
        return base


def _time_out(future: asyncio.Future[m.Message]) -> None:
    if not future.done():
        future.set_exception(TimeoutError("no response from the Raft core in time"))
