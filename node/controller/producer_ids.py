"""AllocateProducerIds on the active controller (Kafka's ProducerIdControlManager).

A broker asks for a block of producer ids when it has none left to hand out (InitProducerId);
the controller grants the next `BLOCK_SIZE` ids, [next producer id, next + BLOCK_SIZE), and
writes a ProducerIdsRecord whose `next_producer_id` is the block's end: replayed on every
controller, so a controller that takes over after a failover continues after every block its
predecessors committed, and no id is granted twice. The request must name the broker's current
registration (STALE_BROKER_EPOCH otherwise, as Kafka's checkBrokerEpoch); ids running past
2^63 - 1 are UNKNOWN_SERVER_ERROR. One record, atomic; the answer is held until it commits.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.records import ProducerIdsRecord

BLOCK_SIZE = 1000
"""Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE."""
MAX_PRODUCER_ID = 2**63 - 1


def allocate_producer_ids(w: Write, req: Any) -> Outcome:
    broker_id, broker_epoch = int(req.broker_id), int(req.broker_epoch)
    broker = w.image.brokers.get(broker_id)
    start = w.image.next_producer_id
    decision: dict[str, Any] = {"api": "AllocateProducerIds", "broker": broker_id, "broker_epoch": broker_epoch}
    if broker is None or broker.epoch != broker_epoch:
        code = ErrorCode.stale_broker_epoch
    elif start > MAX_PRODUCER_ID - BLOCK_SIZE:
        code = ErrorCode.unknown_server_error  # Kafka: "Exhausted all producerIds"
    else:
        code = ErrorCode.none
        w.emit(ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + BLOCK_SIZE))
        decision.update(producer_id_start=start, producer_id_len=BLOCK_SIZE)
    values: dict[str, Any] = {"error_code": code, "producer_id_start": -1, "producer_id_len": 0}
    if code == ErrorCode.none:
        values.update(producer_id_start=start, producer_id_len=BLOCK_SIZE)
    return Outcome(values, [{**decision, "error": error_name(code)}])
