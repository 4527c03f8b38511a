"""InitProducerId on a broker: producer ids handed out from blocks the controller grants (sans-IO).

As Kafka's RPCProducerIdManager: the broker holds a block of ids from the active controller
(AllocateProducerIds, node.controller.producer_ids) and gives each InitProducerId without a
transactional id the next one, at producer epoch 0 (an idempotent producer; a re-initializing
producer's old id and epoch are ignored, as Kafka does when there is no transactional id). When
90% of the block is handed out it asks for the next block ahead of need; with no id at hand the
request waits for the block, up to `wait_ms`, then is answered COORDINATOR_LOAD_IN_PROGRESS (which
clients retry, as they do against Kafka while its broker fetches a block). A failed or refused
allocation is retried after `retry_backoff_ms` while anything needs ids.

Transactional ids need a transaction coordinator, which this node does not run: they are
answered COORDINATOR_NOT_AVAILABLE.

Journal events (what the metadata checker's producer-id rules judge): `producer_id_block`
(`broker`, `broker_epoch`, `start`, `len`) for every block received, and `producer_id`
(`broker`, `producer_id`, `producer_epoch`) for every id handed out.

Outputs: `AllocateIds(token, request)` to send to the active controller (answer with
`on_response(token, response, now_ms)` or `on_failure(token, now_ms)`), `ClientReply`s and
`JournalEvent`s, collected by `take_outputs()`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i64

from kraftlab.node.controller.messages import respond
from kraftlab.node.metadata.journal import JournalEvent

PREFETCH_FRACTION = 0.9
"""Ask for the next block once this much of the current one is handed out (Kafka's 90%)."""


@dataclass(frozen=True, slots=True)
class AllocateIds:
    """Send `request` (AllocateProducerIds) to the active controller."""

    token: int
    request: AllocateProducerIdsRequest


@dataclass(frozen=True, slots=True)
class IdReply:
    """Answer the client request `token` with `response`."""

    token: Any
    response: Any


@dataclass
class _Block:
    start: int
    end: int
    next: int

    @property
    def left(self) -> int:
        return self.end - self.next


@dataclass
class _Waiting:
    token: Any
    request: Any
    deadline_ms: int


class ProducerIdManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], retry_backoff_ms: int = 100,
                 wait_ms: int = 5000) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.retry_backoff_ms = retry_backoff_ms
        self.wait_ms = wait_ms
        self._blocks: deque[_Block] = deque()
        self._waiting: deque[_Waiting] = deque()
        self._in_flight: int | None = None
        self._in_flight_epoch = -1
        self._tokens = 0
        self._retry_at_ms: int | None = None
        self._outbox: list[AllocateIds | IdReply | JournalEvent] = []

    def take_outputs(self) -> list[AllocateIds | IdReply | JournalEvent]:
        out, self._outbox = self._outbox, []
        return out

    # ---- InitProducerId ------------------------------------------------------------------

    def handle(self, token: Any, request: Any, now_ms: int) -> None:
        if request.transactional_id is not None:
            self._reply(token, request, ErrorCode.coordinator_not_available)
            return
        self._waiting.append(_Waiting(token, request, now_ms + self.wait_ms))
        self._serve(now_ms)

    def _serve(self, now_ms: int) -> None:
        while self._waiting:
            while self._blocks and self._blocks[0].left <= 0:
                self._blocks.popleft()
            if not self._blocks:
                break
            block = self._blocks[0]
            waiting = self._waiting.popleft()
            pid = block.next
            block.next += 1
            self._outbox.append(JournalEvent("producer_id", {
                "broker": self.broker_id, "producer_id": pid, "producer_epoch": 0}))
            self._reply(waiting.token, waiting.request, ErrorCode.none, pid)
        self._maybe_allocate(now_ms)

    def _needs_block(self) -> bool:
        usable = [b for b in self._blocks if b.left > 0]
        if not usable:
            return bool(self._waiting)
        b = usable[0]
        return len(usable) == 1 and (b.next - b.start) >= PREFETCH_FRACTION * (b.end - b.start)

    def _maybe_allocate(self, now_ms: int) -> None:
        if self._in_flight is not None or not self._needs_block():
            return
        if self._retry_at_ms is not None and now_ms < self._retry_at_ms:
            return
        epoch = self._broker_epoch()
        if epoch < 0:  # not registered (yet): nothing to ask with; retried on the next tick
            return
        self._retry_at_ms = None
        self._tokens += 1
        self._in_flight, self._in_flight_epoch = self._tokens, epoch
        self._outbox.append(AllocateIds(self._tokens, AllocateProducerIdsRequest(
            broker_id=BrokerId(self.broker_id), broker_epoch=i64(epoch))))

    def _reply(self, token: Any, request: Any, code: ErrorCode, producer_id: int = -1) -> None:
        self._outbox.append(IdReply(token, respond(request, {
            "error_code": code, "producer_id": producer_id, "producer_epoch": 0 if producer_id >= 0 else -1})))

    # ---- the controller's answers and time -----------------------------------------------

    def on_response(self, token: int, response: Any, now_ms: int) -> None:
        if token != self._in_flight:
            return
        self._in_flight = None
        if response.error_code != ErrorCode.none or response.producer_id_len <= 0:
            self._retry_at_ms = now_ms + self.retry_backoff_ms
            return
        start, length = int(response.producer_id_start), int(response.producer_id_len)
        self._blocks.append(_Block(start, start + length, start))
        self._outbox.append(JournalEvent("producer_id_block", {
            "broker": self.broker_id, "broker_epoch": self._in_flight_epoch, "start": start, "len": length}))
        self._serve(now_ms)

    def on_failure(self, token: int, now_ms: int) -> None:
        if token != self._in_flight:
            return
        self._in_flight = None
        self._retry_at_ms = now_ms + self.retry_backoff_ms

    def tick(self, now_ms: int) -> None:
        while self._waiting and self._waiting[0].deadline_ms <= now_ms:
            w = self._waiting.popleft()
            self._reply(w.token, w.request, ErrorCode.coordinator_load_in_progress)
        self._maybe_allocate(now_ms)
